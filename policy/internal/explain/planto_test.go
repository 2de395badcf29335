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

// TestPlanToMatchesPlanAppend: PlanTo hands put, for each job, the text
// and figures PlanAppend writes into Plan.Reasons for the same plan (a
// preempted, a shrunk, a declined and waiting jobs among them), for
// exactly those jobs, and writes no reason itself.
func TestPlanToMatchesPlanAppend(t *testing.T) {
	c := enginetest.Cluster("2x4:v100")
	s := policytest.Snap(t, 100, c,
		policytest.Hold("run", 0, 2, 500),   // kept
		policytest.Hold("big", 1, 4, 500),   // preempted: the order puts it last
		policytest.Wait("w8", 2, 8, 100),    // waits: 8 do not fit
		policytest.Wait("w1", 3, 1, 100),    // starts
		policytest.Wait("w4", 4, 4, 100),    // waits
		policytest.Hold("grown", 5, 2, 500), // shrunk to 1 below
		policytest.Wait("gone", 6, 1, 100))  // declined below
	byID := map[string]*engine.Status{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	order := []*engine.Status{byID["run"], byID["w8"], byID["w1"], byID["grown"], byID["w4"], byID["gone"], byID["big"]}
	plan := alloc.Greedy(s, order[:5], false)
	for i, a := range plan.Run {
		if a.Job == "grown" {
			plan.Run[i].GPUs = 1
		}
	}
	plan.Decline = []string{"gone"}
	terms := func(b []byte, st *engine.Status) []byte {
		return strconv.AppendInt(append(b, "id length "...), int64(len(st.Job.ID)), 10)
	}
	full := plan
	var sc explain.Scratch
	sc.PlanAppend(s, &full, order, terms)
	if len(full.Reasons) != 5 {
		t.Fatalf("PlanAppend wrote %d reasons, want 5 (big, w8, w4, grown, gone): %v", len(full.Reasons), full.Reasons)
	}
	to := plan
	got := map[string]engine.Reason{}
	var sc2 explain.Scratch
	sc2.PlanTo(s, &to, order, terms, func(st *engine.Status, text []byte, r engine.Reason) {
		if r.Text != "" {
			t.Errorf("%s: put's Reason carries text %q, want it in text only", st.Job.ID, r.Text)
		}
		r.Text = string(text)
		got[st.Job.ID] = r
	})
	if to.Reasons != nil {
		t.Errorf("PlanTo wrote plan.Reasons %v, want none", to.Reasons)
	}
	if len(got) != len(full.Reasons) {
		t.Errorf("PlanTo handed %d reasons, PlanAppend wrote %d: %v", len(got), len(full.Reasons), got)
	}
	for id, want := range full.Reasons {
		if got[id] != want {
			t.Errorf("%s: PlanTo %+v, PlanAppend %+v", id, got[id], want)
		}
	}
}
