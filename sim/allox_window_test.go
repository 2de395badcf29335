package sim_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// freshEach plans every round with a new instance of the policy spec
// names: whatever it keeps from round to round (an order, a cache) starts
// empty each time, so its plan is what the rule gives from the snapshot
// alone. It hides every optional interface (as full{} does).
type freshEach struct {
	t    *testing.T
	spec string
	jobs []*job.Job
}

func (f freshEach) Name() string { return "fresh " + f.spec }

func (f freshEach) Schedule(s *engine.Snapshot) engine.Plan {
	p, err := policy.Parse(f.spec, policy.Context{Jobs: f.jobs})
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Schedule(s)
}

// TestAlloXWindowKeptOrder replays random congested traces of several
// tenants under AlloX with a small window (more jobs wait than it
// matches, so the earliest submitted are chosen each round from the order
// AlloX keeps across rounds, kept.Order) and again with a new AlloX every
// round (which sorts the waiting jobs afresh): the timelines must be the
// same. The traces submit jobs out of ID order at equal times, so that
// the order's tie-break (the ID) matters.
func TestAlloXWindowKeptOrder(t *testing.T) {
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30}}}
	for seed := range 4 {
		r := rand.New(rand.NewPCG(uint64(seed), 0xa110))
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", 2+r.IntN(2)))
		tenants := []string{"a", "b", "c"}
		var jobs []*job.Job
		now := 0.0
		for i := range 120 + r.IntN(60) {
			if r.IntN(3) == 0 {
				now += float64(r.IntN(200))
			}
			g := []int{1, 1, 2, 4}[r.IntN(4)]
			d := float64(60 + r.IntN(2000))
			// IDs not in submission order among equal times.
			id := fmt.Sprintf("j%03d", (i*37)%1000)
			jobs = append(jobs, &job.Job{ID: id, Tenant: tenants[r.IntN(len(tenants))], Submit: now,
				GPUs: g, MinGPUs: g, MaxGPUs: g, Work: d, Unit: job.Seconds, Duration: d})
		}
		for _, spec := range []string{"allox:window=4", "allox:alpha=0.5:window=3"} {
			run := func(fresh bool) string {
				p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
				if err != nil {
					t.Fatal(err)
				}
				if fresh {
					p = freshEach{t, spec, jobs}
				}
				out, err := sim.Run(sim.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Round: 60, Seed: 1}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				writeRun(&b, out)
				return b.String()
			}
			sameLines(t, fmt.Sprintf("seed %d, %s", seed, spec), run(false), run(true))
		}
	}
}
