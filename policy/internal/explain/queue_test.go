package explain_test

import (
	"strconv"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestQueueMatchesPlanAppend: a round recorded in a Queue gives each job
// it leaves waiting, when read, the reason PlanAppend writes for the same
// plan, and writes in Plan.Reasons those PlanAppend writes for the jobs
// it preempts or shrinks, and no other; the last round's reasons are
// read until the round after next starts.
func TestQueueMatchesPlanAppend(t *testing.T) {
	c := enginetest.Cluster("2x4:v100")
	s := policytest.Snap(t, 100, c,
		policytest.Hold("run", 0, 2, 500),   // kept
		policytest.Hold("big", 1, 4, 500),   // preempted: the order puts it last
		policytest.Wait("w8", 2, 8, 100),    // waits: 8 do not fit
		policytest.Wait("w1", 3, 1, 100),    // starts
		policytest.Wait("w4", 4, 4, 100),    // waits
		policytest.Hold("grown", 5, 2, 500), // shrunk to 1 below
		policytest.Wait("w1b", 6, 1, 100))   // starts
	for i, st := range s.Jobs {
		st.Slot = i
	}
	s.Round = 7
	key := func(_ int, st *engine.Status) float64 { return float64(len(st.Job.ID)) }
	terms := func(b []byte, st *engine.Status, k float64, figs [2]int) []byte {
		b = append(b, "key "...)
		b = strconv.AppendFloat(b, k, 'f', 0, 64)
		return strconv.AppendInt(append(b, " fig "...), int64(figs[1]), 10)
	}
	byID := map[string]*engine.Status{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	order := []*engine.Status{byID["run"], byID["w8"], byID["w1"], byID["grown"], byID["w4"], byID["w1b"], byID["big"]}
	plan := alloc.Greedy(s, order, false)
	for i, a := range plan.Run {
		if a.Job == "grown" {
			plan.Run[i].GPUs = 1
		}
	}
	var q explain.Queue
	q.Next(s.Round)
	given, ok := q.Given(order, plan.Run)
	if !ok {
		t.Fatalf("Given: plan %v is the greedy pass over the order", policytest.Runs(plan))
	}
	lazy := plan
	if !q.Record(s, &lazy, &explain.Order{Jobs: order, Given: given, Key: key, Figs: [2]int{3, 9}, Terms: terms}) {
		t.Fatal("Record refused a plan without declines whose order holds every job")
	}
	full := plan
	explain.PlanAppend(s, &full, order, func(b []byte, st *engine.Status) []byte {
		return terms(b, st, float64(len(st.Job.ID)), [2]int{3, 9})
	})
	if len(full.Reasons) != 4 {
		t.Fatalf("PlanAppend wrote %d reasons, want 4 (big, w8, w4, grown): %v", len(full.Reasons), full.Reasons)
	}
	for _, st := range s.Jobs {
		id := st.Job.ID
		want, listed := full.Reasons[id]
		got, written := lazy.Reasons[id]
		if len(st.GPUs) == 0 {
			if written {
				t.Errorf("%s waits: its reason is written (%+v), want it worked out when read", id, got)
			}
			got = q.Reason(st, s.Round)
		}
		if got != want || (len(st.GPUs) > 0 && written != listed) {
			t.Errorf("%s: reason %+v, PlanAppend's %+v", id, got, want)
		}
	}
	w8 := byID["w8"]
	if r := q.Reason(w8, s.Round+1); r != (engine.Reason{}) {
		t.Errorf("a round not recorded gives %+v, want the zero Reason", r)
	}
	q.Next(s.Round + 1)
	if got, want := q.Reason(w8, s.Round), full.Reasons["w8"]; got != want {
		t.Errorf("the last round's reason, read in the next: %+v, want %+v", got, want)
	}
	q.Next(s.Round + 2)
	if r := q.Reason(w8, s.Round); r != (engine.Reason{}) {
		t.Errorf("a round two rounds back gives %+v, want the zero Reason", r)
	}

	// Rounds Record cannot explain so: the reasons are written in full.
	declines := plan
	declines.Decline = []string{"w8"}
	if q.Record(s, &declines, &explain.Order{Jobs: order, Given: given}) {
		t.Error("Record took a plan that declines a job")
	}
	if _, ok := q.Given(order[1:], plan.Run); ok {
		t.Error("Given took a plan that runs a job outside the order")
	}
	short := order[:len(order)-1] // big, which loses its GPUs, left out
	if q.Record(s, &plan, &explain.Order{Jobs: short, Given: given[:len(short)]}) {
		t.Error("Record took an order without a job the plan does not run")
	}
}
