package elastic

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine"
)

// BenchmarkPolluxRound times one Pollux scheduling round (problem set-up,
// search, plan) on random snapshots (pxRandomSnap: a mix of unfitted,
// near-linear and poorly scaling jobs, about half holding GPUs), for both
// searches on the same snapshot, with the speedup cache emptied before
// each round (the worst case: every job reported new hints) or, for /warm,
// kept from the previous round (no job reported new hints). It reports the
// fitness reached (the power mean the search maximises; higher is better)
// and the jobs given GPUs, and the process CPU seconds per round (cpu-s/op:
// both searches run on one goroutine, so on an otherwise idle machine this
// is close to the wall time per round, while ns/op grows with whatever else
// shares the cores). The GA on the large cluster is skipped with -short.
//
//	go test ./policy -run '^$' -bench PolluxRound -cpu 2 -benchtime 5x
func BenchmarkPolluxRound(b *testing.B) {
	for _, sz := range []struct {
		name             string
		nodes, gpn, jobs int
	}{
		{"64gpus-40jobs", 16, 4, 40},
		{"64gpus-160jobs", 16, 4, 160},
		{"1024gpus-1000jobs", 256, 4, 1000},
	} {
		s := pxRandomSnap(1, sz.nodes, sz.gpn, sz.jobs)
		for _, run := range []struct {
			search string
			warm   bool
		}{{"fast", false}, {"fast", true}, {"ga", false}} {
			name := fmt.Sprintf("%s/search=%s", sz.name, run.search)
			if run.warm {
				name += "/warm"
			}
			b.Run(name, func(b *testing.B) {
				if run.search == "ga" && sz.jobs > 200 && testing.Short() {
					b.Skip("the GA on 1,000 jobs is slow; run without -short")
				}
				pxBenchRound(b, s, NewPollux(run.search), run.warm)
			})
		}
		// The artifact's GA keeps its population between rounds: five
		// rounds of it on the same snapshot (time is for all five).
		b.Run(sz.name+"/search=ga/5-warm-rounds", func(b *testing.B) {
			if sz.jobs > 200 && testing.Short() {
				b.Skip("the GA on 1,000 jobs is slow; run without -short")
			}
			fit := 0.0
			cpu0 := cputime.Process()
			for range b.N {
				pxResetCache()
				fit = pxWarmGA(s, 5)
			}
			b.ReportMetric(fit, "fitness")
			pxReportCPU(b, cpu0)
		})
	}
}

// pxBenchRound times rounds of p on s: problem set-up, search and plan,
// with the speedup cache emptied before each round unless warm. It reports
// the fitness reached, the jobs given GPUs and the CPU seconds per round.
func pxBenchRound(b *testing.B, s *engine.Snapshot, p *Pollux, warm bool) {
	fit, running := 0.0, 0
	pxResetCache()
	cpu0 := cputime.Process()
	for range b.N {
		if !warm {
			pxResetCache()
		}
		pr := newPxProblem(s, p)
		sol := pr.solve(s.Round)
		plan := pr.plan(sol)
		fit, running = pr.fitness(sol), len(plan.Run)
		pr.publish()
	}
	b.ReportMetric(fit, "fitness")
	b.ReportMetric(float64(running), "jobs-run")
	pxReportCPU(b, cpu0)
}

// pxResetCache empties the speedup cache, so that a round starts cold.
func pxResetCache() {
	pxCache.Lock()
	defer pxCache.Unlock()
	pxCache.cur, pxCache.prev = nil, nil
}

// pxReportCPU reports the process CPU seconds per op since cpu0 (when the
// platform can tell).
func pxReportCPU(b *testing.B, cpu0 float64) {
	if cpu0 < 0 {
		return
	}
	b.ReportMetric((cputime.Process()-cpu0)/float64(b.N), "cpu-s/op")
}

// BenchmarkPolluxTries times the fast search on one random snapshot of
// 10,000 GPUs (2,500 nodes) and 5,000 jobs with its large-neighbourhood
// search capped at tries (0: its default, 500 + 20 x nodes = 50,500), and
// reports the fitness each reaches (higher is better) beside the CPU
// seconds per round: what the tries knob trades (docs/scale.md).
//
//	go test ./policy/elastic -run '^$' -bench PolluxTries -benchtime 1x
func BenchmarkPolluxTries(b *testing.B) {
	s := pxRandomSnap(1, 2500, 4, 5000)
	for _, tries := range []int{0, 10000, 2000, 500} {
		b.Run(fmt.Sprintf("10000gpus-5000jobs/tries=%d", tries), func(b *testing.B) {
			p := NewPollux("fast")
			p.Tries = tries
			pxBenchRound(b, s, p, false)
		})
	}
}
