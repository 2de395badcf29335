package goodput

import (
	"math"
	"testing"
)

var testSettings = bfgsSettings{
	GradTol: 1e-10, LooseGradTol: 1e-6, FuncTol: 1e-14, Stall: 20,
	MaxIter: 2000, MaxEvals: 10000,
}

// rosenbrock is the extended Rosenbrock function, minimum 0 at (1, ..., 1).
func rosenbrock(x, g []float64) float64 {
	var f float64
	clear(g)
	for i := 0; i+1 < len(x); i++ {
		a, b := 1-x[i], x[i+1]-x[i]*x[i]
		f += a*a + 100*b*b
		g[i] += -2*a - 400*x[i]*b
		g[i+1] += 200 * b
	}
	return f
}

func TestBFGSRosenbrock(t *testing.T) {
	for _, x0 := range [][]float64{
		{-1.2, 1},
		{-1.2, 1, -1.2, 1, -1.2, 1, -1.2},
		{3, -3, 3, -3},
	} {
		start := append([]float64(nil), x0...)
		res := bfgsMinimize(rosenbrock, x0, testSettings)
		if !res.Converged || res.F > 1e-12 {
			t.Errorf("from %v: %+v, want converged to 0", x0, res)
		}
		for i, v := range res.X {
			if math.Abs(v-1) > 1e-5 {
				t.Errorf("from %v: x[%d] = %g, want 1", x0, i, v)
			}
		}
		for i := range x0 {
			if x0[i] != start[i] {
				t.Fatalf("x0 modified: %v, was %v", x0, start)
			}
		}
		t.Logf("from %v: %d evaluations, %d iterations", start, res.Evals, res.Iters)
	}
}

// A badly scaled quadratic: BFGS recovers the curvature and converges in
// a few iterations per dimension.
func TestBFGSScaledQuadratic(t *testing.T) {
	scales := []float64{1e-4, 1e-2, 1, 1e2, 1e4}
	f := func(x, g []float64) float64 {
		var v float64
		for i, s := range scales {
			d := x[i] - float64(i)
			v += s * d * d
			g[i] = 2 * s * d
		}
		return v
	}
	res := bfgsMinimize(f, make([]float64, len(scales)), testSettings)
	for i, v := range res.X {
		if math.Abs(v-float64(i)) > 1e-4 {
			t.Errorf("x[%d] = %g, want %d (%+v)", i, v, i, res)
		}
	}
	if res.Iters > 50 {
		t.Errorf("%d iterations on a 5-dimensional quadratic", res.Iters)
	}
}

// Where the objective is undefined (+Inf, or NaN) the line search steps
// back; the minimiser still finds a minimum next to the wall.
func TestBFGSInfeasibleRegion(t *testing.T) {
	f := func(x, g []float64) float64 {
		if x[0] <= 0 {
			g[0], g[1] = math.NaN(), 0
			return math.NaN()
		}
		// minimum at x0 = 0.01, x1 = 2: -log(x0) + 100 x0 + (x1-2)^2
		g[0] = -1/x[0] + 100
		g[1] = 2 * (x[1] - 2)
		return -math.Log(x[0]) + 100*x[0] + (x[1]-2)*(x[1]-2)
	}
	res := bfgsMinimize(f, []float64{5, 0}, testSettings)
	if !res.Converged || math.Abs(res.X[0]-0.01) > 1e-6 || math.Abs(res.X[1]-2) > 1e-6 {
		t.Errorf("%+v, want converged at (0.01, 2)", res)
	}
	// Undefined at the start: nothing to do, nothing invented.
	res = bfgsMinimize(f, []float64{-1, 0}, testSettings)
	if res.Converged || !math.IsInf(res.F, 1) || res.X[0] != -1 || res.Evals != 1 {
		t.Errorf("from an undefined start: %+v", res)
	}
}

func TestBFGSLimits(t *testing.T) {
	s := testSettings
	s.MaxEvals = 25
	res := bfgsMinimize(rosenbrock, []float64{-1.2, 1}, s)
	if res.Converged || res.Evals > s.MaxEvals+1 {
		t.Errorf("MaxEvals %d: %+v", s.MaxEvals, res)
	}
	if res.F >= 24.2 { // f(-1.2, 1) = 24.2: some progress all the same
		t.Errorf("no progress in %d evaluations: %+v", res.Evals, res)
	}
	s = testSettings
	s.MaxIter = 3
	if res := bfgsMinimize(rosenbrock, []float64{-1.2, 1}, s); res.Converged || res.Iters != 3 {
		t.Errorf("MaxIter 3: %+v", res)
	}
}
