package gavel

import (
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/solver"
)

// gavelLPPolicies registers the policies this file defines; Policies calls it.
func gavelLPPolicies(register func(contract.Info)) {
	reg := func(name, summary string, a gavelAllocator) {
		register(contract.Info{
			Name:    name,
			Summary: summary,
			Knobs: gavelKnobs + "; space_sharing=false: also pack pairs of jobs on the same GPUs where the throughput tables measured them (Gavel's *_packing policies; the simulator, tide serve and tide kube with --pair-throughputs); " +
				"classes=0: solve the LP over classes of jobs (same GPUs, throughputs within this relative tolerance, e.g. 0.05; " +
				"for makespan and ftf also work left, for ftf age) sharing one allocation, as Gavel's LPs over job types do, " +
				"for large clusters; 0: one allocation per job (docs/scale.md)",
			NeedsSolver: true,
			Defaults:    DefaultLPKnobs,
			Build: contract.Typed(DefaultLPKnobs, func(_ contract.Context, k LPKnobs) (*Gavel, error) {
				g, err := newGavel(name, a, k.Knobs, true, k.SpaceSharing)
				if err != nil {
					return nil, err
				}
				if !(k.Classes >= 0) || k.Classes > 1 {
					return nil, fmt.Errorf("policy %s: classes=%v: want a relative tolerance in [0, 1]", name, k.Classes)
				}
				if g.Classes = k.Classes; g.Classes > 0 {
					g.name += fmt.Sprintf(":classes=%v", k.Classes)
				}
				return g, nil
			}),
		})
	}
	reg("gavel-las", "Gavel (OSDI'20) max-min fairness (LAS) of throughput normalised by each job's equal share, "+
		"heterogeneity-aware; an LP solved with GLPK, realised in rounds", gavelMaxMin{})
	reg("gavel-makespan", "Gavel minimise makespan: the LP allocation under which all active jobs finish soonest", gavelMakespan{})
	reg("gavel-ftf", "Gavel finish-time fairness: minimise the largest ratio of a job's finish time to its finish time "+
		"on an equal share of the cluster (Themis' rho); bisection over LPs", gavelFTF{})
	reg("gavel-throughput", "Gavel maximise total throughput, each job's counted relative to its best GPU type", gavelMaxThroughput{})
}

// The LP variables: X[m][k] for the (job, type) pairs where the job can run,
// and Y[q][k] for the pairs of jobs that may share GPUs of type k
// (space sharing, gavel_pairs.go).
type gavelLP struct {
	m     *solver.Model
	x     [][]solver.Var // -1 where the job cannot run
	y     [][]solver.Var // by pair in p.pairs; -1 where the pair cannot share
	byJob [][]int        // pairs (indexes in p.pairs) of each job
	p     *gavelProblem
	rows  []*classRow // with classes: each class's merged row (ge, flush)
}

// newGavelLP declares X (and Y) and Gavel's base constraints: each job's
// shares, alone and in pairs, sum to at most 1; each type's GPUs are not
// over-committed (a pair's count once).
func newGavelLP(p *gavelProblem) *gavelLP {
	l := &gavelLP{m: solver.New(), p: p, x: make([][]solver.Var, len(p.jobs)), y: make([][]solver.Var, len(p.pairs)),
		byJob: make([][]int, len(p.jobs))}
	perType := make([][]solver.Term, len(p.types))
	rows := make([][]solver.Term, len(p.jobs))
	var first []int // with classes: the first job of each class
	if p.class != nil {
		first = make([]int, p.classes)
		for c := range first {
			first[c] = -1
		}
	}
	for m := range p.jobs {
		if first != nil {
			if f := first[p.class[m]]; f >= 0 {
				// The class's variables (Model sums its members' GPUs in
				// the type rows); its row of shares is the first job's.
				l.x[m] = l.x[f]
				for k, v := range l.x[m] {
					if v >= 0 {
						perType[k] = append(perType[k], solver.Term{Var: v, Coef: p.gpus[m]})
					}
				}
				continue
			}
			first[p.class[m]] = m
		}
		l.x[m] = make([]solver.Var, len(p.types))
		for k := range p.types {
			l.x[m][k] = -1
			if p.tput[m][k] <= 0 {
				continue
			}
			v := l.m.AddVar(0, 1, "")
			l.x[m][k] = v
			rows[m] = append(rows[m], solver.Term{Var: v, Coef: 1})
			perType[k] = append(perType[k], solver.Term{Var: v, Coef: p.gpus[m]})
		}
	}
	for q, pr := range p.pairs {
		l.y[q] = make([]solver.Var, len(p.types))
		l.byJob[pr.a] = append(l.byJob[pr.a], q)
		l.byJob[pr.b] = append(l.byJob[pr.b], q)
		for k := range p.types {
			l.y[q][k] = -1
			if pr.tput[k][0] <= 0 {
				continue
			}
			v := l.m.AddVar(0, 1, "")
			l.y[q][k] = v
			rows[pr.a] = append(rows[pr.a], solver.Term{Var: v, Coef: 1})
			rows[pr.b] = append(rows[pr.b], solver.Term{Var: v, Coef: 1})
			perType[k] = append(perType[k], solver.Term{Var: v, Coef: p.gpus[pr.a]})
		}
	}
	for m, row := range rows {
		if len(row) > 1 {
			l.m.Le(row, 1, fmt.Sprintf("job %s", p.jobs[m].Job.ID))
		}
	}
	for k, terms := range perType {
		if len(terms) > 0 {
			l.m.Le(terms, p.cap[k], "type "+p.types[k])
		}
	}
	return l
}

