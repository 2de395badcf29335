package goodput

import "math"

// A small dense BFGS minimiser for the fit (at most 7 variables).
//
// It is the textbook method (Nocedal & Wright, Numerical Optimization, 2nd
// ed.: Algorithm 6.1 with the initial scaling of eq. 6.20, and the
// strong-Wolfe line search of Algorithms 3.5 and 3.6), written here rather
// than taken from gonum's optimize.BFGS/LBFGS because a refit must be cheap:
// gonum runs every evaluation through goroutines and channels, which costs
// ~2.5 µs per evaluation against ~0.7 µs for the objective itself on ten
// observations. It allocates only at the start, runs on the caller's
// goroutine and is deterministic. The tests check it against gonum's L-BFGS
// on the same problems.

// bfgsFunc evaluates the objective at x and writes its gradient into g. It
// may return +Inf (and any gradient) where the objective is undefined; the
// line search then steps back.
type bfgsFunc func(x, g []float64) float64

// bfgsSettings are the stopping rules.
type bfgsSettings struct {
	GradTol float64 // stop when max |gradient| < GradTol
	// LooseGradTol: when the line search can make no more progress (the
	// objective is flat to rounding along the search direction), the
	// result still counts as converged if max |gradient| < LooseGradTol.
	LooseGradTol float64
	FuncTol      float64 // a decrease smaller than FuncTol*(1+|f|) is not progress
	Stall        int     // stop after this many iterations without progress
	MaxIter      int     // iterations (line searches)
	MaxEvals     int     // objective evaluations
}

// Line search constants: the strong Wolfe conditions' sufficient-decrease
// and curvature factors (Nocedal & Wright's usual choice for quasi-Newton
// methods), the evaluations allowed per search, and the step's growth
// while bracketing.
const (
	wolfeC1     = 1e-4
	wolfeC2     = 0.9
	searchEvals = 30
	stepGrowth  = 4.0
)

// bfgsResult is the outcome of bfgsMinimize.
type bfgsResult struct {
	X         []float64 // best point found
	F         float64   // objective there
	Evals     int
	Iters     int
	Converged bool // stopped by GradTol, Stall or LooseGradTol, not by a limit
}

// bfgsMinimize minimises f from x0 (which it does not modify).
func bfgsMinimize(f bfgsFunc, x0 []float64, s bfgsSettings) bfgsResult {
	n := len(x0)
	buf := make([]float64, 7*n+n*n)
	x, g := buf[0:n], buf[n:2*n]
	d, xt, gt := buf[2*n:3*n], buf[3*n:4*n], buf[4*n:5*n]
	sv, yv := buf[5*n:6*n], buf[6*n:7*n]
	h := buf[7*n:] // inverse Hessian approximation, row-major
	copy(x, x0)

	res := bfgsResult{X: x}
	eval := func(x, g []float64) float64 {
		res.Evals++
		v := f(x, g)
		if math.IsNaN(v) || !finite(g) {
			return math.Inf(1)
		}
		return v
	}
	fx := eval(x, g)
	res.F = fx
	if math.IsInf(fx, 1) {
		return res
	}

	resetH := func(scale float64) {
		clear(h)
		for i := range n {
			h[i*n+i] = scale
		}
	}
	resetH(1)
	fresh := true // h is a multiple of the identity
	first := true // no update yet: scale h by eq. 6.20 on the first one
	stall, best := 0, fx

	for res.Iters < s.MaxIter && res.Evals < s.MaxEvals {
		if maxAbs(g) < s.GradTol {
			res.Converged = true
			break
		}
		// d = -H g
		for i := range n {
			var v float64
			for j := range n {
				v -= h[i*n+j] * g[j]
			}
			d[i] = v
		}
		dg := dot(d, g)
		if !(dg < 0) {
			// H has lost positive definiteness to rounding: restart.
			resetH(1)
			fresh, first = true, true
			for i := range n {
				d[i] = -g[i]
			}
			dg = dot(d, g)
		}
		step := 1.0
		if fresh {
			step = 1 / math.Sqrt(dot(g, g)) // unit-length first step
		}

		// Strong-Wolfe line search along d.
		ft, ok := bfgsLineSearch(eval, x, fx, dg, d, xt, gt, step, min(searchEvals, s.MaxEvals-res.Evals))
		res.Iters++
		if !ok {
			if maxAbs(g) < s.LooseGradTol {
				// Flat to rounding along d, with a small gradient: done.
				res.Converged = true
				break
			}
			if fresh {
				break // steepest descent failed too: nothing left to try
			}
			resetH(1)
			fresh, first = true, true
			continue
		}
		for i := range n {
			sv[i] = xt[i] - x[i]
			yv[i] = gt[i] - g[i]
		}
		copy(x, xt)
		copy(g, gt)
		fx = ft

		if best-fx > s.FuncTol*(1+math.Abs(fx)) {
			best, stall = fx, 0
		} else if stall++; stall >= s.Stall {
			res.Converged = true
			break
		}

		sy := dot(sv, yv)
		if !(sy > 1e-12*math.Sqrt(dot(sv, sv)*dot(yv, yv))) {
			continue // no usable curvature: keep H
		}
		if first {
			resetH(sy / dot(yv, yv))
			first = false
		}
		fresh = false
		// H <- (I - rho s y')H(I - rho y s') + rho s s', via Hy:
		// H + rho^2 (y'Hy) s s' + rho s s' - rho (Hy s' + s y'H).
		rho := 1 / sy
		hy := gt // reuse: gt is free until the next line search
		for i := range n {
			var v float64
			for j := range n {
				v += h[i*n+j] * yv[j]
			}
			hy[i] = v
		}
		yhy := dot(yv, hy)
		c := rho*rho*yhy + rho
		for i := range n {
			for j := range n {
				h[i*n+j] += c*sv[i]*sv[j] - rho*(hy[i]*sv[j]+sv[i]*hy[j])
			}
		}
	}
	res.F = fx
	return res
}

