package elastic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine"
)

// phillyMins are the Philly trace's GPU counts, one per 100 of its 82,247
// jobs that ask for each (rounded up): 93% ask for one GPU.
var phillyMins = func() []int {
	var m []int
	for _, c := range []struct{ n, jobs int }{{1, 76627}, {2, 1818}, {4, 1870}, {8, 1643}, {16, 199}, {32, 67}} {
		for range (c.jobs + 99) / 100 {
			m = append(m, c.n)
		}
	}
	return m
}()

// koRounds are rounds of pools as elasticRound.pool builds them: n active
// jobs with Philly's minimums, each round about 1% of them leaving and as
// many arriving, and the part moved of the jobs bound to another pool.
func koRounds(n, pools, rounds int, moved float64) [][][]*elasticJob {
	rng := rand.New(rand.NewPCG(1, 2))
	w := &koWorld{rng: rng, mins: phillyMins, pool: map[*engine.Status]int{}}
	for range n {
		w.arrive(pools)
		w.now++
	}
	out := make([][][]*elasticJob, rounds)
	for r := range out {
		w.now += 60
		w.active = slices.DeleteFunc(w.active, func(st *engine.Status) bool {
			if rng.IntN(100) != 0 {
				return false
			}
			w.free = append(w.free, st.Slot)
			delete(w.pool, st)
			return true
		})
		for len(w.active) < n {
			w.arrive(pools)
		}
		for _, st := range w.active {
			if rng.Float64() < moved {
				w.pool[st] = rng.IntN(pools)
			}
		}
		ejs := make([]elasticJob, len(w.active))
		out[r] = make([][]*elasticJob, pools)
		for i, st := range w.active {
			ejs[i] = elasticJob{st: st, min: st.Job.MinGPUs}
			out[r][w.pool[st]] = append(out[r][w.pool[st]], &ejs[i])
		}
	}
	return out
}

// BenchmarkOptimusOrder: one round's order of Optimus' minimums, every
// pool, by the stable sort it was (stable) and by optimusByMin (counting),
// on n jobs with Philly's minimums (docs/scale.md, "Optimus' minimums");
// cpu-ns/op is the process' CPU time a round, the figure to compare on a
// loaded machine.
//
//	go test ./policy/elastic -run '^$' -bench OptimusOrder
func BenchmarkOptimusOrder(b *testing.B) {
	for _, n := range []int{1000, 5000, 50000} {
		for _, pools := range []int{1, 3} {
			rounds := koRounds(n, pools, 40, 0.2)
			name := fmt.Sprintf("%djobs-%dpools", n, pools)
			b.Run(name+"/stable", func(b *testing.B) {
				var dst []*elasticJob
				cpu := cputime.Process()
				for i := range b.N {
					for _, jobs := range rounds[i%len(rounds)] {
						dst = append(dst[:0], jobs...)
						slices.SortStableFunc(dst, func(a, b *elasticJob) int { return a.min - b.min })
					}
				}
				b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
			})
			b.Run(name+"/counting", func(b *testing.B) {
				var r elasticRound
				cpu := cputime.Process()
				for i := range b.N {
					for _, jobs := range rounds[i%len(rounds)] {
						r.optimusByMin(jobs)
					}
				}
				b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
