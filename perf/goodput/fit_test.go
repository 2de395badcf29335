package goodput

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"gonum.org/v1/gonum/optimize"
)

// config is one (nodes, replicas, localBsz) configuration.
type config struct{ nodes, replicas, bsz int }

// observe is what a job following p exactly would measure on c, with both
// times scaled by (1 + noise).
func observe(p Params, c config, noise float64) Observation {
	return Observation{
		Nodes: c.nodes, Replicas: c.replicas, LocalBsz: c.bsz,
		ComputeTime: p.computeTime(float64(c.bsz)) * (1 + noise),
		StepTime:    p.StepTime(c.nodes, c.replicas, c.bsz) * (1 + noise),
	}
}

// noiseAt is a deterministic pseudo-random value in [-amp, amp].
func noiseAt(i int, amp float64) float64 {
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return amp * (2*float64(x>>11)/(1<<53) - 1)
}

// truth is a model with every term identifiable and of a realistic size:
// ~0.1 s of compute at batch 32, intra-node all-reduce ~0.05 s, inter-node
// ~0.2 s, partial overlap.
var truth = Params{
	AlphaC: 0.02, BetaC: 0.0025,
	AlphaN: 0.15, BetaN: 0.012,
	AlphaR: 0.04, BetaR: 0.004,
	Gamma: 2.5,
}

// trainConfigs spread over every kind of link and replica count up to 8.
var trainConfigs = []config{
	{1, 1, 16}, {1, 1, 32}, {1, 1, 64},
	{1, 2, 32}, {1, 4, 16}, {1, 4, 64},
	{2, 2, 32}, {2, 4, 64}, {2, 8, 16}, {2, 8, 128},
}

// heldOutConfigs are none of the above: other batches, more replicas and
// nodes.
var heldOutConfigs = []config{
	{1, 1, 128}, {1, 3, 48}, {1, 8, 24}, {3, 6, 40},
	{3, 12, 96}, {4, 16, 32}, {8, 32, 8}, {16, 64, 256},
}

func relErr(got, want float64) float64 { return math.Abs(got/want - 1) }

func TestFitRecoversExactModel(t *testing.T) {
	var obs []Observation
	for _, c := range trainConfigs {
		obs = append(obs, observe(truth, c, 0))
	}
	rep := FitWithReport(obs)
	t.Logf("%+v", rep)
	if !rep.Converged || rep.Used != len(obs) || rep.Free != nParams {
		t.Errorf("report %+v: want converged, %d used, %d free", rep, len(obs), nParams)
	}
	// Noise-free data from the model itself: the fit should explain it
	// to well under a per-mille.
	if rep.ComputeRMSLE > 1e-4 || rep.StepRMSLE > 1e-4 {
		t.Errorf("RMSLE (%g, %g) on exact data, want < 1e-4", rep.ComputeRMSLE, rep.StepRMSLE)
	}
	got, want := rep.Params.vec(), truth.vec()
	names := [nParams]string{"AlphaC", "BetaC", "AlphaN", "BetaN", "AlphaR", "BetaR", "Gamma"}
	for i := range nParams {
		if relErr(got[i], want[i]) > 0.01 {
			t.Errorf("%s = %g, want %g within 1%%", names[i], got[i], want[i])
		}
	}
	for _, c := range heldOutConfigs {
		for _, accum := range []int{0, 3} {
			g := rep.Params.IterTime(c.nodes, c.replicas, c.bsz, accum)
			w := truth.IterTime(c.nodes, c.replicas, c.bsz, accum)
			if relErr(g, w) > 1e-3 {
				t.Errorf("IterTime%v accum %d = %g, want %g", c, accum, g, w)
			}
		}
	}
}

