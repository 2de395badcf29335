package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPresetPolluxArtifactPollux: the artifact's Pollux on workload-6
// averages 2,446.13 s (results-jobload/pollux-1.0/summary.json of
// petuum/adaptdl osdi21-artifact). --preset pollux-artifact pins Pollux to
// the artifact's restart rule (restart_cost=job), under which tide
// reproduces it to within 1%: its search is a seeded-at-random genetic
// algorithm and tide's agents fit with a different optimiser, so runs
// differ by the seed alone by about 0.5% (docs/elastic.md lists seeds 0-7).
// tide's own rule (restart_cost=gpus, the default outside the preset: a
// change priced by the GPUs it idles), asked for explicitly, is at or
// below the artifact on the default seed and not implausibly far below
// (within 3%). Either way the jobs must have paid for their resizes.
func TestPresetPolluxArtifactPollux(t *testing.T) {
	if testing.Short() {
		t.Skip("two full workload-6 replays under Pollux")
	}
	const artifact = 2446.13
	for _, tc := range []struct {
		policy string
		lo, hi float64
	}{
		// The preset pins the artifact's restart rule...
		{"pollux", 0.99 * artifact, 1.01 * artifact},
		// ...and tide's own rule, asked for, is below the artifact.
		{"pollux:restart_cost=gpus", 0.97 * artifact, artifact},
	} {
		code, out, errs := tide(t, "sim", "--preset", "pollux-artifact", "--policy", tc.policy, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.policy, code, errs)
		}
		p := decode(t, out).Policies[0]
		a := p["avg_jct_s"].(float64)
		t.Logf("%s: avg JCT %.1f s (artifact %.2f s)", tc.policy, a, artifact)
		if a < tc.lo || a > tc.hi {
			t.Errorf("%s: avg JCT %.1f s, want [%.1f, %.1f] (artifact %.2f)", tc.policy, a, tc.lo, tc.hi, artifact)
		}
		// Every allocation change costs the artifact's 30 s.
		r, s := p["resizes_per_job"].(float64), p["restart_seconds_per_job"].(float64)
		if r <= 0 || s < 30*(1+r) {
			t.Errorf("%s: %v resizes and %v restart seconds per job: want resizes, each costing 30 s, and 30 s to start", tc.policy, r, s)
		}
	}
}

// TestSweepMeansPerDirectory: traces from two directories get a mean row
// each, then the overall mean. d1/a.csv: one 50 s job (avg 50); d2/b.csv
// and d2/c.csv: 100 s and 20 s jobs (avg 60); all three: 56.7.
func TestSweepMeansPerDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct{ path, body string }{
		{"d1/a.csv", "id,submit,gpus,duration\na,0,1,50\n"},
		{"d2/b.csv", "id,submit,gpus,duration\nb,0,1,100\n"},
		{"d2/c.csv", "id,submit,gpus,duration\nc,0,1,20\n"},
	} {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := tide(t, "sweep", "--traces", filepath.Join(dir, "*", "*.csv"), "--cluster", "1x1:t4", "--policy", "fifo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][2]string{{"d1" + string(filepath.Separator), "50.0"}, {"d2" + string(filepath.Separator), "60.0"}, {"mean", "56.7"}}
	if len(lines) != 1+3+len(want) {
		t.Fatalf("want header, 3 traces and %d means:\n%s", len(want), out)
	}
	for i, w := range want {
		f := strings.Fields(lines[4+i])
		if !strings.HasSuffix(f[len(f)-2], w[0]) || f[len(f)-1] != w[1] {
			t.Errorf("mean row %d: %q, want ...%s %s", i, lines[4+i], w[0], w[1])
		}
	}
}
