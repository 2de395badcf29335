package server

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/store"
)

// TestNoisyGradientReports: a job whose gradient statistics come with
// noise (each report's variance off by a log-normal factor of mean 1,
// often 2x either way) keeps a stable noise scale, and so a stable best batch,
// once its reports are smoothed; the raw reports would move the best
// batch across its range.
func TestNoisyGradientReports(t *testing.T) {
	const truth = 16.0 // GradVar/GradSqr: a noise scale of 16 x 64 = 1024 samples
	rng := rand.New(rand.NewPCG(15, 1))
	s := &Server{}
	lj := &liveJob{rec: &store.Job{}}
	// The job's throughput model: near-linear scaling, batch 64 to 4096.
	params := goodput.Params{AlphaC: 0.01, BetaC: 0.0005, AlphaR: 0.002, BetaR: 0.001, AlphaN: 0.01, BetaN: 0.005, Gamma: 1}
	limits := goodput.Limits{InitBatch: 64, MaxBatch: 4096, Accumulation: true}
	best := func(g goodput.Grad) int {
		return goodput.Function{P: params, G: g, L: limits}.Optimize(1, 4).Batch(4)
	}
	smoothed, raw := map[int]bool{}, map[int]bool{}
	for i := 0; i < 200; i++ {
		noisy := truth * math.Exp(rng.NormFloat64()*0.7-0.7*0.7/2) // mean truth
		s.learn(lj, &api.Report{GradSqr: 1, GradVar: noisy})
		p := lj.rec.Perf
		if i < 40 {
			continue // warming up
		}
		if ns := p.GradVar / p.GradSqr; ns < truth/2 || ns > truth*2 {
			t.Errorf("report %d: smoothed noise scale %.0f, truth %.0f", i, ns, truth)
		}
		smoothed[best(goodput.Grad{Sqr: p.GradSqr, Var: p.GradVar})] = true
		raw[best(goodput.Grad{Sqr: 1, Var: noisy})] = true
	}
	if len(raw) < 3 {
		t.Fatalf("the raw reports give %d best batches: the test's noise does not exercise smoothing", len(raw))
	}
	if len(smoothed) > len(raw)/2 {
		t.Errorf("smoothed reports give %d distinct best batches (raw %d): not stable", len(smoothed), len(raw))
	}
	t.Logf("distinct best batches: raw %d, smoothed %d", len(raw), len(smoothed))
}