// throughput is c times job m's effective throughput: sum_k tput[m][k]
// X[m][k], plus its packed throughput times Y[q][k] for its pairs q.
func (l *gavelLP) throughput(m int, c float64) []solver.Term {
	var t []solver.Term
	for k, v := range l.x[m] {
		if v >= 0 {
			t = append(t, solver.Term{Var: v, Coef: c * l.p.tput[m][k]})
		}
	}
	for _, q := range l.byJob[m] {
		side := 0
		if l.p.pairs[q].b == m {
			side = 1
		}
		for k, v := range l.y[q] {
			if v >= 0 {
				t = append(t, solver.Term{Var: v, Coef: c * l.p.pairs[q].tput[k][side]})
			}
		}
	}
	return t
}

// runnable reports whether job m can run on some type.
func (l *gavelLP) runnable(m int) bool {
	for _, v := range l.x[m] {
		if v >= 0 {
			return true
		}
	}
	return false
}

func (l *gavelLP) solve(maximize []solver.Term) ([][]float64, error) {
	l.flush()
	l.m.SetObjective(solver.Maximize, maximize)
	sol, err := l.m.Solve(solver.Options{})
	if err != nil {
		return nil, err
	}
	if sol.Status != solver.Optimal {
		return nil, fmt.Errorf("gavel LP: %v", sol.Status)
	}
	return l.values(sol), nil
}

// values is X, one row per job, followed by Y, one row per pair.
func (l *gavelLP) values(sol *solver.Solution) [][]float64 {
	x := make([][]float64, 0, len(l.x)+len(l.y))
	for _, vars := range append(slices.Clone(l.x), l.y...) {
		row := make([]float64, len(l.p.types))
		for k, v := range vars {
			if v >= 0 {
				row[k] = sol.Value(v)
			}
		}
		x = append(x, row)
	}
	return x
}

// isolated is each job's throughput on its equal share (equalShares).
func isolated(p *gavelProblem) []float64 {
	eq := equalShares(p)
	out := make([]float64, len(p.jobs))
	for m := range p.jobs {
		for k := range p.types {
			out[m] += p.tput[m][k] * eq[m][k]
		}
	}
	return out
}

// paretoWeight is the weight of the secondary objective (the sum of the
// normalised throughputs) next to the primary one. An LP with a max-min or
// min-max objective leaves the jobs that are not the bottleneck wherever
// the solver's vertex puts them, often on less than they could have; the
// small secondary term makes the solver pick, among the (near-)optimal
// allocations, one that gives the others as much as it can.
func paretoWeight(n int) float64 { return 1e-3 / float64(max(n, 1)) }

// gavelMaxMin: maximise the smallest normalised effective throughput,
// sum_k T[m][k] X[m][k] divided by the job's throughput on its equal share
// of the cluster (Gavel's MaxMinFairnessPolicyWithPerf, which normalises by
// the allocation of its heterogeneity-agnostic max-min policy; see
// equalShares for ours).
type gavelMaxMin struct{}

func (gavelMaxMin) allocate(p *gavelProblem) ([][]float64, error) {
	l := newGavelLP(p)
	iso := isolated(p)
	z := l.m.AddVar(0, math.Inf(1), "z")
	w := paretoWeight(len(p.jobs))
	obj := []solver.Term{{Var: z, Coef: 1}}
	for m := range p.jobs {
		if !l.runnable(m) || iso[m] <= 0 {
			continue
		}
		norm := l.throughput(m, 1/iso[m])
		l.ge(m, append(norm, solver.Term{Var: z, Coef: -1}), 0)
		for _, t := range norm {
			obj = append(obj, solver.Term{Var: t.Var, Coef: w * t.Coef})
		}
	}
	return l.solve(obj)
}

