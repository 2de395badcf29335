package goodput

import (
	"math"
)

// Fitting follows adaptdl's fit_perf_params (simulator/goodput.py): the
// parameters minimise
//
//	RMSE(log T_compute, log ComputeTime) + RMSE(log T_step, log StepTime)
//	  + 1e-3*(Gamma-1)^2 + 1e-2*((BetaN/AlphaN)^2 + (BetaR/AlphaR)^2)
//
// from the start AlphaC..BetaR = 0.1, 0.01, 0.1, 0.01, 0.1, 0.01 and
// Gamma = 1.001, within the bounds [1e-8, +Inf) for the six time parameters
// and [1, 10] for Gamma. A parameter the observations cannot determine is
// held fixed (see Fit).
//
// adaptdl minimises it with scipy's bounded L-BFGS-B. Here:
//
// Bounds, by a change of variables: the optimiser works on unconstrained
//
//	w, with time parameter p = 1e-8 * exp(w^2)   (p >= 1e-8 for every w)
//	v, with Gamma = 1 + 9 * sin(v)^2             (Gamma in [1, 10] for every v)
//
// Both maps are smooth, reach their bound (at w = 0, v = 0) and fold back
// beyond it, so a step past a bound lands inside again, and the objective
// is stationary in w or v exactly where the bound is active, as a projected
// gradient would be. In w the time parameters move on a log scale, which
// suits values six orders of magnitude apart (BetaC of a small model is
// ~1e-7 s/sample, AlphaN of a large one ~1 s). A plain log map (p = exp(u)
// or 1e-8 + exp(u)) was tried first and rejected: a long step could throw
// a parameter far below its optimum, where the objective is flat in u and
// the optimiser stalls (on NCF's profile it left BetaC at the bound and the
// objective 0.16 above its minimum); in w the flat region is only the
// bound's own neighbourhood.
//
// Smoothing: an RMSE is a cone, not differentiable, where its residuals
// vanish, and with few observations they do (two batch sizes fit AlphaC
// and BetaC exactly); a quasi-Newton method can stall on that edge
// (unsmoothed, 4 of 300 small exact samples stalled, the worst 0.69 above
// the minimum; one three-observation case 30% above). The optimiser
// therefore minimises each RMSE e as sqrt(e^2 + 1e-4^2), which moves the
// minimum's objective by at most 2e-4 and predictions by ~0.01%.
// FitReport's objective is the exact one.
//
// Optimiser: dense BFGS with a strong-Wolfe line search and the analytic
// gradient (bfgs.go; gonum's L-BFGS was used first, and costs ~2.5x more
// per evaluation in goroutine hand-offs). It stops when the gradient's
// max-norm in (w, v) is below 1e-7, or the objective has not fallen by
// more than 1e-9*(1+|f|) in 20 iterations, or after 500 iterations or 2000
// evaluations. On 180 random samples of 2 to 10 rows of the shipped
// profiles and 150 small synthetic samples, the result was within 2e-4
// (relative; absolute below 0.02) of the best of ten restarts from random
// points; the tests check 1e-3 or 5%, as the objective has the odd local
// minimum. Tiny, underdetermined samples can crawl towards a bound and
// stop at the iteration limit (Converged false; ~1 in 15 of them), still
// within that margin. A refit takes 70-250 evaluations: ~70 µs on 10
// profile rows, ~140 µs on 10 noisy synthetic observations (BenchmarkFit*).
const (
	fitLower     = 1e-8 // lower bound of the six time parameters
	gammaMin     = 1.0
	gammaMax     = 10.0
	fitSmoothing = 1e-4 // eps of the smoothed RMSE
)

// fitSettings are the optimiser's stopping rules (see the note above).
var fitSettings = bfgsSettings{
	GradTol:      1e-7,
	LooseGradTol: 1e-5,
	FuncTol:      1e-9,
	Stall:        20,
	MaxIter:      500,
	MaxEvals:     2000,
}

// fitStart is adaptdl's starting point, in Params field order.
var fitStart = [nParams]float64{0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001}

// Indices of the parameter vector, in Params field order.
const (
	iAlphaC = iota
	iBetaC
	iAlphaN
	iBetaN
	iAlphaR
	iBetaR
	iGamma
	nParams
)

func (p Params) vec() [nParams]float64 {
	return [nParams]float64{p.AlphaC, p.BetaC, p.AlphaN, p.BetaN, p.AlphaR, p.BetaR, p.Gamma}
}

func paramsOf(v [nParams]float64) Params {
	return Params{
		AlphaC: v[iAlphaC], BetaC: v[iBetaC],
		AlphaN: v[iAlphaN], BetaN: v[iBetaN],
		AlphaR: v[iAlphaR], BetaR: v[iBetaR],
		Gamma: v[iGamma],
	}
}

