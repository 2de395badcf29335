package solver_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/solver/solvertest"
)

const tol = 1e-7

func near(a, b float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

type want struct {
	status solver.Status
	obj    float64
	x      []float64 // nil: not checked (several optima)
}

// The optima below were worked out by hand (vertex or integer-point
// enumeration); the comment on each case gives the working.
func TestKnownOptima(t *testing.T) {
	solvertest.Require(t)
	inf := math.Inf(1)
	cases := []struct {
		name  string
		build func(m *solver.Model)
		want  want
	}{
		{
			// Vertices (0,0)=0 (3,0)=9 (3,1)=11 (0,2)=4: x+y<=4 and x+3y<=6
			// meet at (3,1), which x<=3 also touches.
			name: "lp max",
			build: func(m *solver.Model) {
				x, y := m.AddVar(0, 3, "x"), m.AddVar(0, inf, "y")
				m.Le([]solver.Term{{x, 1}, {y, 1}}, 4, "")
				m.Le([]solver.Term{{x, 1}, {y, 3}}, 6, "")
				m.SetObjective(solver.Maximize, []solver.Term{{x, 3}, {y, 2}})
			},
			want: want{solver.Optimal, 11, []float64{3, 1}},
		},
		{
			// Vertices of x+y>=4, x+3y>=6 in the positive quadrant:
			// (0,4)=12, (3,1)=9, (6,0)=12.
			name: "lp min covering",
			build: func(m *solver.Model) {
				x, y := m.AddVar(0, inf, "x"), m.AddVar(0, inf, "y")
				m.Ge([]solver.Term{{x, 1}, {y, 1}}, 4, "")
				m.Ge([]solver.Term{{x, 1}, {y, 3}}, 6, "")
				m.SetObjective(solver.Minimize, []solver.Term{{x, 2}, {y, 3}})
			},
			want: want{solver.Optimal, 9, []float64{3, 1}},
		},
		{
			// Free z = x - y with x + y = 2, 0 <= x, y <= 2: min z at x=0.
			name: "free variable and equality",
			build: func(m *solver.Model) {
				x, y := m.AddVar(0, 2, "x"), m.AddVar(0, 2, "y")
				z := m.AddVar(math.Inf(-1), inf, "z")
				m.Eq([]solver.Term{{x, 1}, {y, 1}}, 2, "")
				m.Eq([]solver.Term{{z, 1}, {x, -1}, {y, 1}}, 0, "")
				m.SetObjective(solver.Minimize, []solver.Term{{z, 1}})
			},
			want: want{solver.Optimal, -2, []float64{0, 2, -2}},
		},
		{
			// Terms on the same variable add up: 2x + x - x = 2x <= 6.
			name: "repeated terms are summed",
			build: func(m *solver.Model) {
				x := m.AddVar(0, inf, "x")
				m.Le([]solver.Term{{x, 2}, {x, 1}, {x, -1}}, 6, "")
				m.SetObjective(solver.Maximize, []solver.Term{{x, 1}, {x, 1}})
			},
			want: want{solver.Optimal, 6, []float64{3}},
		},
		{
			name: "lp infeasible",
			build: func(m *solver.Model) {
				x := m.AddVar(0, 1, "x")
				m.Ge([]solver.Term{{x, 1}}, 2, "")
			},
			want: want{status: solver.Infeasible},
		},
		{
			name: "lp unbounded",
			build: func(m *solver.Model) {
				x, y := m.AddVar(0, inf, "x"), m.AddVar(0, inf, "y")
				m.Le([]solver.Term{{x, 1}, {y, -1}}, 1, "")
				m.SetObjective(solver.Maximize, []solver.Term{{x, 1}})
			},
			want: want{status: solver.Unbounded},
		},
		{
			// LP relaxation optimum (3, 1.5) = 21; integer points on the
			// boundary: (4,0)=20, (3,1)=19, (2,2)=18, (0,3)=12.
			name: "milp",
			build: func(m *solver.Model) {
				x, y := m.AddIntVar(0, inf, "x"), m.AddIntVar(0, inf, "y")
				m.Le([]solver.Term{{x, 6}, {y, 4}}, 24, "")
				m.Le([]solver.Term{{x, 1}, {y, 2}}, 6, "")
				m.SetObjective(solver.Maximize, []solver.Term{{x, 5}, {y, 4}})
			},
			want: want{solver.Optimal, 20, []float64{4, 0}},
		},
		{
			// Values 10 13 7 8, weights 3 4 2 3, capacity 7: {0,1} weighs 7
			// for 23; the next best are {1,3} (21) and {1,2} (20).
			name: "knapsack",
			build: func(m *solver.Model) {
				vals, ws := []float64{10, 13, 7, 8}, []float64{3, 4, 2, 3}
				var obj, cap []solver.Term
				for i := range vals {
					v := m.AddBinary("")
					obj = append(obj, solver.Term{Var: v, Coef: vals[i]})
					cap = append(cap, solver.Term{Var: v, Coef: ws[i]})
				}
				m.Le(cap, 7, "capacity")
				m.SetObjective(solver.Maximize, obj)
			},
			want: want{solver.Optimal, 23, []float64{1, 1, 0, 0}},
		},
		{
			// Mixed: y integer in [0, 10], x continuous in [0, 1.2],
			// x + y <= 3.5, max x + 2y: y = 3, x = 0.5 gives 6.5; y = 2,
			// x = 1.2 gives 5.2; y = 4 breaks the row.
			name: "mixed integer",
			build: func(m *solver.Model) {
				x, y := m.AddVar(0, 1.2, "x"), m.AddIntVar(0, 10, "y")
				m.Le([]solver.Term{{x, 1}, {y, 1}}, 3.5, "")
				m.SetObjective(solver.Maximize, []solver.Term{{x, 1}, {y, 2}})
			},
			want: want{solver.Optimal, 6.5, []float64{0.5, 3}},
		},
		{
			name: "milp infeasible",
			build: func(m *solver.Model) {
				x := m.AddIntVar(0, 5, "x")
				m.Eq([]solver.Term{{x, 2}}, 1, "")
			},
			want: want{status: solver.Infeasible},
		},
		{
			name: "integer bounds admit no integer",
			build: func(m *solver.Model) {
				m.AddIntVar(0.2, 0.8, "x")
			},
			want: want{status: solver.Infeasible},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, presolve := range []bool{false, true} {
				m := solver.New()
				c.build(m)
				sol, err := m.Solve(solver.Options{Presolve: presolve})
				if err != nil {
					t.Fatalf("presolve=%v: %v", presolve, err)
				}
				if sol.Status != c.want.status {
					t.Fatalf("presolve=%v: status %v, want %v", presolve, sol.Status, c.want.status)
				}
				if c.want.status != solver.Optimal {
					continue
				}
				if !near(sol.Objective, c.want.obj) {
					t.Errorf("presolve=%v: objective %v, want %v", presolve, sol.Objective, c.want.obj)
				}
				for i, w := range c.want.x {
					if !near(sol.Values[i], w) {
						t.Errorf("presolve=%v: x%d = %v, want %v", presolve, i, sol.Values[i], w)
					}
				}
			}
		})
	}
}

