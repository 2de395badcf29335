package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
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
