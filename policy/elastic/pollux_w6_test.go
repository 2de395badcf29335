package elastic

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// pxRecorder runs Pollux and keeps a copy of the snapshots of the rounds
// with at least min jobs.
type pxRecorder struct {
	inner *Pollux
	min   int
	snaps []*engine.Snapshot
}

func (r *pxRecorder) Name() string { return r.inner.Name() }

func (r *pxRecorder) Schedule(s *engine.Snapshot) engine.Plan {
	if len(s.Jobs) >= r.min {
		c := *s
		c.Jobs = make([]*engine.Status, len(s.Jobs))
		for i, st := range s.Jobs {
			cp := *st
			cp.GPUs = slices.Clone(st.GPUs)
			c.Jobs[i] = &cp
		}
		r.snaps = append(r.snaps, &c)
	}
	return r.inner.Schedule(s)
}

// pxWorkload6 replays the embedded workload-6 under Pollux with the
// artifact's rules (as `tide sim --preset pollux-artifact --policy pollux`
// does) and returns the snapshots of the four busiest rounds (most active
// jobs; the earliest on a tie), in round order: what Pollux really faces,
// with fitted and unfitted jobs, current allocations, ages and restart
// counts. The replay runs once per test binary.
var pxWorkload6 = sync.OnceValues(func() ([]*engine.Snapshot, error) {
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr, err := trace.Read(f, data.DefaultTrace, trace.Pollux, trace.Options{})
	if err != nil {
		return nil, err
	}
	m, err := pollux.Load(data.FS, data.ProfilesDir)
	if err != nil {
		return nil, err
	}
	spec, err := cluster.ParseShorthand("16x4:t4")
	if err != nil {
		return nil, err
	}
	c, err := spec.Build()
	if err != nil {
		return nil, err
	}
	// Elastic copies, as the command makes them: 1 to 64 GPUs, adaptive
	// batch; ncf fixed at 32,768 on one GPU, as in the artifact.
	jobs := tr.Jobs
	for i, j := range jobs {
		cp := *j
		cp.MinGPUs, cp.MaxGPUs, cp.AdaptBatch = 1, 64, true
		if cp.Model == "ncf" {
			cp.AdaptBatch, cp.BatchSize, cp.MaxGPUs = false, 32768, 1
		}
		cp.GPUs = min(max(cp.GPUs, cp.MinGPUs), cp.MaxGPUs)
		jobs[i] = &cp
	}
	rec := &pxRecorder{inner: NewPollux("fast"), min: 20}
	if _, err := sim.Run(sim.Config{Cluster: c, Model: m, Policy: rec, Placer: place.MostFree{}, Round: 60,
		WholeSeconds: true, Agents: true}, jobs); err != nil {
		return nil, err
	}
	snaps := rec.snaps
	slices.SortStableFunc(snaps, func(a, b *engine.Snapshot) int { return len(b.Jobs) - len(a.Jobs) })
	snaps = snaps[:min(4, len(snaps))]
	slices.SortFunc(snaps, func(a, b *engine.Snapshot) int { return a.Round - b.Round })
	return snaps, nil
})

// TestPolluxFastReachesGAOnWorkload6: on the snapshots Pollux meets in
// workload-6, the fast search's fitness is at least the GA's.
func TestPolluxFastReachesGAOnWorkload6(t *testing.T) {
	if testing.Short() {
		t.Skip("replays workload-6")
	}
	snaps, err := pxWorkload6()
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 4 {
		t.Fatalf("%d snapshots of 20 jobs or more recorded, want 4", len(snaps))
	}
	for _, s := range snaps {
		pf, pg := newPxProblem(s, NewPollux("fast")), newPxProblem(s, NewPollux("ga"))
		ff, fg := pf.fitness(pf.solve(s.Round)), pg.fitness(pg.solve(s.Round))
		t.Logf("round %d, %d jobs: fast %.6g, GA %.6g", s.Round, len(s.Jobs), ff, fg)
		if ff < fg*(1-1e-9) {
			t.Errorf("round %d: fast fitness %.6g < GA %.6g", s.Round, ff, fg)
		}
	}
}

// BenchmarkPolluxWorkload6Round times one round of each search on the
// workload-6 snapshots of pxWorkload6, cold speedup cache, reporting the
// fitness reached and CPU seconds per round (see BenchmarkPolluxRound).
//
//	go test ./policy -run '^$' -bench PolluxWorkload6 -cpu 2 -benchtime 3x
func BenchmarkPolluxWorkload6Round(b *testing.B) {
	snaps, err := pxWorkload6()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range snaps {
		for _, search := range []string{"fast", "ga"} {
			b.Run(fmt.Sprintf("round%d-%djobs/search=%s", s.Round, len(s.Jobs), search), func(b *testing.B) {
				pxBenchRound(b, s, NewPollux(search), false)
			})
		}
	}
}
