package sim_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// artifactAvgJCT is the Pollux artifact simulator's average JCT for Tiresias
// on workload-6, in seconds: the mean of the per-job JCTs in
// testdata/pollux-artifact-tiresias-workload-6.json, which the artifact
// wrote (petuum/adaptdl osdi21-artifact,
// simulator/results-jobload/tiresias-1.0/summary.json).
const artifactAvgJCT = 3469.69375

// workload6 reads the embedded workload-6 and the Pollux profiles.
func workload6(t testing.TB) ([]*job.Job, perf.Model, *cluster.Cluster) {
	t.Helper()
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Read(f, data.DefaultTrace, trace.Pollux, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pollux.Load(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cluster.ParseShorthand("16x4:t4")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tr.Jobs, m, c
}

// artifactRun replays workload-6 with the artifact simulator's rules: a
// round every 60 s and none at events, the most-free placer, whole-second
// epoch crossings, Tiresias with the artifact's single 57,600 GPU-s limit,
// and the model's 30 s per allocation change.
func artifactRun(t testing.TB, jobs []*job.Job, m perf.Model, c *cluster.Cluster) *report.Run {
	p, err := policy.Parse("tiresias:preset=pollux", policy.Context{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	run, err := sim.Run(sim.Config{Cluster: c, Model: m, Policy: p, Placer: place.MostFree{},
		Round: 60, WholeSeconds: true}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestPolluxArtifactTiresias compares tide with the Pollux artifact on the
// same inputs: the issue asks for the average JCT within 3%; tide in fact
// reproduces every job's JCT, which this test also holds it to (to 1 s).
func TestPolluxArtifactTiresias(t *testing.T) {
	raw, err := os.ReadFile("testdata/pollux-artifact-tiresias-workload-6.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]float64
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	jobs, m, c := workload6(t)
	run := artifactRun(t, jobs, m, c)
	if len(run.Jobs) != len(want) {
		t.Fatalf("%d jobs replayed, the artifact has %d", len(run.Jobs), len(want))
	}
	sum, off := 0.0, 0
	for _, r := range run.Jobs {
		w, ok := want[r.ID]
		if !ok {
			t.Fatalf("job %s is not in the artifact's results", r.ID)
		}
		jct := r.Finish - r.Submit
		sum += jct
		if math.Abs(jct-w) > 1 {
			off++
			if off <= 10 {
				t.Errorf("job %s: JCT %.0f s, artifact %.0f s", r.ID, jct, w)
			}
		}
	}
	avg := sum / float64(len(run.Jobs))
	if d := math.Abs(avg-artifactAvgJCT) / artifactAvgJCT; d > 0.03 {
		t.Errorf("average JCT %.2f s, artifact %.2f s: %.1f%% apart, want within 3%%", avg, artifactAvgJCT, 100*d)
	}
	if off > 0 {
		t.Errorf("%d of %d jobs differ from the artifact by more than 1 s (average %.2f s vs %.2f s)", off, len(run.Jobs), avg, artifactAvgJCT)
	}
}
