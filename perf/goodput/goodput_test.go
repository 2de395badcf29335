package goodput

import (
	"fmt"
	"math"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want)) }

func TestEfficiencyIsOneAtInitBatch(t *testing.T) {
	for _, g := range []Grad{{Sqr: 1, Var: 0}, {Sqr: 1, Var: 1}, {Sqr: 1e-3, Var: 10}, {Sqr: 0, Var: 5}, {}} {
		for _, m0 := range []int{1, 32, 1000} {
			f := Function{G: g, L: Limits{InitBatch: m0, MaxBatch: 10 * m0}}
			if e := f.Efficiency(float64(m0)); !near(e, 1, 1e-12) {
				t.Errorf("grad %+v, InitBatch %d: Efficiency(InitBatch) = %g, want 1", g, m0, e)
			}
		}
	}
}

// Efficiency is (PGNS + M0) / (PGNS + M) with PGNS = Var/Sqr*M0 (the
// gradient noise scale): it falls as the batch M grows, slowly while M is
// below the noise scale and as M0/M beyond it.
func TestEfficiencyFallsWithBatch(t *testing.T) {
	const m0 = 32
	for _, g := range []Grad{{Sqr: 1, Var: 0}, {Sqr: 1, Var: 1}, {Sqr: 1, Var: 100}, {Sqr: 0.5, Var: 1e4}} {
		f := Function{G: g, L: Limits{InitBatch: m0, MaxBatch: 1 << 20}}
		pgns := g.Var / g.Sqr * m0
		prev := 1.0
		for m := m0 * 2; m <= 1<<20; m *= 2 {
			e := f.Efficiency(float64(m))
			if want := (pgns + m0) / (pgns + float64(m)); !near(e, want, 1e-12) {
				t.Errorf("grad %+v: Efficiency(%d) = %g, want (PGNS+M0)/(PGNS+M) = %g", g, m, e, want)
			}
			if !(e < prev) || e <= 0 {
				t.Errorf("grad %+v: Efficiency(%d) = %g, not below %g at half the batch", g, m, e, prev)
			}
			prev = e
		}
	}
	// No noise (Var = 0): a larger batch brings nothing, each sample is
	// worth M0/M of one at M0.
	f := Function{G: Grad{Sqr: 1}, L: Limits{InitBatch: m0}}
	if e := f.Efficiency(4 * m0); !near(e, 0.25, 1e-12) {
		t.Errorf("noise-free Efficiency(4 M0) = %g, want 0.25", e)
	}
}

// Throughput by hand for a model with round numbers.
func TestThroughputByHand(t *testing.T) {
	p := Params{AlphaC: 0.1, BetaC: 0.01, AlphaN: 0.5, BetaN: 0.1, AlphaR: 0.2, BetaR: 0.05, Gamma: 1}
	f := Function{P: p, L: Limits{InitBatch: 10, MaxBatch: 1000}}
	cases := []struct {
		nodes, replicas, local, accum int
		want                          float64
	}{
		// One GPU, batch 10: compute 0.1 + 0.01*10 = 0.2 s, no network
		// (1e-8 + 1e-8*1e-8 s stands for 0): 10 samples / 0.2 s.
		{1, 1, 10, 0, 10 / (0.2 + 1e-8 + 1e-16)},
		// One node, 4 GPUs: network 0.2 + 0.05*(4-2) = 0.3 s; no overlap
		// (Gamma 1): step 0.5 s; one accumulation pass adds 0.2 s; the
		// batch is 4 x 10 x 2 = 80.
		{1, 4, 10, 1, 80 / 0.7},
		// Two nodes, 4 GPUs: network 0.5 + 0.1*2 = 0.7 s, step 0.9 s.
		{2, 4, 10, 0, 40 / 0.9},
		// Two GPUs: no retrogression (max(2-2, 1e-8) replicas' worth),
		// network 0.2 s.
		{1, 2, 20, 0, 40 / (0.3 + 0.2 + 0.05*1e-8)},
	}
	for _, c := range cases {
		if got := f.Throughput(c.nodes, c.replicas, c.local, c.accum); !near(got, c.want, 1e-9) {
			t.Errorf("Throughput(%d, %d, %d, %d) = %g, want %g", c.nodes, c.replicas, c.local, c.accum, got, c.want)
		}
	}
	// Gamma = 2: step = sqrt(0.2^2 + 0.3^2), compute and network overlap.
	f.P.Gamma = 2
	if got, want := f.Throughput(1, 4, 10, 0), 40/math.Sqrt(0.04+0.09); !near(got, want, 1e-12) {
		t.Errorf("Gamma 2: Throughput(1, 4, 10, 0) = %g, want %g", got, want)
	}
	// Gamma large: T_step tends to max(compute, network).
	f.P.Gamma = 10
	if got, want := f.P.StepTime(2, 4, 10), 0.7; !near(got, want, 1e-3) {
		t.Errorf("Gamma 10: StepTime(2, 4, 10) = %g, want ~max(0.2, 0.7) = %g", got, want)
	}
	// Goodput is throughput x efficiency.
	f.G = Grad{Sqr: 1, Var: 3}
	if got, want := f.Goodput(1, 4, 10, 1), f.Throughput(1, 4, 10, 1)*f.Efficiency(80); !near(got, want, 1e-12) {
		t.Errorf("Goodput = %g, want Throughput x Efficiency = %g", got, want)
	}
}

