package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tide-sched/tide/solver/solvertest"
)

// TestSimScenarioPolicyOverride: --policy replaces the file's policies; a
// bad spec names the flag.
func TestSimScenarioPolicyOverride(t *testing.T) {
	path := writeScenario(t, "")
	code, out, errs := tide(t, "sim", "--scenario", path, "--policy", "edf, edgeflow:offload=missing", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o struct {
		Points []struct {
			Policies []struct {
				Policy string `json:"name"`
			} `json:"policies"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(o.Points) != 1 || len(o.Points[0].Policies) != 2 || o.Points[0].Policies[0].Policy != "edf" ||
		o.Points[0].Policies[1].Policy != "edgeflow:offload=missing" {
		t.Fatalf("policies not replaced: %s", out)
	}
	for _, bad := range []string{"nosuch", "edgeflow:offload=sometimes", "all", " , "} {
		code, _, errs := tide(t, "sim", "--scenario", path, "--policy", bad)
		if code != 2 || !strings.Contains(errs, "--policy") {
			t.Errorf("--policy %q: exit %d, stderr %q: want a usage error naming --policy", bad, code, errs)
		}
	}
}

// TestSimScenarioForecast: --forecast scores the forecaster on the varying
// sites only, and says so when none varies.
func TestSimScenarioForecast(t *testing.T) {
	path := writeScenario(t, "")
	code, out, errs := tide(t, "sim", "--scenario", path, "--forecast")
	if code != 0 || !strings.Contains(out, "nothing to forecast") {
		t.Fatalf("exit %d, out %q, err %q", code, out, errs)
	}
	path = writeScenario(t, "availability: {diurnal: [{site: edge, measure: available, trough: 0, peak: 2, noise: 0.5, seed: 3}]}\n")
	code, out, errs = tide(t, "sim", "--scenario", path, "--forecast", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o struct {
		Rows []struct {
			Site       string  `json:"site"`
			Forecaster float64 `json:"forecaster"`
			N          int     `json:"forecasts"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(o.Rows) != 4 || o.Rows[0].Site != "edge" || o.Rows[0].N == 0 {
		t.Fatalf("want 4 horizons of site edge, got %s", out)
	}
}

// TestSimScenarioBound: --bound prints, per sweep point, the most deadlines
// any schedule could meet; no policy run on the same file meets more.
func TestSimScenarioBound(t *testing.T) {
	solvertest.Require(t)
	path := writeScenario(t, "sweep: {param: edge_servers, values: [0, 2]}\n")
	code, out, errs := tide(t, "sim", "--scenario", path, "--bound", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var b struct {
		Points []struct {
			Value float64 `json:"value"`
			Jobs  int     `json:"jobs"`
			Bound int     `json:"bound"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	code, out, errs = tide(t, "sim", "--scenario", path, "--policy", "edgeflow,elasticflow,edf", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Points []struct {
			Policies []struct {
				Name string   `json:"name"`
				N    int      `json:"jobs_with_deadline"`
				Met  *float64 `json:"deadline_met_frac"`
			} `json:"policies"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(b.Points) != 2 || len(r.Points) != 2 {
		t.Fatalf("want two points each: %+v, %+v", b, r)
	}
	for i, p := range r.Points {
		if b.Points[i].Jobs != 10 {
			t.Errorf("point %v: %d jobs with deadlines, want 10", b.Points[i].Value, b.Points[i].Jobs)
		}
		for _, s := range p.Policies {
			if met := int(*s.Met*float64(s.N) + 0.5); met > b.Points[i].Bound {
				t.Errorf("point %v: %s met %d, above the bound %d", b.Points[i].Value, s.Name, met, b.Points[i].Bound)
			}
		}
	}
	code, out, _ = tide(t, "sim", "--scenario", path, "--bound", "--points", "2")
	if code != 0 || !strings.Contains(out, "at most met") || !strings.Contains(out, "edge_servers") {
		t.Errorf("table: exit %d, %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--bound"}, "--scenario"},
		{[]string{"sim", "--scenario", path, "--bound", "--policy", "edf"}, "--policy"},
		{[]string{"sim", "--scenario", path, "--bound", "--report", t.TempDir()}, "--report"},
		{[]string{"sim", "--scenario", path, "--bound", "--forecast"}, "give one"},
		{[]string{"sim", "--scenario", path, "--forecast", "--policy", "edf"}, "--policy"},
	} {
		code, _, errs := tide(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, %q: want a usage error naming %s", tc.args, code, errs, tc.want)
		}
	}
}
