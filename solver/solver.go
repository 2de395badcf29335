// Package solver builds linear programs (LP) and mixed-integer linear
// programs (MILP) and solves them with GLPK, the GNU Linear Programming Kit.
//
// A Model holds variables (bounds, integrality), linear constraints
// (lo <= sum of coef x var <= hi) and a linear objective; Solve hands it to
// GLPK's simplex method (LP) or its branch-and-cut (MILP, when any variable
// is integer) and returns the status and the variables' values.
//
// GLPK is loaded at run time (libglpk.so.40, Debian package libglpk40), so
// programs using this package build and run without it; Solve then fails
// with ErrNoGLPK, whose message says what to install. Available reports
// whether it could be loaded. docs/solver.md explains why GLPK and why it is
// loaded at run time rather than linked with cgo.
//
// A Model is not safe for concurrent modification; Solve may be called from
// any goroutine (solves are serialised inside the package, GLPK keeping
// per-thread state). Solving the same model twice gives the same answer:
// GLPK is deterministic when no time limit is set (a node
// limit keeps it so).
package solver

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Var is a variable of a Model (its index, from 0).
type Var int

// Term is coef x var.
type Term struct {
	Var  Var
	Coef float64
}

// Sense is the direction of the objective.
type Sense int

// Objective senses.
const (
	Minimize Sense = iota
	Maximize
)

// Status is the outcome of a solve.
type Status int

// Statuses. Feasible means a solution satisfying every constraint was found
// but not proven optimal (a MILP stopped by its time limit or gap).
const (
	NotSolved Status = iota
	Optimal
	Feasible
	Infeasible
	Unbounded
)

func (s Status) String() string {
	switch s {
	case Optimal:
		return "optimal"
	case Feasible:
		return "feasible"
	case Infeasible:
		return "infeasible"
	case Unbounded:
		return "unbounded"
	}
	return "not solved"
}

type variable struct {
	lo, hi  float64
	integer bool
	name    string
}

type constraint struct {
	terms  []Term
	lo, hi float64
	name   string
}

// Model is an LP or MILP under construction.
type Model struct {
	vars  []variable
	cons  []constraint
	obj   []float64 // by variable
	sense Sense
	err   error // first construction error, reported by Solve
}

// New returns an empty model that minimises 0.
func New() *Model { return &Model{} }

// NumVars is the number of variables.
func (m *Model) NumVars() int { return len(m.vars) }

// NumConstraints is the number of constraints.
func (m *Model) NumConstraints() int { return len(m.cons) }

func (m *Model) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// AddVar adds a continuous variable with lo <= x <= hi; lo may be -Inf and
// hi +Inf. name is used only in error messages ("" gives x<index>).
func (m *Model) AddVar(lo, hi float64, name string) Var { return m.addVar(lo, hi, false, name) }

// AddIntVar adds an integer variable with lo <= x <= hi.
func (m *Model) AddIntVar(lo, hi float64, name string) Var { return m.addVar(lo, hi, true, name) }

// AddBinary adds a 0/1 variable.
func (m *Model) AddBinary(name string) Var { return m.addVar(0, 1, true, name) }

func (m *Model) addVar(lo, hi float64, integer bool, name string) Var {
	v := Var(len(m.vars))
	if name == "" {
		name = fmt.Sprintf("x%d", v)
	}
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 1) || math.IsInf(hi, -1) || lo > hi {
		m.fail(fmt.Errorf("solver: variable %s: bounds [%v, %v]: want lo <= hi, lo < +Inf, hi > -Inf", name, lo, hi))
	}
	m.vars = append(m.vars, variable{lo: lo, hi: hi, integer: integer, name: name})
	m.obj = append(m.obj, 0)
	return v
}

// AddConstraint adds lo <= sum(terms) <= hi; lo may be -Inf and hi +Inf.
// Terms naming the same variable are summed.
func (m *Model) AddConstraint(terms []Term, lo, hi float64, name string) {
	if name == "" {
		name = fmt.Sprintf("c%d", len(m.cons))
	}
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 1) || math.IsInf(hi, -1) || lo > hi {
		m.fail(fmt.Errorf("solver: constraint %s: bounds [%v, %v]: want lo <= hi, lo < +Inf, hi > -Inf", name, lo, hi))
	}
	merged, err := m.merge(terms, "constraint "+name)
	if err != nil {
		m.fail(err)
	}
	m.cons = append(m.cons, constraint{terms: merged, lo: lo, hi: hi, name: name})
}

// Le adds sum(terms) <= rhs.
func (m *Model) Le(terms []Term, rhs float64, name string) {
	m.AddConstraint(terms, math.Inf(-1), rhs, name)
}

// Ge adds sum(terms) >= rhs.
func (m *Model) Ge(terms []Term, rhs float64, name string) {
	m.AddConstraint(terms, rhs, math.Inf(1), name)
}

// Eq adds sum(terms) == rhs.
func (m *Model) Eq(terms []Term, rhs float64, name string) { m.AddConstraint(terms, rhs, rhs, name) }

