package sim_test

import (
	"sync"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/solver"
)

// resizes records, over a run, whether the policy ever gave a job a GPU
// count other than the one it asked for.
type resizes struct {
	engine.Policy
	mu    sync.Mutex
	other bool
}

func (r *resizes) Unwrap() engine.Policy { return r.Policy }

func (r *resizes) Schedule(s *engine.Snapshot) engine.Plan {
	plan := r.Policy.Schedule(s)
	asked := make(map[string]int, len(s.Jobs))
	for _, st := range s.Jobs {
		asked[st.Job.ID] = st.Job.GPUs
	}
	for _, a := range plan.Run {
		if a.GPUs != asked[a.Job] {
			r.mu.Lock()
			r.other = true
			r.mu.Unlock()
		}
	}
	return plan
}

// TestElasticFlag checks the Elastic flag instead of trusting it (it
// decides whether a trace's rigid jobs are replayed as elastic and whether
// executors run job agents): given jobs that may use 1 to all GPUs, on the
// first workload-6 jobs under the Pollux model with agents, a policy
// flagged Elastic gives some job another count than it asked for. (The
// converse does not hold: Themis' partial allocations size jobs that are
// elastic already, and it replays a trace's rigid jobs as they are.) The
// flag of policies that need deadlines is checked on the rigid setup,
// whose jobs carry some.
func TestElasticFlag(t *testing.T) {
	setups := stateSetups(t)
	for _, info := range policy.All() {
		t.Run(info.Name, func(t *testing.T) {
			if info.NeedsSolver && solver.Available() != nil {
				t.Skip("needs GLPK")
			}
			in := *setups["elastic"]
			if info.NeedsDeadlines {
				in = *setups["rigid"]
			}
			elastic := info
			elastic.Elastic = true
			in.Jobs = in.JobsFor(elastic) // every job may range over 1..all GPUs
			r, err := in.Build(spec(info.Name))
			if err != nil {
				t.Fatal(err)
			}
			r.Jobs = in.Jobs
			rec := &resizes{Policy: r.Config.Policy}
			r.Config.Policy, r.Config.Agents = rec, true
			run, err := r.Simulate()
			if err != nil {
				t.Fatal(err)
			}
			finished := 0
			for _, j := range run.Jobs {
				if j.State == string(job.Finished) {
					finished++
				}
			}
			switch {
			case finished == 0:
				t.Fatalf("no job finished")
			case info.Elastic && !rec.other:
				t.Errorf("%s is flagged Elastic but ran every job on the count it asked for", info.Name)
			}
		})
	}
}