// bfgsLineSearch finds a step t along d from x satisfying the strong Wolfe
// conditions (Nocedal & Wright, Algorithms 3.5 and 3.6), starting from t0.
// On success the point and its gradient are in xt, gt and it returns the
// value there. On failure it still returns the best point of sufficient
// decrease it saw, if any, as a success: any decrease is progress, and the
// caller skips the Hessian update when the curvature is unusable.
func bfgsLineSearch(eval bfgsFunc, x []float64, f0, dg0 float64, d, xt, gt []float64, t0 float64, maxEvals int) (float64, bool) {
	const c1, c2 = wolfeC1, wolfeC2
	n := len(x)
	at := func(t float64) (float64, float64) {
		for i := range n {
			xt[i] = x[i] + t*d[i]
		}
		f := eval(xt, gt)
		return f, dot(gt, d)
	}
	// The best point of sufficient decrease so far, to fall back on.
	bestT, bestF := 0.0, f0
	note := func(t, f float64) {
		if f < bestF && f <= f0+c1*t*dg0 {
			bestT, bestF = t, f
		}
	}
	fallback := func() (float64, bool) {
		if bestT == 0 {
			return f0, false
		}
		f, _ := at(bestT)
		return f, f < f0
	}

	// zoom narrows [lo, hi], which brackets a strong-Wolfe step: lo has
	// sufficient decrease and the lowest value so far, and the slope at
	// lo points towards hi.
	zoom := func(lo, flo, dlo, hi, fhi, dhi float64, evals int) (float64, bool) {
		for ; evals < maxEvals; evals++ {
			t := interpolate(lo, flo, dlo, hi, fhi, dhi)
			if t == lo || t == hi {
				break // the bracket is below rounding
			}
			f, df := at(t)
			note(t, f)
			if f > f0+c1*t*dg0 || f >= flo {
				hi, fhi, dhi = t, f, df
				continue
			}
			if math.Abs(df) <= -c2*dg0 {
				return f, true
			}
			if df*(hi-lo) >= 0 {
				hi, fhi, dhi = lo, flo, dlo
			}
			lo, flo, dlo = t, f, df
		}
		return fallback()
	}

	prevT, prevF, prevD := 0.0, f0, dg0
	t := t0
	for evals := 0; evals < maxEvals; evals++ {
		f, df := at(t)
		note(t, f)
		if f > f0+c1*t*dg0 || (evals > 0 && f >= prevF) {
			return zoom(prevT, prevF, prevD, t, f, df, evals+1)
		}
		if math.Abs(df) <= -c2*dg0 {
			return f, true
		}
		if df >= 0 {
			return zoom(t, f, df, prevT, prevF, prevD, evals+1)
		}
		prevT, prevF, prevD = t, f, df
		t *= stepGrowth
	}
	return fallback()
}

// interpolate is the minimiser of the cubic through (a, fa, da) and
// (b, fb, db), kept at least a tenth of the interval away from its ends;
// where the cubic is unusable (non-finite values, no minimum) it bisects.
func interpolate(a, fa, da, b, fb, db float64) float64 {
	lo, hi := min(a, b), max(a, b)
	margin := 0.1 * (hi - lo)
	mid := a + (b-a)/2
	if math.IsInf(fb, 0) || math.IsNaN(db) || math.IsInf(db, 0) {
		// Not finite at b: come back a long way.
		return a + (b-a)*0.25
	}
	d1 := da + db - 3*(fa-fb)/(a-b)
	disc := d1*d1 - da*db
	if disc < 0 {
		return mid
	}
	d2 := math.Copysign(math.Sqrt(disc), b-a)
	t := b - (b-a)*(db+d2-d1)/(db-da+2*d2)
	if math.IsNaN(t) || t < lo+margin || t > hi-margin {
		return mid
	}
	return t
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func maxAbs(a []float64) float64 {
	var m float64
	for _, v := range a {
		m = max(m, math.Abs(v))
	}
	return m
}