func TestFitNoisyModelPredictsHeldOut(t *testing.T) {
	// Every configuration measured twice with up to ±5% error.
	var obs []Observation
	for k := range 2 {
		for i, c := range trainConfigs {
			obs = append(obs, observe(truth, c, noiseAt(100*k+i, 0.05)))
		}
	}
	rep := FitWithReport(obs)
	t.Logf("%+v", rep)
	if !rep.Converged {
		t.Errorf("not converged: %+v", rep)
	}
	// The fitted objective can be no worse than the true parameters'.
	var pr problem
	pr.load(obs)
	atTruth, _, _ := pr.objective(truth.vec(), nil)
	if rep.Objective > atTruth+1e-9 {
		t.Errorf("objective %g at the fit > %g at the true parameters", rep.Objective, atTruth)
	}
	// Within 1.5x of the training range (<= 12 replicas, <= 3 nodes) the
	// error stays within 3%; extrapolating 8x (64 replicas on 16 nodes)
	// it grows to 8%. (Measured over five noise draws: at most 2.8% and
	// 5.4%.)
	for _, c := range heldOutConfigs {
		g := rep.Params.StepTime(c.nodes, c.replicas, c.bsz)
		w := truth.StepTime(c.nodes, c.replicas, c.bsz)
		bound := 0.03
		if c.replicas > 12 || c.nodes > 3 {
			bound = 0.08
		}
		if e := relErr(g, w); e > bound {
			t.Errorf("StepTime%v = %g, want %g (error %.3f > %.2f)", c, g, w, e, bound)
		}
	}
}

// An agent's history: a job starts on one GPU at one batch size, then
// explores. Each stage must respect the rules for what cannot be fitted.
func TestFitFixesWhatIsUnobserved(t *testing.T) {
	obs1 := []Observation{observe(truth, config{1, 1, 32}, 0)}
	lower := fitLower // a variable: 1.1*lower rounds as Fit's arithmetic does

	t.Run("one observation", func(t *testing.T) {
		p := Fit(obs1)
		c := obs1[0].ComputeTime
		if relErr(p.AlphaC, c/2) > 1e-12 {
			t.Errorf("AlphaC = %g, want mean compute time / 2 = %g", p.AlphaC, c/2)
		}
		// BetaC is free: the fit should explain the one compute time.
		if g := p.computeTime(32); relErr(g, c) > 1e-4 {
			t.Errorf("compute time %g, want %g", g, c)
		}
		if p.AlphaR != fitLower || p.BetaR != fitLower {
			t.Errorf("AlphaR, BetaR = %g, %g, want both %g", p.AlphaR, p.BetaR, fitLower)
		}
		// Prior: at least 10% above the (bound) intra-node terms.
		if p.AlphaN != 1.1*lower || p.BetaN != 1.1*lower {
			t.Errorf("AlphaN, BetaN = %g, %g, want both %g", p.AlphaN, p.BetaN, 1.1*lower)
		}
		// Gamma has no effect on one replica; only its regulariser pulls.
		if p.Gamma < gammaMin || p.Gamma > 1.001 {
			t.Errorf("Gamma = %g, want in [1, 1.001]", p.Gamma)
		}
	})

	t.Run("two batch sizes on one GPU", func(t *testing.T) {
		obs := append(obs1[:1:1], observe(truth, config{1, 1, 64}, 0))
		p := Fit(obs)
		if relErr(p.AlphaC, truth.AlphaC) > 1e-3 || relErr(p.BetaC, truth.BetaC) > 1e-3 {
			t.Errorf("AlphaC, BetaC = %g, %g, want %g, %g", p.AlphaC, p.BetaC, truth.AlphaC, truth.BetaC)
		}
	})

	t.Run("two GPUs on one node", func(t *testing.T) {
		obs := append(obs1[:1:1], observe(truth, config{1, 2, 32}, 0), observe(truth, config{1, 2, 64}, 0))
		p := Fit(obs)
		// No replicas > 2: no retrogression anywhere.
		if p.BetaR != fitLower {
			t.Errorf("BetaR = %g, want %g", p.BetaR, fitLower)
		}
		// No multi-node observation: the prior ties the N terms to R.
		if p.AlphaN < 1.1*p.AlphaR || p.BetaN < 1.1*p.BetaR {
			t.Errorf("AlphaN, BetaN = %g, %g, want >= 1.1 x (%g, %g)", p.AlphaN, p.BetaN, p.AlphaR, p.BetaR)
		}
		// The two-replica step time is explained by AlphaR.
		for _, o := range obs {
			if g := p.StepTime(o.Nodes, o.Replicas, o.LocalBsz); relErr(g, o.StepTime) > 1e-3 {
				t.Errorf("StepTime(%d, %d, %d) = %g, want %g", o.Nodes, o.Replicas, o.LocalBsz, g, o.StepTime)
			}
		}
	})

	t.Run("two nodes, no single-node multi-replica", func(t *testing.T) {
		obs := []Observation{
			observe(truth, config{1, 1, 32}, 0), observe(truth, config{1, 1, 64}, 0),
			observe(truth, config{2, 2, 32}, 0), observe(truth, config{2, 4, 32}, 0),
		}
		p := Fit(obs)
		if p.AlphaR != fitLower || p.BetaR != fitLower {
			t.Errorf("AlphaR, BetaR = %g, %g, want both %g", p.AlphaR, p.BetaR, fitLower)
		}
		// Two multi-node step times cannot pin AlphaN, BetaN and Gamma
		// (the regularisers choose among the exact fits), but the fit
		// must explain what it saw.
		for _, o := range obs {
			if g := p.StepTime(o.Nodes, o.Replicas, o.LocalBsz); relErr(g, o.StepTime) > 1e-3 {
				t.Errorf("StepTime(%d, %d, %d) = %g, want %g", o.Nodes, o.Replicas, o.LocalBsz, g, o.StepTime)
			}
		}
	})

	t.Run("two nodes, two replicas", func(t *testing.T) {
		obs := []Observation{observe(truth, config{1, 1, 32}, 0), observe(truth, config{2, 2, 32}, 0)}
		p := Fit(obs)
		if p.BetaN != fitLower || p.BetaR != fitLower {
			t.Errorf("BetaN, BetaR = %g, %g, want both %g", p.BetaN, p.BetaR, fitLower)
		}
	})
}

