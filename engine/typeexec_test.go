package engine_test

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

type fixedClock struct{ t float64 }

func (c *fixedClock) Now() float64 { return c.t }

// runAll plans every active job on its requested count.
type runAll struct{}

func (runAll) Name() string { return "run-all" }
func (runAll) Schedule(s *engine.Snapshot) engine.Plan {
	var p engine.Plan
	for _, st := range s.Jobs {
		p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
	}
	return p
}

// TestTypeExecuted checks the seconds held per GPU type, and that a
// snapshot handed out keeps its values while the engine goes on.
func TestTypeExecuted(t *testing.T) {
	clk := &fixedClock{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("1x2:k80"), Model: perf.Duration{},
		Policy: runAll{}, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(enginetest.Job("a").Seconds(1000).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	clk.t = 100
	snap := e.Snapshot()
	if got := snap.Jobs[0].TypeExecuted["k80"]; got != 100 {
		t.Fatalf("after 100 s: %v s on k80", got)
	}
	clk.t = 250
	if got := e.Snapshot().Jobs[0].TypeExecuted["k80"]; got != 250 {
		t.Errorf("after 250 s: %v s on k80", got)
	}
	if got := snap.Jobs[0].TypeExecuted["k80"]; got != 100 {
		t.Errorf("the earlier snapshot changed to %v", got)
	}
}
