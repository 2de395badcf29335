package engine_test

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/internal/race"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
)

// TestChangedRoundAllocations counts the objects a round makes in which
// one job ends and one arrives and starts while the others keep running
// (BenchmarkChangedRound's round, smaller), under Tiresias as the
// simulator runs it: the new job's status (Submit) and its GPUs (the
// placer's slice, which it keeps) are the only ones a round needs. The
// seconds per GPU type of the job that ended, the placement's map, the
// allocation's shape and the round's changes reuse memory or make none.
func TestChangedRoundAllocations(t *testing.T) {
	race.SkipAllocs(t)
	const n = 200
	mk := func(i int, at float64) *job.Job {
		return &job.Job{ID: fmt.Sprintf("j%07d", i), Submit: at, GPUs: 2, MinGPUs: 2, MaxGPUs: 2,
			Work: 1e9, Unit: job.Seconds, Duration: 1e9}
	}
	tiresias, err := policy.Parse("tiresias", policy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fixedClock{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("100x8:v100"), Model: perf.Duration{},
		Policy: tiresias, Placer: place.Pack{}, Clock: clk, ForgetEnded: true, LazyCounters: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := e.Submit(mk(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = 1
	const runs = 200
	next := make([]*job.Job, runs+1)
	for i := range next {
		next[i] = mk(n+i, float64(i))
	}
	ends := make([]string, 0, n+len(next))
	round := func() {
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		clk.t++
	}
	for range 3 { // everything starts, then steady rounds
		round()
	}
	for _, st := range e.Active() {
		ends = append(ends, st.Job.ID)
	}
	i := 0
	changed := func() {
		if err := e.Finish(ends[i]); err != nil {
			t.Fatal(err)
		}
		next[i].Submit = clk.t
		if _, err := e.Submit(next[i]); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, next[i].ID)
		i++
		round()
		if st := e.Job(ends[len(ends)-1]); len(st.GPUs) != 2 {
			t.Fatalf("the job that arrived holds %v, want 2 GPUs", st.GPUs)
		}
	}
	// AllocsPerRun runs changed once to warm up, then runs times.
	if got := testing.AllocsPerRun(runs, changed); got > 2 {
		t.Errorf("a round in which one job ends and one starts made %v objects, want at most 2 (its status and its GPUs)", got)
	}
}
