// Package bound computes what no schedule can beat on a trace. Deadlines is
// the most deadlines any schedule could meet: an upper bound, from a fluid
// relaxation of the cluster solved as a mixed-integer program (package
// solver, GLPK). A policy's deadlines met, on the same jobs, model and
// capacity, can never be above it; the gap says how much room is left for
// any policy, not that a policy can reach it.
//
// The relaxation. A job j with a deadline (submitted at r_j, due at d_j) is
// met (x_j = 1) or not. A met job does its work inside [r_j, d_j], at most
// one place (pool) at a time, spending there at least the GPU-seconds its
// speed-up allows in the time it has there. So for every window [a, b]
// (a a submission, b a deadline) and every pool p, the GPU-seconds that the
// met jobs submitted at or after a and due by b spend on p are at most the
// GPU-seconds p has in [a, b]. What it leaves out can only raise the bound:
// GPUs are fluid (a job may hold any count from 1 to the pool's limit, and
// change it at no cost), the only cost counted is one start, and no work is
// lost to faults or reclaims.
//
// A job's GPU-seconds for a share f of its work done on pool p in τ
// seconds are at least f·φ(τ/f), where φ(t) is the least GPU-seconds per
// unit of work at t seconds per unit: the lower convex envelope of the
// points (T_g, g·T_g), T_g being its time alone on g packed GPUs. φ is
// piecewise linear and convex, so f·φ(τ/f) is the maximum of lines in
// (f, τ) and the program stays linear. This holds where a job's rate on
// an allocation does not change with its progress (the ElasticFlow and
// Gavel tables); where it does, each pool counts only the least
// GPU-seconds and the least time at any count, a weaker bound that is
// still valid.
//
// Cost. The windows grow with the square of the jobs, and the program is
// solved to a proven optimum: BenchmarkDeadlines takes 0.03 s for 50 jobs,
// 1.8 s for 100 and 12 s for 150; the shipped scenarios (195 jobs) about
// 20 s a point. It is meant for scenario-sized traces, not Philly's.
package bound

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/solver"
)

// Pool is GPUs that jobs may run on: a site.
type Pool struct {
	Name string
	// GPUTypes are its GPU types: a job's time on g GPUs here is its
	// fastest on g GPUs of any of them (which only raises the bound).
	GPUTypes []string
	// PerNode is the GPUs of one node: the shape of a packed allocation
	// (perf.Packed).
	PerNode int
	// GPUs is all the pool's GPUs.
	GPUs int
	// MaxJob is the most GPUs one job may hold here (an edge server's
	// GPUs, where a job does not span servers); 0: GPUs.
	MaxJob int
	// MemGiB is one GPU's memory, GiB: a job whose model needs more
	// (perf.TrainMemGiB) cannot run here. 0: unknown, every job fits.
	MemGiB float64
	// Capacity is the GPUs available to training over time, s; nil: GPUs
	// throughout. It must not be below what the executor really had (the
	// bound is valid only if the pool never had more).
	Capacity forecast.Series
}

// Result is what Deadlines found.
type Result struct {
	// Jobs is the jobs with a deadline.
	Jobs int `json:"jobs"`
	// Alone is how many of them no pool could end in time even with
	// nothing else running.
	Alone int `json:"alone"`
	// Bound is the most of them any schedule could meet.
	Bound int `json:"bound"`
	// Windows is the capacity constraints the program kept (windows times
	// pools where the jobs inside could exceed the pool).
	Windows int `json:"windows"`
	// Exact says every job's rate was constant in its progress, so the
	// window-aware envelope was used for all (else some jobs count only
	// their least GPU-seconds and time).
	Exact bool `json:"exact"`
}

