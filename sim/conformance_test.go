package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver"
)

// explained wraps a policy and records every round in which a job the plan
// leaves waiting, preempts, shrinks or declines has no reason.
type explained struct {
	engine.Policy
	mu      sync.Mutex
	missing []string
}

func (e *explained) Unwrap() engine.Policy { return e.Policy }

func (e *explained) Schedule(s *engine.Snapshot) engine.Plan {
	plan := e.Policy.Schedule(s)
	given := map[string]int{}
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	declined := map[string]bool{}
	for _, id := range plan.Decline {
		declined[id] = true
	}
	for _, st := range s.Jobs {
		g, ok := given[st.Job.ID]
		if ok && g >= len(st.GPUs) && !declined[st.Job.ID] {
			continue
		}
		r := plan.Reasons[st.Job.ID]
		if r.Text == "" || r.Position < 0 || r.PredictedStart < 0 || (r.PredictedStart > 0 && r.PredictedStart < s.Now) {
			e.mu.Lock()
			e.missing = append(e.missing, fmt.Sprintf("t=%.0f job %s (%d GPUs held, %d planned): reason %+v", s.Now, st.Job.ID, len(st.GPUs), g, r))
			e.mu.Unlock()
		}
	}
	return plan
}

// TestConformance runs every registered policy, with its default knobs and
// with each of its presets (policy.Specs),
// through the simulator on random traces of rigid jobs (a quarter with
// deadlines, two tenants) and checks what every policy owes:
//   - every job ends finished, or declined by a policy that declines;
//   - work is conserved and no finished job beats its lower bound;
//   - the GPUs held never exceed the cluster;
//   - the run is deterministic (two replays give the same bytes);
//   - every job the plan leaves waiting, preempts, shrinks or declines has
//     a reason, and predicted starts are never in the past.
func TestConformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	jobs := randomTrace(rng, 24, 8)
	const cluster = "2x4:t4"
	costs := perf.Costs{Start: 5, Restart: 20, Resize: 5}
	for _, sp := range policy.Specs() {
		info, _ := policy.Lookup(sp)
		t.Run(sp, func(t *testing.T) {
			if info.NeedsSolver && solver.Available() != nil {
				t.Skip("needs GLPK")
			}
			var out [2][]byte
			var run *report.Run
			for i := range out {
				p, err := policy.Parse(spec(sp), policy.Context{Jobs: jobs})
				if err != nil {
					t.Fatal(err)
				}
				ex := &explained{Policy: p}
				run, err = sim.Run(sim.Config{Cluster: enginetest.Cluster(cluster), Model: perf.Duration{Cost: perf.CostTable{Default: costs}},
					Policy: ex, Placer: place.Pack{}, Round: 60, OnEvents: true}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ex.missing[:min(len(ex.missing), 5)] {
					t.Errorf("no reason: %s", m)
				}
				if len(ex.missing) > 5 {
					t.Errorf("... and %d more jobs without a reason", len(ex.missing)-5)
				}
				var buf bytes.Buffer
				if err := json.NewEncoder(&buf).Encode(run); err != nil {
					t.Fatal(err)
				}
				out[i] = buf.Bytes()
			}
			if !bytes.Equal(out[0], out[1]) {
				t.Error("two replays of the same inputs differ")
			}
			total := enginetest.Cluster(cluster).TotalGPUs()
			for i, r := range run.Jobs {
				j := jobs[i]
				switch {
				case r.State == string(job.Declined):
					if r.Start >= 0 || r.Reason == "" {
						t.Errorf("declined job %s: start %v, reason %q", r.ID, r.Start, r.Reason)
					}
					continue
				case r.State != string(job.Finished):
					t.Errorf("job %s ends %s", r.ID, r.State)
					continue
				}
				want := j.Duration * float64(j.GPUs)
				if math.Abs(r.UsefulGPUSeconds-want) > 1e-6*want {
					t.Errorf("job %s: %v useful GPU-s, want Duration x GPUs = %v", r.ID, r.UsefulGPUSeconds, want)
				}
				if jct := r.Finish - r.Submit; jct < r.LowerBound-1e-6 {
					t.Errorf("job %s: JCT %v beats its lower bound %v", r.ID, jct, r.LowerBound)
				}
			}
			for _, s := range run.Timeline {
				if int(s.Allocated) > total || s.Useful > s.Allocated {
					t.Fatalf("t=%v: %d GPUs held, %d useful, of %d", s.T, s.Allocated, s.Useful, total)
				}
			}
		})
	}
}

// spec is the spec TestConformance runs a policy with: its defaults, but
// for Chronus a shorter lease horizon (its MILP over 30 leases takes a
// minute on this trace; the rules checked do not depend on the horizon).
func spec(name string) string {
	if name == "chronus" {
		return "chronus:horizon=8"
	}
	return name
}
