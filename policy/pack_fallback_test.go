package policy

import (
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/solver/solvertest"
)

// TestPackingFallsBackWithoutSharing: the model measures pairs (Gavel's
// table) but the executor runs one job per GPU (Snapshot.Sharing false, as
// under tide serve and tide kube): the packing knobs must plan no pair, or
// the engine refuses the plan. With Sharing true, the same snapshot is
// packed, so the check can fail.
func TestPackingFallsBackWithoutSharing(t *testing.T) {
	solvertest.Require(t)
	g, err := table.ParseGavel("pairs.json", []byte(policytest.PairTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"gavel-las:space_sharing=true", "gavel-throughput:space_sharing=true", "gandiva:pack=true"} {
		for _, sharing := range []bool{false, true} {
			s := policytest.JobsSnap(enginetest.Cluster("1x1:v100"), g, []*job.Job{policytest.PairJob("a", "A", 1000), policytest.PairJob("b", "B", 400)})
			s.Sharing = sharing
			plan := specs.Parse(t, spec, Context{}).Schedule(s)
			pairs := 0
			for _, a := range plan.Run {
				if a.PackWith != "" {
					pairs++
				}
			}
			if sharing && pairs != 2 {
				t.Errorf("%s, executor packs: %d packed assignments, want 2 (a with b)", spec, pairs)
			}
			if !sharing && (pairs != 0 || len(plan.Run) != 1) {
				t.Errorf("%s, executor cannot pack: plan %+v, want one job alone", spec, plan.Run)
			}
		}
	}
}
