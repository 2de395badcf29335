package main

import (
	"math"
	"testing"
)

// TestPresetPolluxArtifactPollux: the artifact's Pollux on workload-6
// averages 2,446.13 s (results-jobload/pollux-1.0/summary.json of
// petuum/adaptdl osdi21-artifact, the figure the issue quotes). Its search
// is a seeded-at-random genetic algorithm and tide's agents fit with a
// different optimiser, so runs differ by the seed alone by about 0.5%
// (docs/elastic.md lists eight seeds); tide's, under the same rules, must be
// within 1%, and its jobs must have paid for their resizes.
func TestPresetPolluxArtifactPollux(t *testing.T) {
	if testing.Short() {
		t.Skip("a full workload-6 replay under Pollux")
	}
	code, out, errs := tide(t, "sim", "--preset", "pollux-artifact", "--policy", "pollux", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	p := decode(t, out).Policies[0]
	a := p["avg_jct_s"].(float64)
	t.Logf("avg JCT %.1f s (artifact 2446.13 s)", a)
	if math.Abs(a-2446.13)/2446.13 > 0.01 {
		t.Errorf("avg JCT %v, artifact 2446.13", a)
	}
	// Every allocation change costs the artifact's 30 s.
	r, s := p["resizes_per_job"].(float64), p["restart_seconds_per_job"].(float64)
	if r <= 0 || s < 30*(1+r) {
		t.Errorf("%v resizes and %v restart seconds per job: want resizes, each costing 30 s, and 30 s to start", r, s)
	}
}