// Deadlines returns the most deadlines any schedule could meet for jobs on
// pools under model m. Jobs without a deadline are ignored (they take no
// GPUs in the relaxation). opt is passed to the solver; a node or time
// limit that stops the search before the optimum is proven makes the
// result an error, since an unproven incumbent is not a bound.
func Deadlines(jobs []*job.Job, m perf.Model, pools []Pool, opt solver.Options) (Result, error) {
	if len(pools) == 0 {
		return Result{}, errors.New("bound: no pools")
	}
	for _, p := range pools {
		if p.GPUs <= 0 || len(p.GPUTypes) == 0 {
			return Result{}, fmt.Errorf("bound: pool %q: want GPUs > 0 and a GPU type", p.Name)
		}
	}
	res := Result{Exact: true}
	var js []*jobVars
	for _, j := range jobs {
		if j.Deadline <= 0 {
			continue
		}
		res.Jobs++
		jv := &jobVars{j: j, window: j.Deadline - j.Submit - m.Costs(j).Start}
		for pi := range pools {
			if c, ok := curveOf(m, j, &pools[pi]); ok && c.fastest <= jv.window {
				c.pool = pi
				jv.on = append(jv.on, c)
				res.Exact = res.Exact && c.exact
			}
		}
		if len(jv.on) == 0 {
			res.Alone++
			continue
		}
		js = append(js, jv)
	}
	if len(js) == 0 {
		return res, nil
	}
	lp := solver.New()
	var obj []solver.Term
	for i, jv := range js {
		jv.x = lp.AddBinary(fmt.Sprintf("x%d", i))
		obj = append(obj, solver.Term{Var: jv.x, Coef: 1})
		sum := []solver.Term{{Var: jv.x, Coef: -1}}
		var time []solver.Term
		for k := range jv.on {
			c := &jv.on[k]
			c.f = lp.AddVar(0, 1, fmt.Sprintf("f%d_%d", i, k))
			c.tau = lp.AddVar(0, math.Inf(1), fmt.Sprintf("t%d_%d", i, k))
			c.gs = lp.AddVar(0, math.Inf(1), fmt.Sprintf("c%d_%d", i, k))
			sum = append(sum, solver.Term{Var: c.f, Coef: 1})
			time = append(time, solver.Term{Var: c.tau, Coef: 1})
			// τ ≥ T_min·f: no faster than its fastest count.
			lp.Ge([]solver.Term{{Var: c.tau, Coef: 1}, {Var: c.f, Coef: -c.fastest}}, 0, "")
			// GPU-seconds above every line of the envelope.
			for _, ln := range c.lines {
				lp.Ge([]solver.Term{{Var: c.gs, Coef: 1}, {Var: c.f, Coef: -ln.a}, {Var: c.tau, Coef: -ln.b}}, 0, "")
			}
		}
		lp.Eq(sum, 0, "")                                                    // its shares add up to x
		lp.Le(append(time, solver.Term{Var: jv.x, Coef: -jv.window}), 0, "") // one place at a time, inside its window
	}
	lp.SetObjective(solver.Maximize, obj)
	// Windows: every submission a and deadline b > a.
	subs, dues := make([]float64, 0, len(js)), make([]float64, 0, len(js))
	for _, jv := range js {
		subs = append(subs, jv.j.Submit)
		dues = append(dues, jv.j.Deadline)
	}
	slices.Sort(subs)
	slices.Sort(dues)
	subs, dues = slices.Compact(subs), slices.Compact(dues)
	bySubmit := slices.Clone(js)
	slices.SortStableFunc(bySubmit, func(a, b *jobVars) int { return cmp.Compare(a.j.Submit, b.j.Submit) })
	terms := make([][]solver.Term, len(pools))
	most := make([]float64, len(pools))
	for _, a := range subs {
		for _, b := range dues {
			if b <= a {
				continue
			}
			for pi := range pools {
				terms[pi], most[pi] = terms[pi][:0], 0
			}
			from, _ := slices.BinarySearchFunc(bySubmit, a, func(jv *jobVars, a float64) int { return cmp.Compare(jv.j.Submit, a) })
			for _, jv := range bySubmit[from:] {
				if jv.j.Deadline > b {
					continue
				}
				for k := range jv.on {
					c := &jv.on[k]
					terms[c.pool] = append(terms[c.pool], solver.Term{Var: c.gs, Coef: 1})
					most[c.pool] += c.most
				}
			}
			for pi := range pools {
				have := gpuSeconds(&pools[pi], a, b)
				if len(terms[pi]) == 0 || most[pi] <= have {
					continue // the jobs inside cannot need more than the pool has
				}
				lp.Le(slices.Clone(terms[pi]), have, "")
				res.Windows++
			}
		}
	}
	sol, err := lp.Solve(opt)
	if err != nil {
		return res, fmt.Errorf("bound: %w", err)
	}
	if sol.Status != solver.Optimal || sol.NodeLimited {
		return res, fmt.Errorf("bound: the solver stopped at %v, not a proven optimum", sol.Status)
	}
	res.Bound = int(math.Round(sol.Objective))
	return res, nil
}