// gavelMakespan: the allocation under which the last active job finishes
// soonest, each at a constant effective throughput. Gavel binary-searches
// the makespan T over feasibility LPs (throughput_m >= remaining_m / T);
// with z = S/T (S a time scale that keeps z near 1) the constraints are
// linear in (X, z) and one LP maximising z gives the optimum.
type gavelMakespan struct{}

func (gavelMakespan) allocate(p *gavelProblem) ([][]float64, error) {
	l := newGavelLP(p)
	scale := 0.0 // longest remaining time alone on the job's best type
	for m := range p.jobs {
		best := 0.0
		for _, r := range p.tput[m] {
			best = math.Max(best, r)
		}
		if best > 0 && p.rem[m] > 0 {
			scale = math.Max(scale, p.rem[m]/best)
		}
	}
	if scale == 0 {
		return equalShares(p), nil
	}
	z := l.m.AddVar(0, math.Inf(1), "z")
	w := paretoWeight(len(p.jobs))
	obj := []solver.Term{{Var: z, Coef: 1}}
	for m := range p.jobs {
		if !l.runnable(m) || p.rem[m] <= 0 {
			continue
		}
		// throughput_m * S / remaining_m >= z: the job finishes by S/z.
		rate := l.throughput(m, scale/p.rem[m])
		l.ge(m, append(rate, solver.Term{Var: z, Coef: -1}), 0)
		for _, t := range rate {
			obj = append(obj, solver.Term{Var: t.Var, Coef: w * t.Coef})
		}
	}
	return l.solve(obj)
}

// gavelFTF: finish-time fairness (Gavel's FinishTimeFairnessPolicyWithPerf,
// Themis' rho): minimise max_m rho_m, with
//
//	rho_m = (age_m + remaining_m / throughput_m(X)) / (age_m + remaining_m / isolated_m)
//
// rho_m <= R is linear in X for a fixed R (throughput_m >= remaining_m /
// (R D_m - age_m), D_m the denominator), so R is found by bisection over
// feasibility LPs (Gavel hands the convex problem to a conic solver);
// the equal-share allocation gives R <= 1.
type gavelFTF struct{}

// ftfTolerance is the relative precision of the bisection on R.
const ftfTolerance = 1e-3

func (gavelFTF) allocate(p *gavelProblem) ([][]float64, error) {
	iso := isolated(p)
	denom := make([]float64, len(p.jobs))
	lo, hi := 0.0, 1.0
	for m := range p.jobs {
		if iso[m] > 0 && p.rem[m] > 0 {
			denom[m] = p.age[m] + p.rem[m]/iso[m]
			lo = math.Max(lo, p.age[m]/denom[m])
		}
	}
	feasible := func(r float64, final bool) ([][]float64, bool, error) {
		l := newGavelLP(p)
		w := paretoWeight(len(p.jobs))
		var obj []solver.Term
		for m := range p.jobs {
			if denom[m] == 0 || !l.runnable(m) {
				continue
			}
			slack := r*denom[m] - p.age[m]
			if slack <= 0 {
				return nil, false, nil
			}
			// Scaled by 1/isolated so every row reads "at least this
			// multiple of the equal share".
			need := p.rem[m] / slack / iso[m]
			rate := l.throughput(m, 1/iso[m])
			l.ge(m, rate, need)
			if final {
				for _, t := range rate {
					obj = append(obj, solver.Term{Var: t.Var, Coef: w * t.Coef})
				}
			}
		}
		l.flush()
		l.m.SetObjective(solver.Maximize, obj)
		sol, err := l.m.Solve(solver.Options{})
		if err != nil {
			return nil, false, err
		}
		if sol.Status != solver.Optimal {
			return nil, false, nil
		}
		return l.values(sol), true, nil
	}
	for hi-lo > ftfTolerance*hi {
		mid := (lo + hi) / 2
		_, ok, err := feasible(mid, false)
		if err != nil {
			return nil, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	x, ok, err := feasible(hi, true)
	if err != nil {
		return nil, err
	}
	if !ok {
		return equalShares(p), nil
	}
	return x, nil
}

// gavelMaxThroughput: maximise the sum of the jobs' throughputs, each
// relative to its throughput on its best type (so jobs of different models
// weigh the same; Gavel's ThroughputSumWithPerf sums raw iterations/s).
type gavelMaxThroughput struct{}

func (gavelMaxThroughput) allocate(p *gavelProblem) ([][]float64, error) {
	l := newGavelLP(p)
	var obj []solver.Term
	for m := range p.jobs {
		best := 0.0
		for _, r := range p.tput[m] {
			best = math.Max(best, r)
		}
		if best > 0 {
			obj = append(obj, l.throughput(m, 1/best)...)
		}
	}
	return l.solve(obj)
}