func TestFitEmptyAndInvalid(t *testing.T) {
	// No observations: the starting point, with the network terms held at
	// their bound (no observation of either link) and the prior applied.
	lower := fitLower
	want := Params{AlphaC: 0.1, BetaC: 0.01, AlphaN: 1.1 * lower, BetaN: 1.1 * lower, AlphaR: 1e-8, BetaR: 1e-8, Gamma: 1.001}
	if got := Fit(nil); got != want {
		t.Errorf("Fit(nil) = %+v, want %+v", got, want)
	}
	if rep := FitWithReport(nil); rep.Used != 0 || rep.Evaluations != 0 || rep.Objective != 0 {
		t.Errorf("FitWithReport(nil) = %+v", rep)
	}
	invalid := []Observation{
		{Nodes: 0, Replicas: 1, LocalBsz: 8, ComputeTime: 1, StepTime: 1},
		{Nodes: 1, Replicas: 0, LocalBsz: 8, ComputeTime: 1, StepTime: 1},
		{Nodes: 1, Replicas: 1, LocalBsz: -1, ComputeTime: 1, StepTime: 1},
		{Nodes: 1, Replicas: 1, LocalBsz: 8, ComputeTime: 0, StepTime: 1},
		{Nodes: 1, Replicas: 1, LocalBsz: 8, ComputeTime: 1, StepTime: -1},
		{Nodes: 1, Replicas: 1, LocalBsz: 8, ComputeTime: math.NaN(), StepTime: 1},
		{Nodes: 1, Replicas: 1, LocalBsz: 8, ComputeTime: 1, StepTime: math.Inf(1)},
	}
	if got := Fit(invalid); got != want {
		t.Errorf("Fit(invalid only) = %+v, want %+v", got, want)
	}
	var valid []Observation
	for _, c := range trainConfigs {
		valid = append(valid, observe(truth, c, 0))
	}
	mixed := append(append(invalid[:4:4], valid...), invalid[4:]...)
	if got, want := Fit(mixed), Fit(valid); got != want {
		t.Errorf("invalid observations changed the fit: %+v, want %+v", got, want)
	}
	if rep := FitWithReport(mixed); rep.Used != len(valid) {
		t.Errorf("Used = %d, want %d", rep.Used, len(valid))
	}
}

func TestFitDeterministic(t *testing.T) {
	var obs []Observation
	for i, c := range trainConfigs {
		obs = append(obs, observe(truth, c, noiseAt(i, 0.1)))
	}
	want := Fit(obs)
	var wg sync.WaitGroup
	got := make([]Params, 8)
	for i := range got {
		wg.Go(func() { got[i] = Fit(obs) })
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Errorf("fit %d = %+v, want %+v (bit for bit)", i, g, want)
		}
	}
}

