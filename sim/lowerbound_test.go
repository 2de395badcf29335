package sim_test

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/sim"
)

// packedOnly hides a model's perf.Bounder: LowerBound then prices packed
// allocations only.
type packedOnly struct{ perf.Model }

// TestLowerBoundEveryCount: with a model that is no perf.Bounder,
// LowerBound, which grows one allocation GPU by GPU, gives the best of
// perf.Packed's allocation at every count, on a model whose times depend
// on the nodes spanned (the Pollux profiles, their Bounder hidden), for
// nodes of 4 and 8 GPUs and for a type with no per-node size given.
func TestLowerBoundEveryCount(t *testing.T) {
	jobs, pm, _ := workload6(t)
	m := packedOnly{pm}
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

// TestLowerBoundBeatsEveryAllocation: with the Pollux profiles (a
// perf.Bounder) the bound is at most the time on every packed count, on
// spread placements of the cluster's nodes, and for an adaptive job with
// any batch configuration held throughout; for a rigid job alone on one
// node it is the packed time exactly.
func TestLowerBoundBeatsEveryAllocation(t *testing.T) {
	jobs, m, c := workload6(t)
	per := map[string]int{"t4": 4}
	lim := m.(perf.Observer).Limits
	for i, src := range jobs[:40] {
		for _, adapt := range []bool{false, true} {
			j := *src
			j.MinGPUs, j.MaxGPUs, j.AdaptBatch = 1+i%3, []int{1, 5, 9, 64}[i%4], adapt
			got := sim.LowerBound(m, c, per, &j)
			start := m.Costs(&j).Start
			check := func(what string, a perf.Alloc) {
				if r := perf.Remaining(m, &j, a, 0) + start; got > r {
					t.Errorf("job %s on %d..%d GPUs (adaptive %v): bound %v, above %v on %s", j.ID, j.MinGPUs, j.MaxGPUs, adapt, got, r, what)
				}
			}
			for n := j.MinGPUs; n <= j.MaxGPUs; n++ {
				check("packed", perf.Packed("t4", n, 4))
				spread := make([]int, 0, n)
				for g := n; g > 0; g -= min(g, 2) {
					spread = append(spread, min(g, 2))
				}
				if len(spread) <= 16 {
					check("spread", perf.Alloc{GPUType: "t4", PerNode: spread})
				}
				if !adapt {
					continue
				}
				l := lim(&j)
				for _, atomic := range []int{1, l.MinLocal, (l.MinLocal + l.MaxLocal) / 2, l.MaxLocal} {
					for _, accum := range []int{0, 1, 3} {
						a := perf.Packed("t4", n, 4)
						a.LocalBsz, a.AccumSteps = atomic, accum
						check("a batch configuration", a)
					}
				}
			}
			if !adapt && j.MaxGPUs <= 4 && j.MinGPUs == j.MaxGPUs {
				if want := perf.Remaining(m, &j, perf.Packed("t4", j.MinGPUs, 4), 0) + start; got != want {
					t.Errorf("job %s alone on %d GPUs: bound %v, packed %v", j.ID, j.MinGPUs, got, want)
				}
			}
		}
	}
}

// BenchmarkLowerBound prices the bounds of workload-6's 160 jobs on 64 T4
// as a run's report does: rigid (as the trace asks), elastic (1 to 64
// GPUs, own batch: Optimus, AFS) and batch-adapting (Pollux). Each op
// loads the profiles afresh, so it pays for filling the bound's cache once,
// as one tide sim process does; load is that loading alone, and packed
// the bound before it priced placements and batch configurations (every
// packed count, perf.Remaining). cpu-ms/op is the process's CPU time per
// op, the figure to compare on a loaded machine.
func BenchmarkLowerBound(b *testing.B) {
	jobs, _, c := workload6(b)
	per := map[string]int{"t4": 4}
	shape := map[string]func(j *job.Job){
		"rigid":    func(j *job.Job) {},
		"elastic":  func(j *job.Job) { j.MinGPUs, j.MaxGPUs = 1, 64 },
		"adaptive": func(j *job.Job) { j.MinGPUs, j.MaxGPUs, j.AdaptBatch = 1, 64, true },
	}
	for _, kind := range []string{"load", "rigid", "elastic", "adaptive", "packed-rigid", "packed-elastic", "packed-adaptive"} {
		b.Run(kind, func(b *testing.B) {
			set := kind
			if len(set) > 7 && set[:7] == "packed-" {
				set = set[7:]
			}
			js := make([]*job.Job, len(jobs))
			for i, src := range jobs {
				j := *src
				if f := shape[set]; f != nil {
					f(&j)
				}
				js[i] = &j
			}
			cpu := cputime.Process()
			for b.Loop() {
				pm, err := pollux.Load(data.FS, data.ProfilesDir)
				if err != nil {
					b.Fatal(err)
				}
				if kind == "load" {
					continue
				}
				var m perf.Model = pm
				if set != kind {
					m = packedOnly{pm}
				}
				for _, j := range js {
					sim.LowerBound(m, c, per, j)
				}
			}
			b.ReportMetric((cputime.Process()-cpu)*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
