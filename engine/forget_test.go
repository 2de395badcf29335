package engine_test

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
)

// TestForgetResubmit: an ended job forgotten can be submitted again under
// its ID and runs again (the last plan's lookup hints must not find the
// old one); a job still active, or unknown, cannot be forgotten.
func TestForgetResubmit(t *testing.T) {
	runAll := planFunc(func(s *engine.Snapshot) engine.Plan {
		var p engine.Plan
		for _, st := range s.Jobs {
			p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
		}
		return p
	})
	e, clk := newEngine(t, "1x4:t4", runAll, nil)
	a := enginetest.Job("a").Obj()
	if _, err := e.Submit(a); err != nil {
		t.Fatal(err)
	}
	if ch, err := e.Schedule(); err != nil || len(ch) != 1 || ch[0].Kind != engine.Start {
		t.Fatalf("first round: %v %+v", err, ch)
	}
	if err := e.Forget("a"); err == nil || !strings.Contains(err.Error(), "end it first") {
		t.Errorf("forgetting a running job: %v", err)
	}
	if err := e.Forget("zz"); err == nil {
		t.Error("forgetting an unknown job: no error")
	}
	clk.t = 10
	if err := e.Finish("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(a); err == nil {
		t.Error("resubmitting an ended job not forgotten: no error")
	}
	if err := e.Forget("a"); err != nil {
		t.Fatal(err)
	}
	if e.Job("a") != nil || len(e.Active()) != 0 {
		t.Fatalf("forgotten job still known: %+v", e.Job("a"))
	}
	st, err := e.Submit(a)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Schedule()
	if err != nil || len(ch) != 1 || ch[0].Status != st || len(st.GPUs) != 1 {
		t.Fatalf("round after the resubmission: %v %+v", err, ch)
	}
}