// jobVars is a job's part of the program.
type jobVars struct {
	j      *job.Job
	window float64 // seconds it can run: deadline less submission less its start
	x      solver.Var
	on     []curve // the pools it could end in time on, alone
}

// curve is a job on one pool: its envelope and its variables there.
type curve struct {
	pool    int
	fastest float64 // T_min, s
	most    float64 // GPU-seconds at its fastest count, the most it could need
	lines   []line  // gs ≥ a·f + b·τ
	exact   bool
	f, tau  solver.Var
	gs      solver.Var
}

// line is a·f + b·τ, one piece of f·φ(τ/f).
type line struct{ a, b float64 }

// curveOf is j's curve on pool p; ok is false when j cannot run there.
func curveOf(m perf.Model, j *job.Job, p *Pool) (curve, bool) {
	if need, known := perf.TrainMemGiB[j.Model]; known && p.MemGiB > 0 && need > p.MemGiB {
		return curve{}, false
	}
	most := p.GPUs
	if p.MaxJob > 0 {
		most = min(most, p.MaxJob)
	}
	work := m.Work(j)
	if !(work > 0) {
		return curve{}, false
	}
	type pt struct{ t, c float64 } // time alone, GPU-seconds
	var pts []pt
	exact := true
	for g := 1; g <= most; g++ {
		t := math.Inf(1)
		for _, typ := range p.GPUTypes {
			a := perf.Packed(typ, g, p.PerNode)
			if r, until := m.Rate(j, a, 0); r > 0 && until < work {
				exact = false
			}
			t = math.Min(t, perf.Remaining(m, j, a, 0))
		}
		if t > 0 && !math.IsInf(t, 0) {
			pts = append(pts, pt{t, float64(g) * t})
		}
	}
	if len(pts) == 0 {
		return curve{}, false
	}
	c := curve{fastest: math.Inf(1), exact: exact}
	least := math.Inf(1)
	for _, q := range pts {
		if q.t < c.fastest || (q.t == c.fastest && q.c < c.most) {
			c.fastest, c.most = q.t, q.c
		}
		least = math.Min(least, q.c)
	}
	c.lines = append(c.lines, line{a: least}) // never fewer than the least GPU-seconds
	if !exact {
		return c, true
	}
	// The lower convex envelope from the fastest point to the cheapest:
	// time ascending, GPU-seconds descending.
	slices.SortFunc(pts, func(x, y pt) int {
		if c := cmp.Compare(x.t, y.t); c != 0 {
			return c
		}
		return cmp.Compare(x.c, y.c)
	})
	var hull []pt
	for _, q := range pts {
		if len(hull) > 0 && q.c >= hull[len(hull)-1].c {
			continue // slower and no cheaper: never on the envelope
		}
		for len(hull) >= 2 {
			o, a := hull[len(hull)-2], hull[len(hull)-1]
			// a is above the segment o-q: drop it.
			if (a.c-o.c)*(q.t-o.t) >= (q.c-o.c)*(a.t-o.t) {
				hull = hull[:len(hull)-1]
				continue
			}
			break
		}
		hull = append(hull, q)
	}
	for i := 1; i < len(hull); i++ {
		o, q := hull[i-1], hull[i]
		s := (q.c - o.c) / (q.t - o.t) // < 0
		c.lines = append(c.lines, line{a: o.c - s*o.t, b: s})
	}
	return c, true
}

// gpuSeconds is the GPU-seconds pool p has in [a, b).
func gpuSeconds(p *Pool, a, b float64) float64 {
	if p.Capacity == nil {
		return float64(p.GPUs) * (b - a)
	}
	return p.Capacity.Mean(a, b) * (b - a)
}
