package solver_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/solver/solvertest"
)

// subsetSum is a knapsack whose values equal its weights: pick items of
// even weight to get as close as possible to an odd capacity from below.
// The LP relaxation always reaches the capacity and no integer point can
// (every weight is even), so branch-and-bound must close the gap by
// enumeration: a small model with a large search tree, while rounding finds
// integer solutions at once.
func subsetSum(n int, seed uint64) (*solver.Model, []solver.Var, []float64, float64) {
	r := rand.New(rand.NewPCG(seed, 0x5e7))
	m := solver.New()
	var xs []solver.Var
	var w []float64
	var terms []solver.Term
	total := 0.0
	for range n {
		x := m.AddBinary("")
		wi := float64(2 * (50000 + r.IntN(50000)))
		xs, w = append(xs, x), append(w, wi)
		terms = append(terms, solver.Term{Var: x, Coef: wi})
		total += wi
	}
	capacity := math.Floor(total/2) + 1
	if int(capacity)%2 == 0 {
		capacity++
	}
	m.Le(terms, capacity, "capacity")
	m.SetObjective(solver.Maximize, terms)
	return m, xs, w, capacity
}

// TestNodeLimit: a subset-sum knapsack stopped after a few nodes returns a
// feasible integer solution marked NodeLimited, worse than the optimum the
// unlimited solve proves (so the limit did stop it), the same on every run;
// a limit the search never reaches changes nothing.
func TestNodeLimit(t *testing.T) {
	solvertest.Require(t)
	m, xs, w, capacity := subsetSum(16, 1)
	full, err := m.Solve(solver.Options{})
	if err != nil || full.Status != solver.Optimal || full.NodeLimited {
		t.Fatalf("unlimited: %+v, %v; want optimal", full, err)
	}
	var first *solver.Solution
	for run := range 2 {
		lim, err := m.Solve(solver.Options{NodeLimit: 3})
		if err != nil || lim.Status != solver.Feasible || !lim.NodeLimited {
			t.Fatalf("run %d, limit 3: %+v, %v; want feasible and NodeLimited", run, lim, err)
		}
		sum := 0.0
		for i, x := range xs {
			v := lim.Value(x)
			if v != 0 && v != 1 {
				t.Fatalf("run %d: x%d = %v, want 0 or 1", run, i, v)
			}
			sum += v * w[i]
		}
		if sum > capacity || !near(sum, lim.Objective) {
			t.Fatalf("run %d: weight %v (capacity %v), objective %v: not the incumbent's", run, sum, capacity, lim.Objective)
		}
		if lim.Objective >= full.Objective {
			t.Fatalf("run %d: limited objective %v, optimum %v: the limit did not stop the search", run, lim.Objective, full.Objective)
		}
		if first == nil {
			first = lim
		} else if !slices.Equal(first.Values, lim.Values) || first.Objective != lim.Objective {
			t.Fatalf("two runs with the same limit differ: %v and %v", first.Values, lim.Values)
		}
	}
	big, err := m.Solve(solver.Options{NodeLimit: 1 << 30})
	if err != nil || big.Status != solver.Optimal || big.NodeLimited || big.Objective != full.Objective {
		t.Fatalf("limit never reached: %+v, %v; want the unlimited optimum %v", big, err, full.Objective)
	}
}

// TestNodeLimitNoIncumbent: 2 x (sum of binaries) = odd has no integer
// solution while its LP relaxation has many; stopped after a few nodes, the
// solve can have found none and must say so with ErrNodeLimit. Unlimited,
// it proves infeasibility.
func TestNodeLimitNoIncumbent(t *testing.T) {
	solvertest.Require(t)
	m := solver.New()
	var terms []solver.Term
	for range 12 {
		terms = append(terms, solver.Term{Var: m.AddBinary(""), Coef: 2})
	}
	m.Eq(terms, 13, "odd")
	m.SetObjective(solver.Maximize, terms[:1])
	sol, err := m.Solve(solver.Options{NodeLimit: 3})
	if !errors.Is(err, solver.ErrNodeLimit) || !sol.NodeLimited {
		t.Fatalf("limit 3: %+v, %v; want ErrNodeLimit", sol, err)
	}
	if sol, err := m.Solve(solver.Options{}); err != nil || sol.Status != solver.Infeasible {
		t.Fatalf("unlimited: %+v, %v; want infeasible", sol, err)
	}
	if _, err := m.Solve(solver.Options{NodeLimit: -1}); err == nil {
		t.Fatal("NodeLimit -1 accepted")
	}
}
