package sim_test

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/sim"
)

// TestLowerBoundEveryCount: LowerBound, which grows one allocation GPU by
// GPU, gives the best of perf.Packed's allocation at every count, on a
// model whose times depend on the nodes spanned (the Pollux profiles), for
// nodes of 4 and 8 GPUs and for a type with no per-node size given.
func TestLowerBoundEveryCount(t *testing.T) {
	jobs, m, _ := workload6(t)
	for _, shape := range []string{"16x4:t4", "8x8:t4"} {
		spec, err := cluster.ParseShorthand(shape)
		if err != nil {
			t.Fatal(err)
		}
		c, err := spec.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, per := range []map[string]int{{"t4": c.Nodes[0].GPUs}, {}} {
			for i, src := range jobs[:40] {
				j := *src
				j.MinGPUs, j.MaxGPUs = 1+i%3, []int{1, 5, 9, 64, 100}[i%5]
				want := math.Inf(1)
				for n := j.MinGPUs; n <= min(j.MaxGPUs, c.GPUsOfType("t4")); n++ {
					want = math.Min(want, perf.Remaining(m, &j, perf.Packed("t4", n, per["t4"]), 0))
				}
				if math.IsInf(want, 1) {
					want = 0
				} else {
					want += m.Costs(&j).Start
				}
				if got := sim.LowerBound(m, c, per, &j); got != want {
					t.Errorf("%s, per node %v, job %s on %d..%d GPUs: %v, every Packed count gives %v", shape, per, j.ID, j.MinGPUs, j.MaxGPUs, got, want)
				}
			}
		}
	}
}