// FitReport is the outcome of FitWithReport.
type FitReport struct {
	Params Params
	// Objective is the objective (unsmoothed) at the optimum found:
	// ComputeRMSLE + StepRMSLE plus the regularisation terms (a constant
	// 0.01 for each link whose AlphaX and BetaX are both held at 1e-8, as
	// in adaptdl), before the multi-node prior (see Fit) raises AlphaN
	// and BetaN. 0 with no usable observation.
	Objective float64
	// ComputeRMSLE and StepRMSLE are the root-mean-square errors of the
	// natural logs of the predicted compute and step times: about the
	// typical relative error of the fit on the observations.
	ComputeRMSLE, StepRMSLE float64
	Used                    int  // observations used (the valid ones, see Fit)
	Free                    int  // parameters fitted (the others were held fixed)
	Evaluations             int  // objective evaluations
	Converged               bool // the optimiser stopped at a minimum, not at a limit (false if nothing was fitted)
}

// Fit returns the Params that best explain the observations, as adaptdl's
// fit_perf_params does (see the objective above). Observations with
// non-positive or non-finite times, or fewer than one node or replica, are
// ignored. What the observations cannot determine is held fixed:
//
//   - only one distinct LocalBsz: AlphaC = mean(ComputeTime)/2, so the rest
//     of the compute time scales with the batch (optimistic about batch
//     scaling);
//   - no multi-node observation: AlphaN = BetaN = 1e-8;
//   - no single-node multi-replica observation: AlphaR = BetaR = 1e-8;
//   - no observation with more than 2 replicas: BetaN = BetaR = 1e-8.
//
// Without a multi-node observation the fit then assumes crossing nodes is
// at least 10% slower than staying on one: AlphaN >= 1.1*AlphaR and
// BetaN >= 1.1*BetaR.
//
// With no usable observation nothing is optimised: the result is the
// starting point with those rules applied. Fit is deterministic, safe for
// concurrent use, and never panics; the result always lies within the
// bounds.
func Fit(obs []Observation) Params { return FitWithReport(obs).Params }

// FitWithReport is Fit, with how well the result explains the observations.
func FitWithReport(obs []Observation) FitReport {
	var pr problem
	pr.load(obs)
	rep := FitReport{Used: pr.n, Free: len(pr.free)}
	v := pr.initial()
	if pr.n > 0 && len(pr.free) > 0 {
		pr.eps = fitSmoothing
		var x []float64
		x, rep.Converged = pr.minimize(pr.start())
		rep.Evaluations = pr.evals
		if x != nil {
			v = pr.params(x)
		}
	}
	if !finite(v[:]) {
		// Unreachable (minimize keeps only points with a finite
		// objective), but a caller must never see a NaN.
		v = pr.initial()
	}
	for i := range nParams {
		if i == iGamma {
			v[i] = min(max(v[i], gammaMin), gammaMax) // rounding
		} else {
			v[i] = max(v[i], fitLower)
		}
	}
	if pr.n > 0 {
		rep.Objective, rep.ComputeRMSLE, rep.StepRMSLE = pr.objective(v, nil)
	}
	if !pr.multiNode {
		v[iAlphaN] = math.Max(v[iAlphaN], 1.1*v[iAlphaR])
		v[iBetaN] = math.Max(v[iBetaN], 1.1*v[iBetaR])
	}
	rep.Params = paramsOf(v)
	return rep
}

// Network link kinds of an observation.
const (
	linkNone = iota // one replica
	linkNode        // spans nodes: AlphaN, BetaN
	linkGPU         // one node, several replicas: AlphaR, BetaR
)

// problem is one fit: the valid observations, preprocessed, and which
// parameters are free.
type problem struct {
	n       int
	bsz     []float64 // LocalBsz
	retro   []float64 // max(replicas-2, 1e-8)
	link    []int8
	logComp []float64 // log ComputeTime
	logStep []float64 // log StepTime

	multiNode bool
	fixed     [nParams]float64 // values of the fixed parameters
	isFixed   [nParams]bool
	free      []int // indices of the free parameters, in order

	evals int     // objective evaluations
	eps   float64 // smoothing of the RMSE terms (see smoothObjective)
}