func TestBadModels(t *testing.T) {
	cases := []struct {
		name  string
		build func(m *solver.Model)
		want  string
	}{
		{"inverted bounds", func(m *solver.Model) { m.AddVar(2, 1, "speed") }, "variable speed: bounds [2, 1]"},
		{"nan bound", func(m *solver.Model) { m.AddVar(math.NaN(), 1, "") }, "variable x0"},
		{"constraint bounds", func(m *solver.Model) {
			x := m.AddVar(0, 1, "")
			m.AddConstraint([]solver.Term{{x, 1}}, 3, 2, "cap")
		}, "constraint cap: bounds [3, 2]"},
		{"unknown variable", func(m *solver.Model) {
			m.AddVar(0, 1, "")
			m.Le([]solver.Term{{7, 1}}, 1, "row")
		}, "constraint row: variable 7 does not exist"},
		{"infinite coefficient", func(m *solver.Model) {
			x := m.AddVar(0, 1, "x")
			m.SetObjective(solver.Maximize, []solver.Term{{x, math.Inf(1)}})
		}, "objective: coefficient of x is +Inf"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := solver.New()
			c.build(m)
			_, err := m.Solve(solver.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if errors.Is(err, solver.ErrNoGLPK) {
				t.Fatalf("a bad model must be reported before loading GLPK: %v", err)
			}
		})
	}
	if _, err := solver.New().Solve(solver.Options{MIPGap: -1}); err == nil {
		t.Error("a negative MIP gap is accepted")
	}
}

