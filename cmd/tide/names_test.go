package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDistinctPolicyNames: two specs of one policy are told apart in the
// table, the JSON and the report directory, by the specs the user wrote.
func TestDistinctPolicyNames(t *testing.T) {
	const a, b = "tiresias", "tiresias:limits=600/1200"
	args := []string{"sim", "--policy", a + "," + b}
	code, out, errs := tide(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	o := decode(t, out)
	if len(o.Policies) != 2 || o.Policies[0]["name"] != a || o.Policies[1]["name"] != b {
		t.Errorf("JSON names %v and %v, want %q and %q", o.Policies[0]["name"], o.Policies[1]["name"], a, b)
	}
	dir := t.TempDir()
	code, out, errs = tide(t, append(args, "--report", dir)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	header := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "metric") {
			header = line
		}
	}
	if f := strings.Fields(header); len(f) != 3 || f[1] != a || f[2] != b {
		t.Errorf("table header %q, want metric, %s, %s", header, a, b)
	}
	for _, file := range []string{"summary.json", "report.html"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), b) {
			t.Errorf("%s does not name %q", file, b)
		}
	}
	csvs, _ := filepath.Glob(filepath.Join(dir, "jobs-*.csv"))
	if len(csvs) != 2 {
		t.Errorf("%d per-job CSV files, want 2: %v", len(csvs), csvs)
	}
}
