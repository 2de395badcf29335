package explain_test

import (
	"strconv"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestWaitsMatchesPlanAppend: a round recorded in a Waits gives each job
// it leaves waiting, when read, the reason PlanAppend writes for the same
// plan without an order (DeepBoot's), and writes in Plan.Reasons those
// PlanAppend writes for the jobs it preempts or shrinks, keeping one the
// policy wrote, and no other; the last round's reasons are read until
// the round after next starts; a plan that declines is refused.
func TestWaitsMatchesPlanAppend(t *testing.T) {
	c := enginetest.Cluster("2x4:v100")
	s := policytest.Snap(t, 100, c,
		policytest.Hold("run", 0, 2, 500),   // kept
		policytest.Hold("big", 1, 4, 500),   // preempted
		policytest.Wait("w8", 2, 8, 100),    // waits
		policytest.Wait("w1", 3, 1, 100),    // starts
		policytest.Wait("w4", 4, 4, 100),    // waits
		policytest.Hold("grown", 5, 2, 500), // shrunk to 1
		policytest.Wait("own", 6, 1, 100))   // waits, with the policy's own reason
	for i, st := range s.Jobs {
		st.Slot = 10 - i
	}
	s.Round = 7
	key := func(st *engine.Status) float64 { return float64(len(st.Job.ID)) }
	terms := func(b []byte, st *engine.Status, k float64, figs [2]int) []byte {
		b = append(b, "key "...)
		b = strconv.AppendFloat(b, k, 'f', 0, 64)
		return strconv.AppendInt(append(b, " fig "...), int64(figs[0]), 10)
	}
	byID := map[string]*engine.Status{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	plan := engine.Plan{Run: []engine.Assignment{{Job: "run", GPUs: 2}, {Job: "w1", GPUs: 1}, {Job: "grown", GPUs: 1}}}
	own := engine.Reason{Text: "the policy's own", Position: 3}
	var w explain.Waits
	w.Next(s.Round)
	lazy := plan
	lazy.Reasons = map[string]engine.Reason{"own": own}
	if !w.Record(s, &lazy, key, [2]int{3, 0}, terms) {
		t.Fatal("Record refused a plan without declines")
	}
	full := plan
	full.Reasons = map[string]engine.Reason{"own": own}
	explain.PlanAppend(s, &full, nil, func(b []byte, st *engine.Status) []byte {
		return terms(b, st, float64(len(st.Job.ID)), [2]int{3, 0})
	})
	if len(full.Reasons) != 5 {
		t.Fatalf("PlanAppend wrote %d reasons, want 5 (big, w8, w4, grown, own): %v", len(full.Reasons), full.Reasons)
	}
	for _, st := range s.Jobs {
		id := st.Job.ID
		want, listed := full.Reasons[id]
		got, written := lazy.Reasons[id]
		if len(st.GPUs) == 0 && id != "own" {
			if written {
				t.Errorf("%s waits: its reason is written (%+v), want it worked out when read", id, got)
			}
			got = w.Reason(st, s.Round)
		} else if written != listed {
			t.Errorf("%s: written %v, PlanAppend wrote it: %v", id, written, listed)
		}
		if got != want {
			t.Errorf("%s: reason %+v, PlanAppend's %+v", id, got, want)
		}
	}
	if r := w.Reason(byID["own"], s.Round); r != (engine.Reason{}) {
		t.Errorf("a job whose reason the plan lists gives %+v when read, want the zero Reason", r)
	}
	w8 := byID["w8"]
	if r := w.Reason(w8, s.Round+1); r != (engine.Reason{}) {
		t.Errorf("a round not recorded gives %+v, want the zero Reason", r)
	}
	w.Next(s.Round + 1)
	if got, want := w.Reason(w8, s.Round), full.Reasons["w8"]; got != want {
		t.Errorf("the last round's reason, read in the next: %+v, want %+v", got, want)
	}
	w.Next(s.Round + 2)
	if r := w.Reason(w8, s.Round); r != (engine.Reason{}) {
		t.Errorf("a round two rounds back gives %+v, want the zero Reason", r)
	}
	declines := plan
	declines.Decline = []string{"w8"}
	if w.Record(s, &declines, key, [2]int{}, terms) {
		t.Error("Record took a plan that declines a job")
	}
}