// SetObjective sets the objective to sense sum(terms) (replacing any
// earlier one). Terms naming the same variable are summed.
func (m *Model) SetObjective(sense Sense, terms []Term) {
	for i := range m.obj {
		m.obj[i] = 0
	}
	m.sense = sense
	merged, err := m.merge(terms, "objective")
	if err != nil {
		m.fail(err)
		return
	}
	for _, t := range merged {
		m.obj[t.Var] = t.Coef
	}
}

// merge checks terms and sums those naming the same variable, keeping the
// order of first appearance; zero coefficients are dropped.
func (m *Model) merge(terms []Term, where string) ([]Term, error) {
	out := make([]Term, 0, len(terms))
	at := map[Var]int{}
	for _, t := range terms {
		if t.Var < 0 || int(t.Var) >= len(m.vars) {
			return nil, fmt.Errorf("solver: %s: variable %d does not exist (the model has %d)", where, t.Var, len(m.vars))
		}
		if math.IsNaN(t.Coef) || math.IsInf(t.Coef, 0) {
			return nil, fmt.Errorf("solver: %s: coefficient of %s is %v, want a finite number", where, m.vars[t.Var].name, t.Coef)
		}
		if i, ok := at[t.Var]; ok {
			out[i].Coef += t.Coef
			continue
		}
		at[t.Var] = len(out)
		out = append(out, t)
	}
	kept := out[:0]
	for _, t := range out {
		if t.Coef != 0 {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// Options tune a solve. The zero value solves to optimality with GLPK's
// defaults.
type Options struct {
	// TimeLimit stops the search after this long (0: none). A limit makes
	// results depend on the machine's speed: simulations leave it at 0.
	TimeLimit time.Duration
	// MIPGap stops a MILP once the relative gap between the best solution
	// and the best bound is at most this (0: GLPK's default, 0).
	MIPGap float64
	// NodeLimit stops a MILP's branch-and-cut once its search tree has had
	// more than this many nodes (0: none) and returns the best integer
	// solution found by then, Status Feasible with NodeLimited set, or
	// ErrNodeLimit (wrapped) when none was found. Unlike TimeLimit it is a
	// deterministic budget: the same model stops at the same node on every
	// machine. LPs ignore it.
	NodeLimit int
	// Presolve runs GLPK's LP presolver before the simplex method (MILPs
	// always use the MIP presolver).
	Presolve bool
}

// Solution is the outcome of Solve.
type Solution struct {
	Status    Status
	Objective float64   // valid when Status is Optimal or Feasible
	Values    []float64 // by variable; valid when Status is Optimal or Feasible
	MILP      bool      // solved by branch-and-cut (the model had integer variables)
	// NodeLimited says Options.NodeLimit stopped the search: Values are
	// the best integer solution found, not proven optimal.
	NodeLimited bool
}

// Value is v's value in the solution.
func (s *Solution) Value(v Var) float64 { return s.Values[v] }

// ErrNoGLPK is returned (wrapped) by Solve and Available when GLPK cannot be
// loaded.
var ErrNoGLPK = errors.New("GLPK not found: apt-get install libglpk40 (or set TIDE_GLPK_LIB to the path of libglpk.so)")

// ErrNodeLimit is returned (wrapped) by Solve when Options.NodeLimit stopped
// a MILP before it found any integer solution.
var ErrNodeLimit = errors.New("node limit reached with no integer solution")

// IsMILP reports whether the model has integer variables.
func (m *Model) IsMILP() bool {
	for _, v := range m.vars {
		if v.integer {
			return true
		}
	}
	return false
}

// Solve solves the model. A model that is infeasible or unbounded is not an
// error: the Status says so. Errors are bad models (reported when built),
// GLPK missing (ErrNoGLPK) or GLPK failing numerically.
func (m *Model) Solve(opt Options) (*Solution, error) {
	if m.err != nil {
		return nil, m.err
	}
	if math.IsNaN(opt.MIPGap) || opt.MIPGap < 0 || opt.TimeLimit < 0 || opt.NodeLimit < 0 {
		return nil, fmt.Errorf("solver: options: want MIPGap >= 0, TimeLimit >= 0 and NodeLimit >= 0, got %v, %v and %d", opt.MIPGap, opt.TimeLimit, opt.NodeLimit)
	}
	lib, err := load()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	defer func() { solveNanos.Add(int64(time.Since(start))) }()
	return lib.solve(m, opt)
}

// solveNanos is the wall time spent inside Solve, all goroutines together.
var solveNanos atomic.Int64

// SolveTime is the wall time this process has spent solving, summed over
// every Solve call (benchmarks report a policy's solver time apart from its
// own work with it). It only measures: no result depends on it.
func SolveTime() time.Duration { return time.Duration(solveNanos.Load()) }

// Available reports whether GLPK can be loaded (nil) or why not.
func Available() error {
	_, err := load()
	return err
}
