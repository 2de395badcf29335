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

// scripted runs job "a" on the type its script gives at each round ("" =
// preempt it) and records the seconds per type each round's snapshot shows.
type scripted struct {
	types []string
	seen  [][2]float64 // k80, v100 seconds per round
}

func (p *scripted) Name() string { return "scripted" }
func (p *scripted) Schedule(s *engine.Snapshot) engine.Plan {
	st := s.Jobs[0]
	p.seen = append(p.seen, [2]float64{st.TypeSeconds("k80"), st.TypeSeconds("v100")})
	t := p.types[len(p.seen)-1]
	if t == "" {
		return engine.Plan{}
	}
	return engine.Plan{Run: []engine.Assignment{{Job: st.Job.ID, GPUs: 1, GPUType: t}}}
}

// TestTypeSecondsAcrossMoves follows a job from type to type, through a
// resize and a preemption: each round's snapshot counts the seconds on each
// type up to its time, and the engine's copy (Snapshot) says the same.
func TestTypeSecondsAcrossMoves(t *testing.T) {
	clk := &fixedClock{}
	p := &scripted{types: []string{"k80", "v100", "", "k80", "k80"}}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("1x1:k80,1x1:v100"), Model: perf.Duration{},
		Policy: p, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(enginetest.Job("a").Seconds(10000).Obj()); err != nil {
		t.Fatal(err)
	}
	for _, now := range []float64{0, 100, 250, 300, 400} {
		clk.t = now
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
	}
	// k80 from 0 to 100, v100 from 100 to 250, waiting to 300, k80 again.
	want := [][2]float64{{0, 0}, {100, 0}, {100, 150}, {100, 150}, {200, 150}}
	for i := range want {
		if p.seen[i] != want[i] {
			t.Errorf("round %d saw k80, v100 = %v s, want %v", i, p.seen[i], want[i])
		}
	}
	clk.t = 450
	m := e.Snapshot().Jobs[0].TypeExecuted
	if len(m) != 2 || m["k80"] != 250 || m["v100"] != 150 {
		t.Errorf("Snapshot at 450 s: %v, want k80 250, v100 150", m)
	}
	if got := e.Snapshot().Jobs[0].TypeSeconds("k80"); got != 250 {
		t.Errorf("a copy's TypeSeconds(k80) = %v, want 250", got)
	}
}
