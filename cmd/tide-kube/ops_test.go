package main

import (
	"bytes"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPprofFlag: /debug/pprof/ is served only with --pprof, beside the
// probes.
func TestPprofFlag(t *testing.T) {
	probes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	})
	for _, on := range []bool{false, true} {
		fs := flag.NewFlagSet("tide kube", flag.ContinueOnError)
		o := addKubeOpsFlags(fs)
		args := []string{}
		if on {
			args = append(args, "--pprof")
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		h := o.handler(probes)
		get := func(path string) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec.Code
		}
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if got := get("/debug/pprof/heap"); got != want {
			t.Errorf("--pprof=%v: /debug/pprof/heap gave %d, want %d", on, got, want)
		}
		if got := get("/healthz"); got != http.StatusOK {
			t.Errorf("--pprof=%v: /healthz gave %d, want 200", on, got)
		}
	}
}

// TestFlagMistake: a mistaken flag is one line and exit 2, naming the flag
// and where the help is; -h prints the help.
func TestFlagMistake(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"--round", "soon"}, &out, &errs); code != 2 || strings.Count(errs.String(), "\n") != 1 ||
		!strings.Contains(errs.String(), "-round") || !strings.Contains(errs.String(), "tide-kube -h") {
		t.Errorf("exit %d, stderr:\n%s", code, errs.String())
	}
	errs.Reset()
	if code := run([]string{"-h"}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "-scheduler-name") {
		t.Errorf("-h: exit %d, stderr:\n%.200s", code, errs.String())
	}
}
