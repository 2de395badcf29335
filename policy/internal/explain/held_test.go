package explain_test

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestPiecesMatchPlanAppend: for a plan explained without an order,
// AppendWaits (a waiting job) and AppendHeld (a preempted or shrunk one),
// with the free GPUs PlanFree counts, write the very reasons PlanAppend
// writes, and PlanAppend writes none for the jobs the plan runs on what
// they hold or more.
func TestPiecesMatchPlanAppend(t *testing.T) {
	c := enginetest.Cluster("3x4:v100")
	s := policytest.Snap(t, 100, c,
		policytest.Hold("run", 0, 2, 500),   // kept
		policytest.Hold("big", 1, 4, 500),   // preempted
		policytest.Wait("w8", 2, 8, 100),    // waits
		policytest.Wait("w1", 3, 1, 100),    // starts
		policytest.Hold("grown", 5, 3, 500), // shrunk to 1
		policytest.Wait("p1", 6, 1, 100),    // starts, packed with p2
		policytest.Wait("p2", 7, 1, 100))
	plan := engine.Plan{Run: []engine.Assignment{
		{Job: "run", GPUs: 2}, {Job: "w1", GPUs: 1}, {Job: "grown", GPUs: 1},
		{Job: "p1", GPUs: 1, PackWith: "p2"}, {Job: "p2", GPUs: 1, PackWith: "p1"}}}
	terms := func(b []byte, st *engine.Status) []byte { return append(b, "id "+st.Job.ID...) }
	full := plan
	explain.PlanAppend(s, &full, nil, terms)
	if len(full.Reasons) != 3 {
		t.Fatalf("PlanAppend wrote %d reasons, want 3 (big, w8, grown): %v", len(full.Reasons), full.Reasons)
	}
	// 12 GPUs, 2+1+1 planned and one GPU for the packed pair: 7 free.
	free := explain.PlanFree(s, &plan, 0)
	if free != explain.Whole(7) {
		t.Errorf("PlanFree = %+v, want 7 (one site)", free)
	}
	given := map[string]int{}
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	for _, st := range s.Jobs {
		id := st.Job.ID
		want, listed := full.Reasons[id]
		g, runs := given[id]
		var got string
		switch {
		case len(st.GPUs) > 0 && (!runs || g < len(st.GPUs)):
			got = string(explain.AppendHeld(nil, st, g, terms, free))
		case runs:
			if listed {
				t.Errorf("%s runs: PlanAppend gave it %+v", id, want)
			}
			continue
		default:
			got = string(explain.AppendWaits(nil, st, terms, free))
		}
		if want.Text != got || want.Position != 0 {
			t.Errorf("%s: %q, PlanAppend's %+v", id, got, want)
		}
	}
}
