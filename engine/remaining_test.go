package engine_test

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// remainingProbe reads Snapshot.Remaining of every job on 1 to 9 GPUs and
// compares it with perf.Remaining on perf.Packed's allocation, counting
// the allocations of a second reading.
type remainingProbe struct {
	t      *testing.T
	allocs float64
	reads  int
}

func (*remainingProbe) Name() string { return "remaining-probe" }
func (p *remainingProbe) Schedule(s *engine.Snapshot) engine.Plan {
	for _, st := range s.Jobs {
		for n := 1; n <= 9; n++ {
			got := s.Remaining(st, n, "")
			want := perf.Remaining(s.Model, st.Job, perf.Packed("v100", n, 4), st.Progress)
			if got != want {
				p.t.Errorf("Remaining(%s, %d) = %v, want %v", st.Job.ID, n, got, want)
			}
			p.allocs += testing.AllocsPerRun(5, func() { s.Remaining(st, n, "") })
			p.reads++
		}
	}
	return engine.Plan{}
}

// TestRemainingKeepsPacked: Snapshot.Remaining gives perf.Remaining on
// the packed allocation, and reading it again allocates nothing (the
// engine keeps the packed allocations it made).
func TestRemainingKeepsPacked(t *testing.T) {
	clk := &fixedClock{}
	p := &remainingProbe{t: t}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("4x4:v100"), Model: perf.Duration{},
		Policy: p, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := e.Submit(enginetest.Job(id).GPUs(2).Seconds(100).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if p.reads != 27 {
		t.Fatalf("%d readings, want 27", p.reads)
	}
	if p.allocs != 0 {
		t.Errorf("Remaining read again allocated %v times in all, want 0", p.allocs)
	}
}
