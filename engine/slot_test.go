package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// TestSlots: every round, the active jobs' slots are distinct and below the
// most jobs active at once so far, through random arrivals and ends.
func TestSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	clk := &fixedClock{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("16x8:t4"), Model: perf.Duration{},
		Policy: runAll{}, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	most, n := 0, 0
	for step := 0; step < 300; step++ {
		clk.t++
		for range rng.IntN(4) {
			if _, err := e.Submit(enginetest.Job(fmt.Sprintf("j%d", n)).At(clk.t).Seconds(1e6).Obj()); err != nil {
				t.Fatal(err)
			}
			n++
		}
		most = max(most, len(e.Active()))
		for _, st := range e.Active() {
			if rng.IntN(4) == 0 {
				if err := e.Finish(st.Job.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		act := e.Active()
		seen := map[int]string{}
		for _, st := range act {
			if st.Slot < 0 || st.Slot >= most {
				t.Fatalf("step %d: job %s has slot %d, most active at once %d", step, st.Job.ID, st.Slot, most)
			}
			if o, dup := seen[st.Slot]; dup {
				t.Fatalf("step %d: jobs %s and %s share slot %d", step, o, st.Job.ID, st.Slot)
			}
			seen[st.Slot] = st.Job.ID
		}
	}
	if n < 400 {
		t.Fatalf("only %d jobs", n)
	}
}

// TestForgetEnded: under Config.ForgetEnded a job that ended is gone after
// the next round (Job finds nothing, its ID may come again); a job that
// has not ended stays.
func TestForgetEnded(t *testing.T) {
	clk := &fixedClock{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("1x2:t4"), Model: perf.Duration{},
		Policy: runAll{}, Placer: place.Pack{}, Clock: clk, ForgetEnded: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := e.Submit(enginetest.Job(id).Seconds(100).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	clk.t = 10
	if err := e.Finish("a"); err != nil {
		t.Fatal(err)
	}
	if st := e.Job("a"); st == nil || st.State != job.Finished {
		t.Fatalf("before the next round a is %+v, want finished", st)
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if st := e.Job("a"); st != nil {
		t.Errorf("a still known after the round: %s", st.State)
	}
	if st := e.Job("b"); st == nil || st.State != job.Running {
		t.Errorf("b is %+v, want running", st)
	}
	if _, err := e.Submit(enginetest.Job("a").Seconds(100).Obj()); err != nil {
		t.Errorf("a submitted again: %v", err)
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if st := e.Job("a"); st == nil || st.State != job.Running || st.Finish != -1 {
		t.Errorf("the new a is %+v, want running", st)
	}
}