// Optimize's choice is a valid configuration under every limit: the atomic
// batch in [MinLocal, MaxLocal], no accumulation unless allowed, at least
// one accumulation pass on one replica above InitBatch, a global batch
// from InitBatch up to MaxBatch (rounded up to a whole atomic batch per
// pass, as adaptdl does), and its goodput is what Goodput says.
func TestOptimizeRespectsLimits(t *testing.T) {
	p := Params{AlphaC: 0.05, BetaC: 0.002, AlphaN: 0.3, BetaN: 0.02, AlphaR: 0.08, BetaR: 0.01, Gamma: 2}
	grads := []Grad{{Sqr: 1, Var: 0.1}, {Sqr: 1, Var: 50}, {Sqr: 1, Var: 1e4}}
	limits := []Limits{
		{InitBatch: 32, MaxBatch: 32},
		{InitBatch: 32, MaxBatch: 4096, MinLocal: 8, MaxLocal: 64, Accumulation: true},
		{InitBatch: 32, MaxBatch: 4096, MinLocal: 8, MaxLocal: 64},
		{InitBatch: 128, MaxBatch: 8192, MaxLocal: 512, Accumulation: true},
		{InitBatch: 100, MaxBatch: 1000, MinLocal: 3, Accumulation: true},
		{InitBatch: 64, MaxBatch: 256, MinLocal: 16, MaxLocal: 32, Accumulation: true},
	}
	shapes := [][2]int{{1, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 8}, {4, 16}, {8, 64}}
	for _, l := range limits {
		for _, g := range grads {
			f := Function{P: p, G: g, L: l}
			minLocal, maxLocal := max(l.MinLocal, 1), l.MaxLocal
			if maxLocal == 0 {
				maxLocal = l.MaxBatch
			}
			for _, s := range shapes {
				nodes, replicas := s[0], s[1]
				what := fmt.Sprintf("limits %+v grad %+v on %dx%d", l, g, nodes, replicas)
				c := f.Optimize(nodes, replicas)
				if minLocal*replicas > l.MaxBatch {
					// No allowed batch: adaptdl still takes MinLocal per GPU.
					if c.LocalBsz != minLocal && c.Goodput != 0 {
						t.Errorf("%s: %+v, want MinLocal per GPU or nothing", what, c)
					}
					continue
				}
				if c.Goodput <= 0 {
					t.Errorf("%s: no configuration: %+v", what, c)
					continue
				}
				b := c.Batch(replicas)
				switch {
				case c.LocalBsz < minLocal || c.LocalBsz > maxLocal:
					t.Errorf("%s: atomic batch %d outside [%d, %d]", what, c.LocalBsz, minLocal, maxLocal)
				case c.AccumSteps < 0 || (!l.Accumulation && c.AccumSteps != 0):
					t.Errorf("%s: %d accumulation steps (allowed: %v)", what, c.AccumSteps, l.Accumulation)
				case l.Accumulation && replicas == 1 && b > l.InitBatch && c.AccumSteps < 1:
					t.Errorf("%s: one replica at batch %d > InitBatch %d without accumulation", what, b, l.InitBatch)
				case b < l.InitBatch:
					t.Errorf("%s: batch %d below InitBatch %d", what, b, l.InitBatch)
				case b >= l.MaxBatch+replicas*(c.AccumSteps+1):
					t.Errorf("%s: batch %d beyond MaxBatch %d rounded up", what, b, l.MaxBatch)
				case !near(c.Goodput, f.Goodput(nodes, replicas, c.LocalBsz, c.AccumSteps), 1e-12):
					t.Errorf("%s: %+v, but Goodput says %g", what, c, f.Goodput(nodes, replicas, c.LocalBsz, c.AccumSteps))
				}
			}
		}
	}
}