// checkParams fails unless p is finite and within the fit's bounds.
func checkParams(t *testing.T, p Params, what string) {
	t.Helper()
	v := p.vec()
	for i, x := range v {
		lo, hi := fitLower, math.Inf(1)
		if i == iGamma {
			lo, hi = gammaMin, gammaMax
		}
		if !(x >= lo && x <= hi) || math.IsInf(x, 0) {
			t.Fatalf("%s: parameter %d = %g outside [%g, %g]: %+v", what, i, x, lo, hi, p)
		}
	}
}

// Nonsense, extreme and contradictory observations must still give finite
// parameters within the bounds.
func TestFitExtremeObservations(t *testing.T) {
	cases := map[string][]Observation{
		"tiny times": {
			{1, 1, 1, 1e-300, 1e-300}, {1, 2, 2, 1e-290, 1e-280}, {2, 4, 3, 1e-300, 1e-200},
		},
		"huge times": {
			{1, 1, 1, 1e300, 1e300}, {1, 4, 7, 1e301, 1e305}, {3, 9, 2, 1e300, 1e307},
		},
		"huge batch": {
			{1, 1, math.MaxInt32, 1, 2}, {2, 8, 1 << 40, 3, 5}, {1, 2, 0, 0.1, 0.2},
		},
		"step below compute": {
			{1, 1, 8, 1, 0.001}, {1, 4, 8, 1, 0.002}, {2, 8, 16, 2, 0.001}, {4, 16, 4, 0.5, 1e-6},
		},
		"contradictory repeats": {
			{1, 2, 8, 0.1, 0.2}, {1, 2, 8, 10, 0.01}, {1, 2, 8, 1e-6, 100}, {2, 2, 8, 1, 1},
			{2, 3, 8, 1, 1e-9}, {5, 3, 8, 1, 1e9},
		},
		"many replicas": {
			{1, 1, 8, 0.1, 0.1}, {1 << 20, 1 << 30, 8, 0.1, 1e6}, {1, 1 << 30, 8, 0.1, 0.1},
		},
		"nodes > replicas": {{4, 1, 8, 0.1, 0.5}, {1, 1, 8, 0.1, 0.1}},
	}
	for name, obs := range cases {
		rep := FitWithReport(obs)
		checkParams(t, rep.Params, name)
		if math.IsNaN(rep.Objective) {
			t.Errorf("%s: objective NaN: %+v", name, rep)
		}
	}
}

func FuzzFit(f *testing.F) {
	f.Add(1, 1, 32, 0.1, 0.1, 2, 4, 64, 0.2, 0.5, 1, 2, 16, 0.05, 0.07)
	f.Add(1, 1, 1, 1e-300, 1e300, 3, 3, 0, 1e300, 1e-300, 1, 8, 1<<30, 1.0, 2.0)
	f.Fuzz(func(t *testing.T, n1, r1, b1 int, c1, s1 float64, n2, r2, b2 int, c2, s2 float64, n3, r3, b3 int, c3, s3 float64) {
		obs := []Observation{
			{n1, r1, b1, c1, s1}, {n2, r2, b2, c2, s2}, {n3, r3, b3, c3, s3},
		}
		p := Fit(obs)
		checkParams(t, p, "fuzz")
		if q := Fit(obs); q != p {
			t.Fatalf("not deterministic: %+v then %+v", p, q)
		}
	})
}

// randomProblem is a fit problem over observations of every link kind, and
// a random point within a factor of 10 of the parameters that generated
// them (so the objective is O(1), not dominated by the regulariser, and
// finite differences are accurate).
func randomProblem(seed int) (*problem, [nParams]float64) {
	var obs []Observation
	for i, c := range append(trainConfigs, heldOutConfigs...) {
		obs = append(obs, observe(truth, c, noiseAt(seed*1000+i, 0.3)))
	}
	var pr problem
	pr.load(obs)
	v := truth.vec()
	for i := range nParams {
		u := noiseAt(seed*1000+500+i, 1) // [-1, 1]
		if i == iGamma {
			v[i] = 5.5 + 4.5*u
		} else {
			v[i] *= math.Pow(10, u)
		}
	}
	return &pr, v
}

