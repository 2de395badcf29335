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

// TestSimScenarioPoints: --points reruns one value of a sweep alone, with
// the same numbers that point has in the whole sweep.
func TestSimScenarioPoints(t *testing.T) {
	path := writeScenario(t, "sweep: {param: edge_servers, values: [0, 1, 2]}\n")
	type points struct {
		Points []struct {
			Value    float64           `json:"value"`
			Policies []json.RawMessage `json:"policies"`
		} `json:"points"`
	}
	read := func(args ...string) points {
		t.Helper()
		code, out, errs := tide(t, append([]string{"sim", "--scenario", path, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var p points
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		return p
	}
	all, one := read(), read("--points", "2")
	if len(all.Points) != 3 || len(one.Points) != 1 || one.Points[0].Value != 2 {
		t.Fatalf("points: whole sweep %d, --points 2 gave %+v", len(all.Points), one.Points)
	}
	for i := range one.Points[0].Policies {
		if string(one.Points[0].Policies[i]) != string(all.Points[2].Policies[i]) {
			t.Errorf("policy %d at edge_servers=2: alone %s, in the sweep %s", i, one.Points[0].Policies[i], all.Points[2].Policies[i])
		}
	}
	if two := read("--points", "1, 0"); len(two.Points) != 2 || two.Points[0].Value != 1 || two.Points[1].Value != 0 {
		t.Errorf("--points 1,0: %+v", two.Points)
	}
	// A value the file does not list runs, with a note that it is not an
	// index; a listed one gets none.
	for _, c := range []struct {
		points string
		note   bool
	}{{"2", false}, {"5", true}, {"0,3", true}} {
		code, _, errs := tide(t, "sim", "--scenario", path, "--json", "--points", c.points)
		got := strings.Contains(errs, "is not one of the file's edge_servers values (0, 1, 2); it runs as given")
		if code != 0 || got != c.note {
			t.Errorf("--points %s: exit %d, note %v, want %v: %q", c.points, code, got, c.note, errs)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", path, "--points", "x"}, `"x" is not a number`},
		{[]string{"--scenario", path, "--points", "-1"}, "want a finite number from 0 to 1e7"},
		{[]string{"--scenario", writeScenario(t, ""), "--points", "1"}, "has no sweep"},
		{[]string{"--points", "1"}, "no --scenario given"},
		{[]string{"--scenario", path, "--points", "1", "--forecast"}, "not per sweep point"},
	} {
		code, _, errs := tide(t, append([]string{"sim"}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestScenarioProfiles: --cpuprofile and --memprofile write their
// profiles with --scenario too, running the policies, --bound or
// --forecast; they were accepted there and never written.
func TestScenarioProfiles(t *testing.T) {
	path := writeScenario(t, "")
	for _, mode := range [][]string{nil, {"--bound"}, {"--forecast"}} {
		dir := t.TempDir()
		cpu, heap := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "heap.prof")
		args := append([]string{"sim", "--scenario", path, "--json", "--cpuprofile", cpu, "--memprofile", heap}, mode...)
		if code, _, errs := tide(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", mode, code, errs)
		}
		for _, f := range []string{cpu, heap} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Errorf("%v: %v", mode, err)
				continue
			}
			if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%v: %s of %d bytes does not start like gzip", mode, filepath.Base(f), len(b))
			}
		}
	}
	code, _, errs := tide(t, "sim", "--scenario", path, "--bound", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if code == 0 || !strings.Contains(errs, "--cpuprofile") {
		t.Errorf("uncreatable profile: exit %d, %s", code, errs)
	}
}