func finite(xs []float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// validObservation says whether Fit uses o.
func validObservation(o Observation) bool {
	ok := func(t float64) bool { return t > 0 && !math.IsInf(t, 1) }
	return o.Nodes >= 1 && o.Replicas >= 1 && o.LocalBsz >= 0 &&
		ok(o.ComputeTime) && ok(o.StepTime)
}

// load takes the valid observations and decides which parameters are
// fixed, and at what (see Fit).
func (pr *problem) load(obs []Observation) {
	n := 0
	for _, o := range obs {
		if validObservation(o) {
			n++
		}
	}
	pr.n = n
	buf := make([]float64, 4*n)
	pr.bsz, pr.retro, pr.logComp, pr.logStep = buf[:0:n], buf[n:n:2*n], buf[2*n:2*n:3*n], buf[3*n:3*n:4*n]
	pr.link = make([]int8, 0, n)

	var (
		sumComp              float64
		firstBsz             = -1
		oneBsz               = true
		singleNodeMulti, gt2 bool
	)
	for _, o := range obs {
		if !validObservation(o) {
			continue
		}
		switch {
		case firstBsz < 0:
			firstBsz = o.LocalBsz
		case o.LocalBsz != firstBsz:
			oneBsz = false
		}
		sumComp += o.ComputeTime
		link := int8(linkNone)
		switch {
		case o.Nodes > 1:
			link = linkNode
			pr.multiNode = true
		case o.Replicas > 1:
			link = linkGPU
			singleNodeMulti = true
		}
		if o.Replicas > 2 {
			gt2 = true
		}
		pr.bsz = append(pr.bsz, float64(o.LocalBsz))
		pr.retro = append(pr.retro, math.Max(float64(o.Replicas-2), 1e-8))
		pr.link = append(pr.link, link)
		pr.logComp = append(pr.logComp, math.Log(o.ComputeTime))
		pr.logStep = append(pr.logStep, math.Log(o.StepTime))
	}

	fix := func(i int, v float64) { pr.isFixed[i], pr.fixed[i] = true, v }
	if n > 0 && oneBsz {
		// Mean of positive finite values: positive, but it may overflow.
		fix(iAlphaC, math.Min(math.Max(sumComp/float64(n)/2, fitLower), math.MaxFloat64))
	}
	if !pr.multiNode {
		fix(iAlphaN, fitLower)
		fix(iBetaN, fitLower)
	}
	if !singleNodeMulti {
		fix(iAlphaR, fitLower)
		fix(iBetaR, fitLower)
	}
	if !gt2 {
		fix(iBetaN, fitLower)
		fix(iBetaR, fitLower)
	}
	pr.free = pr.free[:0]
	for i := range nParams {
		if !pr.isFixed[i] {
			pr.free = append(pr.free, i)
		}
	}
}

// initial is the starting point: adaptdl's, with the fixed parameters
// at their values.
func (pr *problem) initial() [nParams]float64 {
	v := fitStart
	for i := range nParams {
		if pr.isFixed[i] {
			v[i] = pr.fixed[i]
		}
	}
	return v
}

// start is the starting point in the free variables.
func (pr *problem) start() []float64 {
	v := pr.initial()
	x := make([]float64, len(pr.free))
	for k, i := range pr.free {
		if i == iGamma {
			x[k] = math.Asin(math.Sqrt((v[i] - gammaMin) / (gammaMax - gammaMin)))
		} else {
			x[k] = math.Sqrt(math.Log(v[i] / fitLower))
		}
	}
	return x
}

// params maps free variables x to the full parameter vector.
func (pr *problem) params(x []float64) [nParams]float64 {
	v := pr.initial()
	for k, i := range pr.free {
		if i == iGamma {
			s := math.Sin(x[k])
			v[i] = gammaMin + (gammaMax-gammaMin)*s*s
		} else {
			v[i] = fitLower * math.Exp(x[k]*x[k])
		}
	}
	return v
}

// objective is the fit's objective at parameters v, with its gradient with
// respect to v added into grad when grad is non-nil; it also returns the
// two RMSLE terms.
func (pr *problem) objective(v [nParams]float64, grad *[nParams]float64) (f, e1, e2 float64) {
	return pr.smoothObjective(v, grad, 0)
}

// smoothObjective is objective with each RMSE term e replaced by
// sqrt(e^2 + eps^2), differentiable where e = 0 when eps > 0; it returns
// the unsmoothed RMSEs.
func (pr *problem) smoothObjective(v [nParams]float64, grad *[nParams]float64, eps float64) (f, e1, e2 float64) {
	ac, bc, g := v[iAlphaC], v[iBetaC], v[iGamma]
	var (
		s1, s2 float64          // sums of squared log errors
		g1, g2 [nParams]float64 // gradients of s1/2 and s2/2
	)
	for i := range pr.n {
		b := pr.bsz[i]
		c := ac + bc*b
		var ia, ib int
		var n float64
		switch pr.link[i] {
		case linkNode:
			ia, ib = iAlphaN, iBetaN
		case linkGPU:
			ia, ib = iAlphaR, iBetaR
		default:
			ia = -1
		}
		r := pr.retro[i]
		if ia >= 0 {
			n = v[ia] + v[ib]*r
		} else {
			n = 1e-8 + 1e-8*r
		}
		lc := math.Log(c)
		ln := math.Log(n)
		// log T_step = log(c^g + n^g)/g, computed relative to the larger
		// of c and n so the powers cannot overflow or underflow.
		var wc, wn, ls float64
		if lc >= ln {
			t := math.Exp(g * (ln - lc)) // (n/c)^g in (0, 1]
			ls = lc + math.Log1p(t)/g
			wc, wn = 1/(1+t), t/(1+t)
		} else {
			t := math.Exp(g * (lc - ln))
			ls = ln + math.Log1p(t)/g
			wc, wn = t/(1+t), 1/(1+t)
		}
		d1 := lc - pr.logComp[i]
		d2 := ls - pr.logStep[i]
		s1 += d1 * d1
		s2 += d2 * d2
		if grad == nil {
			continue
		}
		// d log c / d(ac, bc)
		g1[iAlphaC] += d1 / c
		g1[iBetaC] += d1 * b / c
		// d log T_step: wc/c per unit c, wn/n per unit n.
		g2[iAlphaC] += d2 * wc / c
		g2[iBetaC] += d2 * wc * b / c
		if ia >= 0 {
			g2[ia] += d2 * wn / n
			g2[ib] += d2 * wn * r / n
		}
		g2[iGamma] += d2 * (wc*lc + wn*ln - ls) / g
	}
	nf := float64(pr.n)
	e1 = math.Sqrt(s1 / nf)
	e2 = math.Sqrt(s2 / nf)
	m1 := math.Sqrt(s1/nf + eps*eps)
	m2 := math.Sqrt(s2/nf + eps*eps)
	rn := v[iBetaN] / v[iAlphaN]
	rr := v[iBetaR] / v[iAlphaR]
	f = m1 + m2 + 1e-3*(g-1)*(g-1) + 1e-2*(rn*rn+rr*rr)
	if grad == nil {
		return f, e1, e2
	}
	// d sqrt(s/n) = (ds/2) / (n*sqrt(s/n)); at an exact fit (e = 0) the
	// RMSE is not differentiable and its zero subgradient is used.
	if m1 > 0 {
		for i := range grad {
			grad[i] += g1[i] / (nf * m1)
		}
	}
	if m2 > 0 {
		for i := range grad {
			grad[i] += g2[i] / (nf * m2)
		}
	}
	grad[iGamma] += 2e-3 * (g - 1)
	grad[iBetaN] += 2e-2 * rn / v[iAlphaN]
	grad[iAlphaN] -= 2e-2 * rn * rn / v[iAlphaN]
	grad[iBetaR] += 2e-2 * rr / v[iAlphaR]
	grad[iAlphaR] -= 2e-2 * rr * rr / v[iAlphaR]
	return f, e1, e2
}

// eval is the objective in the free variables x, with its gradient into gx
// when gx is non-nil. A non-finite value (only possible far outside any
// sensible range) reads as +Inf with a zero gradient, which a line search
// backs away from.
func (pr *problem) eval(x, gx []float64) float64 {
	v := pr.params(x)
	var g [nParams]float64
	var gp *[nParams]float64
	if gx != nil {
		gp = &g
	}
	f, _, _ := pr.smoothObjective(v, gp, pr.eps)
	bad := math.IsNaN(f) || math.IsInf(f, 0)
	if gx == nil {
		if bad {
			return math.Inf(1)
		}
		return f
	}
	for k, i := range pr.free {
		var d float64 // d v[i] / d x[k]
		if i == iGamma {
			d = (gammaMax - gammaMin) * math.Sin(2*x[k])
		} else {
			d = 2 * x[k] * v[i]
		}
		gx[k] = g[i] * d
		if math.IsNaN(gx[k]) || math.IsInf(gx[k], 0) {
			bad = true
		}
	}
	if bad {
		clear(gx)
		return math.Inf(1)
	}
	return f
}

// minimize runs BFGS from x, returning the best point found (nil if it
// failed to improve on x) and whether it converged.
func (pr *problem) minimize(x []float64) (best []float64, converged bool) {
	f := func(x, g []float64) float64 {
		pr.evals++
		return pr.eval(x, g)
	}
	f0 := pr.eval(x, nil)
	res := bfgsMinimize(f, x, fitSettings)
	if !(res.F <= f0) || !finite(res.X) {
		return nil, false
	}
	return res.X, res.Converged
}