// The analytic gradient agrees with central finite differences, both with
// respect to the parameters and to the optimiser's variables.
func TestObjectiveGradient(t *testing.T) {
	for seed := range 20 {
		pr, v := randomProblem(seed)
		var g [nParams]float64
		pr.objective(v, &g)
		for i := range nParams {
			h := 1e-5 * v[i]
			up, dn := v, v
			up[i] += h
			dn[i] -= h
			fu, _, _ := pr.objective(up, nil)
			fd, _, _ := pr.objective(dn, nil)
			num := (fu - fd) / (2 * h)
			// Relative to the derivative, or to the objective's scale
			// over the parameter's own scale when the derivative is ~0.
			if math.Abs(num-g[i]) > 1e-6*math.Max(math.Abs(num), 1/v[i]) {
				t.Errorf("seed %d: d/dp%d = %g analytic, %g numeric", seed, i, g[i], num)
			}
		}

		// In the optimiser's variables, through the maps.
		x := make([]float64, len(pr.free))
		for k, i := range pr.free {
			if i == iGamma {
				x[k] = math.Asin(math.Sqrt((v[i] - gammaMin) / (gammaMax - gammaMin)))
			} else {
				x[k] = math.Sqrt(math.Log(v[i] / fitLower))
			}
		}
		if got := pr.params(x); relErr(got[iBetaC], v[iBetaC]) > 1e-12 || relErr(got[iGamma], v[iGamma]) > 1e-12 {
			t.Fatalf("maps do not round-trip: %v -> %v", v, got)
		}
		gx := make([]float64, len(x))
		pr.eval(x, gx)
		for k := range x {
			h := 1e-5
			up := append([]float64(nil), x...)
			dn := append([]float64(nil), x...)
			up[k] += h
			dn[k] -= h
			num := (pr.eval(up, nil) - pr.eval(dn, nil)) / (2 * h)
			if math.Abs(num-gx[k]) > 1e-6*math.Max(math.Abs(num), 1) {
				t.Errorf("seed %d: d/dx%d = %g analytic, %g numeric", seed, k, gx[k], num)
			}
		}
	}
}

// The objective's step-time prediction is the model's own: on observations
// generated by a Params, the objective's error terms vanish at it.
func TestObjectiveUsesModel(t *testing.T) {
	for _, p := range []Params{truth, {AlphaC: 1, BetaC: 1e-6, AlphaN: 1e-3, BetaN: 1e-8, AlphaR: 2, BetaR: 0.5, Gamma: 10}, {AlphaC: 1e-8, BetaC: 1, AlphaN: 5, BetaN: 5, AlphaR: 1e-8, BetaR: 1e-8, Gamma: 1}} {
		var obs []Observation
		for _, c := range append(trainConfigs, heldOutConfigs...) {
			obs = append(obs, observe(p, c, 0))
		}
		var pr problem
		pr.load(obs)
		if _, e1, e2 := pr.objective(p.vec(), nil); e1 > 1e-12 || e2 > 1e-12 {
			t.Errorf("%+v: RMSLE (%g, %g) at the generating parameters", p, e1, e2)
		}
	}
}

// agentObservations is a realistic refit: ten configurations, some measured
// with noise.
func agentObservations() []Observation {
	cfgs := []config{
		{1, 1, 32}, {1, 1, 64}, {1, 2, 32}, {1, 4, 32}, {1, 4, 64},
		{2, 4, 32}, {2, 8, 64}, {2, 8, 32}, {4, 16, 64}, {1, 1, 128},
	}
	var obs []Observation
	for i, c := range cfgs {
		obs = append(obs, observe(truth, c, noiseAt(i, 0.05)))
	}
	return obs
}

func BenchmarkFit(b *testing.B) {
	obs := agentObservations()
	for b.Loop() {
		Fit(obs)
	}
	b.ReportMetric(float64(FitWithReport(obs).Evaluations), "evals/fit")
}