// Optimize prefers a larger batch exactly when the gradient noise makes it
// worthwhile: with little noise the initial batch, with much noise the
// largest.
func TestOptimizeFollowsNoise(t *testing.T) {
	p := Params{AlphaC: 0.05, BetaC: 0.002, AlphaN: 0.3, BetaN: 0.02, AlphaR: 0.08, BetaR: 0.01, Gamma: 2}
	l := Limits{InitBatch: 32, MaxBatch: 1024, MaxLocal: 256, Accumulation: true}
	quiet := Function{P: p, G: Grad{Sqr: 1, Var: 0}, L: l}.Optimize(1, 4)
	noisy := Function{P: p, G: Grad{Sqr: 1e-6, Var: 1}, L: l}.Optimize(1, 4)
	if quiet.Batch(4) != 32 {
		t.Errorf("no gradient noise: %+v, want the initial batch 32", quiet)
	}
	if noisy.Batch(4) != 1024 {
		t.Errorf("gradient noise scale ~3e7: %+v, want the largest batch 1024", noisy)
	}
}

// With MaxLocal unset the atomic batch may reach the largest batch Optimize
// considers, max(MaxBatch, InitBatch), even when MaxBatch is unset.
func TestOptimizeMaxLocalDefault(t *testing.T) {
	p := Params{AlphaC: 0.05, BetaC: 0.002, Gamma: 1}
	f := Function{P: p, G: Grad{Sqr: 1, Var: 1}, L: Limits{InitBatch: 64}}
	if c := f.Optimize(1, 1); c.LocalBsz != 64 || c.AccumSteps != 0 || c.Goodput <= 0 {
		t.Errorf("MaxBatch and MaxLocal unset: %+v, want 64 samples in one pass", c)
	}
	if c := f.Optimize(1, 2); c.LocalBsz != 32 || c.Goodput <= 0 {
		t.Errorf("MaxBatch and MaxLocal unset, 2 GPUs: %+v, want 32 per GPU", c)
	}
}

func TestOptimizeNoReplicas(t *testing.T) {
	f := Function{P: truth, G: Grad{Sqr: 1, Var: 1}, L: Limits{InitBatch: 32, MaxBatch: 256}}
	for _, s := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {-1, 4}} {
		if c := f.Optimize(s[0], s[1]); c != (Config{}) {
			t.Errorf("Optimize(%d, %d) = %+v, want the zero Config", s[0], s[1], c)
		}
	}
	if s := f.Speedup(1, 0); s != 0 {
		t.Errorf("Speedup(1, 0) = %g, want 0", s)
	}
}

func TestSpeedup(t *testing.T) {
	l := Limits{InitBatch: 32, MaxBatch: 4096, MaxLocal: 256, Accumulation: true}
	g := Grad{Sqr: 1, Var: 1000} // noise scale 32000: large batches pay
	real := Function{P: truth, G: g, L: l}
	if s := real.Speedup(1, 1); s != 1 {
		t.Errorf("Speedup(1, 1) = %g, want 1", s)
	}

	// Ideal scaling: no communication cost at all. Speedup rises with
	// every replica added, and cannot beat linear by more than the
	// statistical gain of the larger batch allows.
	ideal := Function{P: Params{AlphaC: 0.01, BetaC: 0.001, Gamma: 1}, G: g, L: l}
	prev := 0.0
	for r := 1; r <= 64; r++ {
		s := ideal.Speedup(1, r)
		if !(s > prev) {
			t.Errorf("ideal model: Speedup(1, %d) = %g, not above %g for %d", r, s, prev, r-1)
		}
		if s > float64(r)*1.0001 {
			t.Errorf("ideal model: Speedup(1, %d) = %g, above linear", r, s)
		}
		prev = s
	}
	// Spanning nodes costs the ideal model nothing either.
	if a, b := ideal.Speedup(1, 8), ideal.Speedup(4, 8); !near(a, b, 1e-12) {
		t.Errorf("ideal model: Speedup(1, 8) = %g != Speedup(4, 8) = %g", a, b)
	}

	// With communication costs, crossing nodes is slower than staying on
	// one (AlphaN > AlphaR), and more GPUs still help at first.
	if a, b := real.Speedup(1, 4), real.Speedup(2, 4); !(a > b) {
		t.Errorf("Speedup(1, 4) = %g not above Speedup(2, 4) = %g", a, b)
	}
	if a, b := real.Speedup(1, 2), real.Speedup(1, 4); !(b > a && a > 1) {
		t.Errorf("Speedup(1, 2) = %g, Speedup(1, 4) = %g: want 1 < first < second", a, b)
	}
}
