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

// TestLazyReasonsMatchFullFair is TestLazyReasonsMatchFull for AlloX,
// Gandiva_fair and Themis, which leave their waiting jobs' reasons (and
// Themis its preempted jobs') to be worked out when read in every round
// (engine.ExplainsWhenRead): random traces of
// several tenants on clusters of one, two or three GPU types (a faster
// type, jobs that ask for a type), replayed under each policy and its
// knobs as is and behind full{} (which hides ExplainsWhenRead, so every
// reason is written); every job's record, reasons and queue positions
// included, must be the same. Gandiva_fair's quantum preempts (those
// reasons stay written, in Plan.Reasons) and AlloX's small window leaves
// jobs outside the matching.
func TestLazyReasonsMatchFullFair(t *testing.T) {
	base := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30}}}
	clusters := []string{"%dx4:v100", "%dx4:v100,2x4:p100", "%dx2:v100,2x4:p100,1x4:k80"}
	speed := map[string]float64{"v100": 1, "p100": 0.6, "k80": 0.25}
	seen := map[string]int{} // records that state a waiting, preempted job, AlloX's two parts
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x19f))
		nodes := 2 + r.IntN(3)
		shape := clusters[seed%len(clusters)]
		c := buildCluster(t, fmt.Sprintf(shape, nodes))
		types := c.GPUTypes()
		tenants := []string{"a", "b", "c", "d", ""}[:2+r.IntN(4)]
		var jobs []*job.Job
		now := 0.0
		for i := range 80 + r.IntN(60) {
			if r.IntN(40) == 0 {
				now += float64(r.IntN(20000)) // a quiet stretch
			} else if r.IntN(3) == 0 {
				now += float64(r.IntN(400))
			}
			g := []int{1, 1, 1, 2, 2, 4}[r.IntN(6)]
			d := float64(30 + r.IntN(4000))
			j := &job.Job{ID: fmt.Sprintf("j%03d", i), Tenant: tenants[r.IntN(len(tenants))], Submit: now,
				GPUs: g, MinGPUs: g, MaxGPUs: g, Work: d, Unit: job.Seconds, Duration: d}
			if len(types) > 1 && r.IntN(5) == 0 {
				j.GPUType = types[r.IntN(len(types))] // it runs on that type only
			}
			jobs = append(jobs, j)
		}
		model := perf.SpeedFactors{Base: base, Speed: speed}
		for _, spec := range []string{"allox", "allox:alpha=0.5", "allox:window=4", "gandiva-fair",
			"gandiva-fair:trade=false", "gandiva-fair:quantum=600:tickets=a@3/b@1", "themis", "themis:lease=60", "themis:f=0"} {
			lazy := lockstep(t, fmt.Sprintf("seed %d, %s on %s", seed, spec, fmt.Sprintf(shape, nodes)), spec, jobs,
				sim.Config{Cluster: c, Model: model, Placer: place.Pack{}, Round: 60, Seed: 1}, nil)
			for _, what := range []string{`"waits; tenant `, `"preempted; tenant `, "the least served", "the rest",
				`"preempted; finish-time fairness`, `"waits; finish-time fairness`} {
				seen[what] += strings.Count(lazy, what)
			}
		}
	}
	// The traces must exercise what the reasons say, or the test proves
	// nothing: jobs left waiting (worked out when read), jobs preempted
	// (written; Themis': worked out), and both of AlloX's parts with
	// alpha < 1.
	for what, n := range seen {
		if n == 0 {
			t.Errorf("no record says %s", what)
		}
	}
}