// BenchmarkFitExact is the slow case: noise-free data, whose objective has
// a kink (RMSE = 0) at the optimum.
func BenchmarkFitExact(b *testing.B) {
	var obs []Observation
	for _, c := range agentObservations() {
		c.ComputeTime = truth.computeTime(float64(c.LocalBsz))
		c.StepTime = truth.StepTime(c.Nodes, c.Replicas, c.LocalBsz)
		obs = append(obs, c)
	}
	for b.Loop() {
		Fit(obs)
	}
	b.ReportMetric(float64(FitWithReport(obs).Evaluations), "evals/fit")
}

func BenchmarkObjective(b *testing.B) {
	var pr problem
	pr.load(agentObservations())
	v := truth.vec()
	var g [nParams]float64
	for b.Loop() {
		pr.objective(v, &g)
	}
}

// rng is a deterministic uniform [0, 1) generator (xorshift64).
func rng(seed uint64) func() float64 {
	s := seed*0x9E3779B97F4A7C15 | 1
	return func() float64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return float64(s>>11) / (1 << 53)
	}
}

// checkNearOptimal fails unless Fit reaches the objective's minimum on obs
// to within 1e-3 (or 5% where that is more): no worse than the best of
// restarts from random points (each a continuation: the objective smoothed
// by 1e-2, 1e-3, then 1e-4), nor than gonum's L-BFGS (an independent
// implementation) from adaptdl's start. The slack is for local minima:
// the objective is not convex, and in one of 300 small exact samples the
// fit stops at one 4% (8e-4) above the best restart.
func checkNearOptimal(t *testing.T, obs []Observation, what string) {
	t.Helper()
	rep := FitWithReport(obs)
	var pr problem
	pr.load(obs)
	if len(pr.free) == 0 {
		return
	}
	exact := func(x []float64) float64 {
		v := pr.params(x)
		f, _, _ := pr.objective(v, nil)
		return f
	}
	best, from := math.Inf(1), ""
	next := rng(uint64(len(obs)))
	for k := range 8 {
		x := pr.start()
		for j, i := range pr.free {
			if i == iGamma {
				x[j] = next() * math.Pi / 2
			} else {
				x[j] = math.Sqrt(math.Log(math.Pow(10, -7+7*next()) / fitLower))
			}
		}
		for _, eps := range []float64{1e-2, 1e-3, 1e-4} {
			pr.eps = eps
			if y, _ := pr.minimize(x); y != nil {
				x = y
			}
		}
		if f := exact(x); f < best {
			best, from = f, fmt.Sprintf("restart %d", k)
		}
	}
	pr.eps = 1e-4
	prob := optimize.Problem{
		Func: func(x []float64) float64 { return pr.eval(x, nil) },
		Grad: func(g, x []float64) { pr.eval(x, g) },
	}
	if res, _ := optimize.Minimize(prob, pr.start(), nil, &optimize.LBFGS{}); res != nil && finite(res.X) {
		if f := exact(res.X); f < best {
			best, from = f, "gonum L-BFGS"
		}
	}
	if rep.Objective > best+max(1e-3, 0.05*best) {
		t.Errorf("%s: %d observations: objective %.6f at the fit, %.6f by %s\n%+v",
			what, len(obs), rep.Objective, best, from, obs)
	}
}

// Early in a job's life the fit sees few configurations, often fewer than
// the parameters, measured without noise in these tests: the regime where
// the RMSE terms reach zero and a quasi-Newton method can stall on their
// kink (see the smoothing note in fit.go).
func TestFitSmallExactSamplesOptimal(t *testing.T) {
	pool := append(append([]config(nil), trainConfigs...), heldOutConfigs...)
	next := rng(3)
	samples := 200 // unsmoothed, 3 of these 200 fail
	if testing.Short() {
		samples = 40
	}
	for k := range samples {
		v := truth.vec()
		for i := range nParams {
			if i == iGamma {
				v[i] = 1 + 9*next()
			} else {
				v[i] *= math.Pow(10, 2*next()-1)
			}
		}
		p := paramsOf(v)
		obs := make([]Observation, 2+k%6)
		for j := range obs {
			obs[j] = observe(p, pool[int(next()*float64(len(pool)))], 0)
		}
		checkNearOptimal(t, obs, fmt.Sprintf("sample %d", k))
	}
}
