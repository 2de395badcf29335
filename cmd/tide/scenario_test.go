package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeScenario writes a small two-site scenario and its trace into a
// temporary directory and returns the scenario's path.
func writeScenario(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	tr := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	for i := 0; i < 10; i++ {
		tr += strings.Join([]string{strconv.Itoa(i), strconv.Itoa(i * 40), "100", "bert", strconv.Itoa(i*40 + 1500), "64", "1", "600"}, ",") + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := `name: tiny
cluster:
  sites:
    - {name: cloud, nodes: [{count: 1, gpus: 2, gpu: a100}]}
    - {name: edge, kind: edge, nodes: [{count: 2, gpus: 1, gpu: v100}]}
trace: {file: t.csv, format: elasticflow}
model: {kind: duration, edge: {type: v100, ref: a100, lambda: 0.5}}
policies: [elasticflow, edgeflow]
` + extra
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(sc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimScenario(t *testing.T) {
	path := writeScenario(t, "sweep: {param: edge_servers, values: [0, 2]}\n")
	code, out, errs := tide(t, "sim", "--scenario", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o struct {
		Scenario string `json:"scenario"`
		Points   []struct {
			Param    string                   `json:"param"`
			Value    float64                  `json:"value"`
			Policies []map[string]interface{} `json:"policies"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if o.Scenario != "tiny" || len(o.Points) != 2 || o.Points[1].Value != 2 || len(o.Points[1].Policies) != 2 {
		t.Fatalf("unexpected output: %s", out)
	}
	if _, ok := o.Points[1].Policies[1]["sites"]; !ok {
		t.Errorf("a multi-site run has no sites metrics: %v", o.Points[1].Policies[1])
	}
	// The same command prints the same bytes.
	if _, again, _ := tide(t, "sim", "--scenario", path, "--json"); again != out {
		t.Error("two runs of the scenario differ")
	}
	// Text: one table per point, then the sweep summary; --report writes
	// the plot.
	dir := t.TempDir()
	code, out, errs = tide(t, "sim", "--scenario", path, "--report", dir)
	if code != 0 || !strings.Contains(out, "deadlines met (%) by edge_servers") || !strings.Contains(out, "edge_servers = 2") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, f := range []string{"deadlines.svg", "edge_servers-2/report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}

func TestSimScenarioErrors(t *testing.T) {
	bad := writeScenario(t, "round: -1\n")
	code, _, errs := tide(t, "sim", "--scenario", bad)
	if code == 0 || !strings.Contains(errs, "s.yaml line 9 field round") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = tide(t, "sim", "--scenario", filepath.Join(t.TempDir(), "none.yaml"))
	if code == 0 || !strings.Contains(errs, "none.yaml") {
		t.Errorf("missing file: exit %d, stderr %q", code, errs)
	}
}
