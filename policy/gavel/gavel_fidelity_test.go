package gavel

import (
	"fmt"
	"math"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// gavelReference is what Gavel's simulator gives on
// generated_seed<trace>_lam3600.trace (8 V100 + 8 P100 + 8 K80, one GPU per
// server, 360 s rounds, average JCT of jobs 100 to 199):
//
//   - fifoPerf: FIFO_Perf, which draws nothing at random;
//   - fifoMean: FIFO's mean over Gavel's --seed 0 to 9.
//
// Seed 0's FIFO_Perf (55,668 s) and FIFO at --seed 0 (71,776 s) were
// published by running Gavel's own simulate_scheduler_with_trace.py (this
// project's issue 6). The other figures come from
// scripts/gavel-fifo-reference.py, a re-implementation of that simulator's
// FIFO path that reproduces both published figures to the second:
//
//	python3 scripts/gavel-fifo-reference.py ../shared/data/gavel/generated_seedT_lam3600.trace \
//	    --throughputs ../shared/data/gavel/simulation_throughputs.json --policy fifo --seeds 0-9
var gavelReference = []struct {
	trace              int
	fifoPerf, fifoMean float64
}{
	{0, 55668, 79189.5},
	{1, 43753.4, 62225.9},
	{2, 48688.1, 76048.4},
}

// TestGavelAgreement replays three traces of Gavel's generator in Gavel's
// rounds and compares tide's Gavel FIFO policies with Gavel's simulator
// (gavelReference):
//
//   - fifo-perf within 1% on each trace;
//   - gavel-fifo:pick=gavel, as a mean over its seeds 0 to 9 (Gavel's
//     generator and seeds), within 5% of Gavel's mean on each trace. A
//     single seed is not compared: Gavel's own FIFO moves by up to 40%
//     between seeds on one trace, and tide's rounds differ from Gavel's in
//     the details that decide ties (docs/heterogeneity.md, section 3), so
//     one seed's run is a different draw from the same distribution.
//
// The mechanism was not adjusted to any of these figures. It reads
// ../shared/data/gavel and skips without it.
func TestGavelAgreement(t *testing.T) {
	pl, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range gavelReference {
		t.Run(fmt.Sprintf("trace%d", ref.trace), func(t *testing.T) {
			t.Parallel()
			jobs, m := policytest.GavelTrace(t, ref.trace)
			avg := func(spec string) float64 {
				r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("8x1:v100,8x1:p100,8x1:k80"), Model: m,
					Policy: fam.Parse(t, spec, contract.Context{}), Placer: pl, Round: 360}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				r.Window = [2]int{100, 200}
				return report.Summarize(r).AvgJCT
			}
			check := func(what string, got, want, tol float64) {
				dev := (got - want) / want
				msg := fmt.Sprintf("%s: average JCT of jobs 100-199 %.0f s, Gavel's simulator %.0f s (%+.1f%%)", what, got, want, 100*dev)
				if math.Abs(dev) > tol {
					t.Errorf("%s, want within %.0f%%", msg, 100*tol)
				} else {
					t.Log(msg)
				}
			}
			check("fifo-perf", avg("fifo-perf"), ref.fifoPerf, 0.01)
			sum := 0.0
			for seed := range 10 {
				sum += avg(fmt.Sprintf("gavel-fifo:pick=gavel:seed=%d", seed))
			}
			check("gavel-fifo:pick=gavel, mean of seeds 0-9", sum/10, ref.fifoMean, 0.05)
		})
	}
}
