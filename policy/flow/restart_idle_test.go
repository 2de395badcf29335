package flow

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestTidalRestartedJobTakesIdleGPUs: a job preempted twice, young enough
// that the restart factor max(age - D x restarts, 0)/(age + D) is 0, was
// left out of every knapsack and waited on idle GPUs until its age
// outgrew the penalty (under tide serve's wall clock, minutes with every
// GPU free: found by the server's random operations search, seed 18,
// tidal:deadlines=false, D 240 s). It now takes GPUs no other job wants,
// and only those: the job beside it gets what it gets alone. (deepboot
// keeps DeepBoot's rule: loan.Speedups.IdleOnly.)
func TestTidalRestartedJobTakesIdleGPUs(t *testing.T) {
	snap := func(works ...float64) *engine.Snapshot { return policytest.LoanSnapshot(t, 15, 0, works...) }
	plan := func(p engine.Plan) []string {
		var out []string
		for _, a := range p.Run {
			out = append(out, fmt.Sprintf("%s:%d@%s", a.Job, a.GPUs, a.Site))
		}
		return out
	}
	for _, spec := range []string{"tidal:deadlines=false", "tidal:deadlines=false:restart_penalty=600"} {
		t.Run(spec, func(t *testing.T) {
			want := plan(fam.Parse(t, spec, contract.Context{}).Schedule(snap(1000)))
			s := snap(1000, 1000)
			late := s.Jobs[1]
			late.State, late.Starts, late.FirstStart, late.LastStart = job.Preempted, 3, 1, 10
			got := plan(fam.Parse(t, spec, contract.Context{}).Schedule(s))
			var other []string
			ran := false
			for _, a := range got {
				if a[:3] == "j1:" {
					ran = true
				} else {
					other = append(other, a)
				}
			}
			if !ran {
				t.Errorf("plan %v: the job restarted twice waits with GPUs idle", got)
			}
			slices.Sort(other)
			slices.Sort(want)
			if !slices.Equal(other, want) {
				t.Errorf("beside the restarted job j0 gets %v, alone %v", other, want)
			}
		})
	}
}
