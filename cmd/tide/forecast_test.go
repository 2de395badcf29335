package main

import (
	"encoding/json"
	"strings"
	"testing"
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
