package sim_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/sim"
)

// TestLazyReasonsClassic replays random congested traces under the
// Tiresias that plans every round in full (2D-Gittins, and 2D-LAS with
// the starvation knob) twice: as is, leaving its waiting and preempted
// jobs' reasons to be worked out when read (engine.ExplainsWhenRead,
// explain.Queue), and behind full{}, which hides that interface so that
// every reason is written in the plan. Every job's record (the reason it
// last waited with, its queue position and predicted start) and the
// timeline must be the same. The traces run jobs long enough to cross the
// queue limits (a Gittins index that falls below a waiting job's
// preempts), so the runs must record "preempted" reasons as well as
// "waits" ones.
func TestLazyReasonsClassic(t *testing.T) {
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30}}}
	preempted, waits := 0, 0
	for seed := range 5 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x19c))
		nodes := 3 + r.IntN(4)
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", nodes))
		var jobs []*job.Job
		now := 0.0
		for i := range 120 + r.IntN(80) {
			if r.IntN(50) == 0 {
				now += float64(r.IntN(20000)) // a quiet stretch
			} else if r.IntN(3) == 0 {
				now += float64(r.IntN(600))
			}
			g := []int{1, 1, 1, 2, 2, 4}[r.IntN(6)]
			if r.IntN(30) == 0 {
				g = 4 * nodes // the whole cluster
			}
			d := float64(30 + r.IntN(3000))
			if r.IntN(5) == 0 {
				d = float64(3000 + r.IntN(20000)) // crosses the limits
			}
			jobs = append(jobs, &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d})
		}
		for _, spec := range []string{"tiresias-gittins", "tiresias-gittins:preset=pollux", "tiresias-gittins:knob=1", "tiresias:knob=2"} {
			lazy := lockstep(t, fmt.Sprintf("seed %d, %s", seed, spec), spec, jobs,
				sim.Config{Cluster: c, Model: model, Placer: place.Pack{}, Round: 60, Seed: 1}, nil)
			preempted += strings.Count(lazy, "preempted;")
			waits += strings.Count(lazy, "waits;")
		}
	}
	// The comparison covers both kinds of reason the Explainer gives.
	if preempted == 0 || waits == 0 {
		t.Fatalf("the traces recorded %d preempted and %d waits reasons: both kinds must occur", preempted, waits)
	}
	t.Logf("%d preempted and %d waits reasons compared", preempted, waits)
}