func TestEmptyModel(t *testing.T) {
	solvertest.Require(t)
	m := solver.New()
	sol, err := m.Solve(solver.Options{})
	if err != nil || sol.Status != solver.Optimal || sol.Objective != 0 {
		t.Fatalf("empty model: %+v, %v", sol, err)
	}
	m.AddConstraint(nil, 1, 2, "")
	sol, err = m.Solve(solver.Options{})
	if err != nil || sol.Status != solver.Infeasible {
		t.Fatalf("empty row that needs 1 <= 0 <= 2: %+v, %v", sol, err)
	}
}

// TestAgreesWithGonum compares GLPK with gonum's dense simplex, an
// independent implementation, on random bounded feasible LPs:
// max c.x subject to A x <= b, 0 <= x <= u, with b >= 0 (x = 0 is feasible).
func TestAgreesWithGonum(t *testing.T) {
	solvertest.Require(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		n, rows := 2+rng.IntN(6), 1+rng.IntN(6)
		c := make([]float64, n)
		u := make([]float64, n)
		for j := range n {
			c[j] = math.Round(rng.Float64()*20-5) / 2
			u[j] = float64(1 + rng.IntN(9))
		}
		A := make([][]float64, rows)
		b := make([]float64, rows)
		for i := range rows {
			A[i] = make([]float64, n)
			for j := range n {
				A[i][j] = float64(rng.IntN(7) - 2)
			}
			b[i] = float64(rng.IntN(12))
		}
		m := solver.New()
		vars := make([]solver.Var, n)
		var obj []solver.Term
		for j := range n {
			vars[j] = m.AddVar(0, u[j], "")
			obj = append(obj, solver.Term{Var: vars[j], Coef: c[j]})
		}
		for i := range rows {
			var row []solver.Term
			for j := range n {
				row = append(row, solver.Term{Var: vars[j], Coef: A[i][j]})
			}
			m.Le(row, b[i], "")
		}
		m.SetObjective(solver.Maximize, obj)
		sol, err := m.Solve(solver.Options{})
		if err != nil || sol.Status != solver.Optimal {
			t.Fatalf("trial %d: %+v %v", trial, sol, err)
		}
		// gonum (x free): min -c.x, G x <= h with G = [A; I; -I],
		// h = [b; u; 0].
		G := mat.NewDense(rows+2*n, n, nil)
		h := make([]float64, rows+2*n)
		for i := range rows {
			G.SetRow(i, A[i])
			h[i] = b[i]
		}
		for j := range n {
			G.Set(rows+j, j, 1)
			h[rows+j] = u[j]
			G.Set(rows+n+j, j, -1)
		}
		neg := make([]float64, n)
		for j := range n {
			neg[j] = -c[j]
		}
		cs, As, bs := lp.Convert(neg, G, h, nil, nil)
		opt, _, err := lp.Simplex(cs, As, bs, 1e-10, nil)
		if err != nil {
			t.Fatalf("trial %d: gonum: %v", trial, err)
		}
		if !near(sol.Objective, -opt) {
			t.Errorf("trial %d: GLPK %v, gonum %v", trial, sol.Objective, -opt)
		}
		// The solution GLPK returns must satisfy the constraints.
		for i := range rows {
			s := 0.0
			for j := range n {
				s += A[i][j] * sol.Values[j]
			}
			if s > b[i]+1e-7 {
				t.Errorf("trial %d: row %d: %v > %v", trial, i, s, b[i])
			}
		}
	}
}

func TestVersion(t *testing.T) {
	solvertest.Require(t)
	v, err := solver.Version()
	if err != nil || v == "" {
		t.Fatalf("version %q, %v", v, err)
	}
	t.Logf("GLPK %s", v)
}

// TestMissingGLPK runs this test binary again with TIDE_GLPK_LIB naming a
// library that does not exist: Solve must fail with ErrNoGLPK, whose message
// says what to install, and building a model must still work.
func TestMissingGLPK(t *testing.T) {
	if os.Getenv("TIDE_SOLVER_CHILD") == "1" {
		m := solver.New()
		x := m.AddVar(0, 1, "x")
		m.SetObjective(solver.Maximize, []solver.Term{{x, 1}})
		_, err := m.Solve(solver.Options{})
		if !errors.Is(err, solver.ErrNoGLPK) || !strings.Contains(err.Error(), "apt-get install libglpk40") {
			t.Fatalf("Solve without GLPK: %v", err)
		}
		if solver.Available() == nil {
			t.Fatal("Available says yes without GLPK")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingGLPK$", "-test.v")
	cmd.Env = append(os.Environ(), "TIDE_SOLVER_CHILD=1", "TIDE_GLPK_LIB=/nonexistent/libglpk.so.40")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
