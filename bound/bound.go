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
// points (T_g, g·T_g), T_g being its time alone on g GPUs of the pool. φ
// is piecewise linear and convex, so f·φ(τ/f) is the maximum of lines in
// (f, τ) and the program stays linear. A job may do part of its work on a
// pool where it could not end in time alone, the rest elsewhere; it is
// out of reach only if it could not end in time with each stretch of its
// work on the pool fastest for it.
//
// T_g is the fastest any policy could run the job on g GPUs, whatever
// count the trace asks (an elastic policy's copy may take any): with a
// perf.Bounder (the Pollux profiles, Gavel's tables) its MaxRate over
// every placement of g GPUs on the pool's nodes (and, with Gavel's tables,
// beside a partner sharing them) and every batch configuration an adaptive
// job's agent may choose, else its rate packed (perf.Packed) with its own
// batch. The envelope holds where a job's rate does not change with its
// progress (the ElasticFlow and Gavel tables). Where it does (the Pollux
// profiles: per epoch), a share f of its work on a pool takes at least the
// time and, apart, the GPU-seconds of the stretches of its work fastest
// (cheapest) there that make up f, each at its best count (convex in f),
// and all its work at least the least time and GPU-seconds with each
// stretch on the pool best for it: a weaker bound, still valid.
//
// Cost. The windows grow with the square of the jobs, and the program is
// solved to a proven optimum, the solver handed only the windows its
// solutions break (few bind). A point of the shipped scenarios (195 jobs)
// takes about 0.4-4 CPU-s (BenchmarkScenarioPoint, edgeflow-faults at MTBF
// 6 h: 0.7 CPU-s; handed every window at once, as before 30 Nov, 36);
// BenchmarkDeadlines 0.05 s for 50 jobs, 0.8 s for 100 and 2.9 s for 150
// (0.07, 5.7 and 34 with every window). It is meant for scenario-sized
// traces, not Philly's.
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
	// PerNode is the most GPUs of one node: the shape of a packed
	// allocation (perf.Packed) and the most GPUs a placement puts on a
	// node (perf.Span).
	PerNode int
	// Nodes is the pool's node count, the most nodes a placement spans
	// (perf.Span); 0: no limit.
	Nodes int
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
	// nothing else running (each stretch of its work on the pool fastest
	// for it); AloneJobs are their IDs, in the order of the jobs.
	Alone     int      `json:"alone"`
	AloneJobs []string `json:"-"`
	// Bound is the most of them any schedule could meet.
	Bound int `json:"bound"`
	// Windows is the capacity constraints the program kept (windows times
	// pools where the jobs inside could exceed the pool); the solver is
	// handed only those its solutions break.
	Windows int `json:"windows"`
	// Exact says every job's rate was constant in its progress, so the
	// window-aware envelope was used for all (else some jobs count only
	// their least GPU-seconds and time for each share of their work).
	Exact bool `json:"exact"`
}

// Deadlines returns the most deadlines any schedule could meet for jobs on
// pools under model m. Jobs without a deadline are ignored (they take no
// GPUs in the relaxation). opt is passed to each of the solver's solves
// (the program is solved a few times, each with more of its windows); a
// node or time limit that stops the search before the optimum is proven
// makes the result an error, since an unproven incumbent is not a bound.
func Deadlines(jobs []*job.Job, m perf.Model, pools []Pool, opt solver.Options) (Result, error) {
	return deadlines(jobs, m, pools, opt, windowsPerRound)
}

// deadlines is Deadlines adding at most perRound windows after a solve
// (solveWindows); 0: all of them before the first.
func deadlines(jobs []*job.Job, m perf.Model, pools []Pool, opt solver.Options, perRound int) (Result, error) {
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
		var exact bool
		jv.on, jv.least, jv.leastGS, exact = curvesOf(m, j, pools, jv.window)
		res.Exact = res.Exact && exact
		if !(jv.least <= jv.window) {
			res.Alone++
			res.AloneJobs = append(res.AloneJobs, j.ID)
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
		var time, gs []solver.Term
		for k := range jv.on {
			c := &jv.on[k]
			c.f = lp.AddVar(0, c.share, fmt.Sprintf("f%d_%d", i, k))
			c.tau = lp.AddVar(0, math.Inf(1), fmt.Sprintf("t%d_%d", i, k))
			c.gs = lp.AddVar(0, math.Inf(1), fmt.Sprintf("c%d_%d", i, k))
			sum = append(sum, solver.Term{Var: c.f, Coef: 1})
			time = append(time, solver.Term{Var: c.tau, Coef: 1})
			gs = append(gs, solver.Term{Var: c.gs, Coef: 1})
			// τ above every line of its least time for the share f.
			for _, ln := range c.time {
				lp.Ge([]solver.Term{{Var: c.tau, Coef: 1}, {Var: c.f, Coef: -ln.a}}, ln.c, "")
			}
			// GPU-seconds above every line of the envelope.
			for _, ln := range c.lines {
				lp.Ge([]solver.Term{{Var: c.gs, Coef: 1}, {Var: c.f, Coef: -ln.a}, {Var: c.tau, Coef: -ln.b}}, ln.c, "")
			}
		}
		lp.Eq(sum, 0, "")                                                                  // its shares add up to x
		lp.Le(append(slices.Clone(time), solver.Term{Var: jv.x, Coef: -jv.window}), 0, "") // one place at a time, inside its window
		if len(jv.on) > 1 {
			// Wherever each stretch of its work is done, no faster and no
			// cheaper than on the best pool for it.
			lp.Ge(append(time, solver.Term{Var: jv.x, Coef: -jv.least}), 0, "")
			lp.Ge(append(gs, solver.Term{Var: jv.x, Coef: -jv.leastGS}), 0, "")
		}
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
	var windows []window
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
					continue // the jobs inside need no more than the pool has
				}
				windows = append(windows, window{slices.Clone(terms[pi]), have})
			}
		}
	}
	res.Windows = len(windows)
	sol, err := solveWindows(lp, windows, opt, perRound)
	if err != nil {
		return res, err
	}
	res.Bound = int(math.Round(sol.Objective))
	return res, nil
}

// window is a capacity constraint: the GPU-seconds of the jobs inside a
// window on a pool, at most what the pool has in it.
type window struct {
	terms []solver.Term
	have  float64
}

// windowsPerRound is the most windows Deadlines adds after a solve.
const windowsPerRound = 100

// solveWindows solves lp with the windows' constraints, handing the solver
// only those its solutions break: lp alone, then again with the perRound
// windows the last solution breaks most (by the share of the pool's
// GPU-seconds it asks beyond them) added, until it breaks none; perRound
// 0 hands it all of them at once. A program with only some of the windows
// can meet no fewer deadlines than with all of them, so an optimum that
// breaks none of the others is the whole program's optimum, with the same
// objective. Few windows bind, and
// the solver's time grows with the constraints it holds (GLPK's simplex on
// rows of up to hundreds of jobs each): edgeflow-faults at MTBF 6 h keeps
// 29,175 windows and hands the solver 300, in four solves, 0.7 CPU-s
// against 36 with them all. A window counts as broken beyond a relative
// 1e-9, finer than the solver's own tolerance. opt applies to each solve.
func solveWindows(lp *solver.Model, windows []window, opt solver.Options, perRound int) (*solver.Solution, error) {
	in := make([]bool, len(windows))
	if perRound <= 0 {
		for i, w := range windows {
			lp.Le(w.terms, w.have, "")
			in[i] = true
		}
	}
	type broken struct {
		i    int
		over float64 // beyond what the pool has, as a share of it
	}
	var bs []broken
	for {
		sol, err := lp.Solve(opt)
		if err != nil {
			return nil, fmt.Errorf("bound: %w", err)
		}
		if sol.Status != solver.Optimal || sol.NodeLimited {
			return nil, fmt.Errorf("bound: the solver stopped at %v, not a proven optimum", sol.Status)
		}
		bs = bs[:0]
		for i, w := range windows {
			if in[i] {
				continue
			}
			sum := 0.0
			for _, t := range w.terms {
				sum += t.Coef * sol.Values[t.Var]
			}
			if sum > w.have+1e-9*math.Max(1, w.have) {
				bs = append(bs, broken{i, (sum - w.have) / math.Max(1, w.have)})
			}
		}
		if len(bs) == 0 {
			return sol, nil
		}
		slices.SortStableFunc(bs, func(a, b broken) int { return cmp.Compare(b.over, a.over) })
		for _, b := range bs[:min(len(bs), perRound)] {
			lp.Le(windows[b.i].terms, windows[b.i].have, "")
			in[b.i] = true
		}
	}
}

// jobVars is a job's part of the program.
type jobVars struct {
	j      *job.Job
	window float64 // seconds it can run: deadline less submission less its start
	// least and leastGS are its least time and GPU-seconds over all pools,
	// each stretch of its progress on the best pool for it.
	least, leastGS float64
	x              solver.Var
	on             []curve // the pools it can run on
}

// curve is a job on one pool: the least time and GPU-seconds it needs
// there for a share of its work, and its variables there.
type curve struct {
	pool  int
	share float64 // the most of its work it can do here (< 1 where some stretch cannot run here)
	// most is the most GPU-seconds it could need here: the least
	// GPU-seconds at its fastest (the window constraints read it only to
	// leave out those that cannot bind).
	most   float64
	time   []line // τ ≥ a·f + c
	lines  []line // gs ≥ a·f + b·τ + c
	f, tau solver.Var
	gs     solver.Var
}

// line is a·f + b·τ + c, one piece of a convex bound.
type line struct{ a, b, c float64 }

// stretch is a stretch of a job's progress over which its rate on every
// count of every pool holds: its work and, per pool and count g, the most
// progress per second on g GPUs (0: none).
type stretch struct {
	work  float64
	rates [][]float64 // [pool][g-1]
}

// curvesOf is j's curve on each pool it can run on in window seconds
// (some of its work, if not all: it may do the rest elsewhere), its least
// time and GPU-seconds with each stretch of its progress on the best pool
// for it (+Inf when some stretch can run nowhere), and whether its rates
// are constant in its progress.
func curvesOf(m perf.Model, j *job.Job, pools []Pool, window float64) (on []curve, least, leastGS float64, exact bool) {
	inf := math.Inf(1)
	work := m.Work(j)
	if !(work > 0) {
		return nil, inf, inf, true
	}
	sts := stretchesOf(m, j, pools, work)
	exact = len(sts) == 1
	for _, st := range sts {
		fast, cheap := 0.0, inf // best rate, least GPU-seconds per unit of work, over pools
		for pi := range pools {
			for g, r := range st.rates[pi] {
				if r > 0 {
					fast, cheap = math.Max(fast, r), math.Min(cheap, float64(g+1)/r)
				}
			}
		}
		least += st.work / fast
		leastGS += st.work * cheap
	}
	for pi := range pools {
		var c curve
		var ok bool
		if exact {
			c, ok = envelope(sts[0].rates[pi], work)
		} else {
			c, ok = progressive(sts, pi, work)
		}
		if !ok {
			continue
		}
		// The most of its work it can do here in its window: the
		// GPU-seconds it may need here scale with it (at most the most
		// per unit of work, the fastest count's in an envelope).
		most := c.share
		for _, ln := range c.time {
			if ln.a > 0 {
				most = math.Min(most, (window-ln.c)/ln.a)
			}
		}
		if !(most > 0) {
			continue
		}
		if exact {
			c.most *= most
		}
		c.pool, c.share = pi, most
		on = append(on, c)
	}
	return on, least, leastGS, exact
}

// stretchesOf splits j's work into the stretches over which its rates on
// every pool hold. A job's rate on g GPUs of a pool is the most it makes
// on g GPUs of any of the pool's types, placed on at most the pool's nodes
// and GPUs per node, run by any policy: on any count from 1 to the most a
// job may hold there (an elastic policy's copy may take any), with its own
// batch or, adapting it (Pollux's agents), any batch configuration. With a
// perf.Bounder that is the most of its MaxRate over those; with any other
// model its rate on the packed allocation (perf.Bounder).
func stretchesOf(m perf.Model, j *job.Job, pools []Pool, work float64) []stretch {
	rigid := *j
	rigid.MinGPUs, rigid.AdaptBatch = 1, false
	adapt := rigid
	adapt.AdaptBatch = true
	most := make([]int, len(pools))
	for pi := range pools {
		p := &pools[pi]
		if need, known := perf.TrainMemGiB[j.Model]; known && p.MemGiB > 0 && need > p.MemGiB {
			continue // does not fit: no count
		}
		most[pi] = p.GPUs
		if p.MaxJob > 0 {
			most[pi] = min(most[pi], p.MaxJob)
		}
	}
	rigid.MaxGPUs = slices.Max(most)
	adapt.MaxGPUs = rigid.MaxGPUs
	var out []stretch
	for x := 0.0; x < work; {
		st := stretch{rates: make([][]float64, len(pools))}
		until := math.Inf(1)
		for pi := range pools {
			p := &pools[pi]
			st.rates[pi] = make([]float64, most[pi])
			for g := 1; g <= most[pi]; g++ {
				best := 0.0
				for _, typ := range p.GPUTypes {
					s := perf.Span{GPUType: typ, MinGPUs: g, MaxGPUs: g, PerNode: p.PerNode, Nodes: p.Nodes}
					r, u, ok := perf.MaxRate(m, &rigid, s, x)
					if ok {
						ra, ua, _ := perf.MaxRate(m, &adapt, s, x)
						r, u = math.Max(r, ra), math.Min(u, ua)
					} else {
						r, u = m.Rate(&rigid, perf.Packed(typ, g, p.PerNode), x)
					}
					if r > 0 {
						best = math.Max(best, r)
					}
					until = math.Min(until, u)
				}
				st.rates[pi][g-1] = best
			}
		}
		end := math.Min(until, work)
		if !(end > x) {
			end = work // a model that says its rate holds up to where it is: read to the end
		}
		st.work = end - x
		out = append(out, st)
		x = end
	}
	return out
}

// envelope is the curve of a job whose rates on a pool (rates[g-1] on g
// GPUs) are constant in its progress, for work units: its GPU-seconds for
// a share f of its work done in τ seconds are at least f·φ(τ/f), φ(t)
// being the least GPU-seconds per unit of work at t seconds per unit, the
// lower convex envelope of the points (T_g, g·T_g), T_g = work / rate on g
// GPUs; and τ ≥ f·T_min. ok is false when no count runs it.
func envelope(rates []float64, work float64) (curve, bool) {
	type pt struct{ t, c float64 } // time alone, GPU-seconds
	var pts []pt
	for g, r := range rates {
		if t := work / r; r > 0 && t > 0 && !math.IsInf(t, 0) {
			pts = append(pts, pt{t, float64(g+1) * t})
		}
	}
	if len(pts) == 0 {
		return curve{}, false
	}
	c := curve{share: 1}
	fastest, least := math.Inf(1), math.Inf(1)
	for _, q := range pts {
		if q.t < fastest || (q.t == fastest && q.c < c.most) {
			fastest, c.most = q.t, q.c
		}
		least = math.Min(least, q.c)
	}
	c.time = []line{{a: fastest}}             // no faster than its fastest count
	c.lines = append(c.lines, line{a: least}) // never fewer than the least GPU-seconds
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

// maxPieces is the most lines progressive keeps of each bound.
const maxPieces = 8

// progressive is the curve of a job whose rates move with its progress
// (stretches sts) on pool pi, of work units in all: for a share f of its
// work, at least the time and, apart, the GPU-seconds of the stretches
// fastest (cheapest) here that make up f, each at its best count here.
// Both are convex in f; up to maxPieces of their supporting lines are
// kept (fewer lines only lower them), the last one exact at the share it
// can do here. The trade of time for GPU-seconds within a stretch is not
// counted (a weaker bound). ok is false when no stretch runs here.
func progressive(sts []stretch, pi int, work float64) (curve, bool) {
	var tp, cp []piece
	for _, st := range sts {
		fast, cheap := 0.0, math.Inf(1)
		for g, r := range st.rates[pi] {
			if r > 0 {
				fast, cheap = math.Max(fast, r), math.Min(cheap, float64(g+1)/r)
			}
		}
		if fast > 0 && st.work > 0 {
			tp = append(tp, piece{st.work / work, st.work / fast})
			cp = append(cp, piece{st.work / work, st.work * cheap})
		}
	}
	if len(tp) == 0 {
		return curve{}, false
	}
	c := curve{}
	c.time, c.share = supports(tp)
	c.lines, _ = supports(cp)
	if len(tp) == len(sts) {
		c.share = 1 // all of it, whatever the shares add up to in floating point
	}
	for _, q := range cp {
		c.most += q.cost
	}
	return c, true
}

// piece is a share of a job's work and what doing it costs (seconds or
// GPU-seconds).
type piece struct{ share, cost float64 }

// supports are supporting lines a·f + c of the least cost of a share f
// made of ps, cheapest per share first (a convex function, 0 at f = 0),
// and the share they add up to. At most maxPieces lines are kept, spread
// over f, the last piece's always (exact at the whole share).
func supports(ps []piece) ([]line, float64) {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(x, y piece) int { return cmp.Compare(x.cost/x.share, y.cost/y.share) })
	var out []line
	f, cost := 0.0, 0.0
	total := 0.0
	for _, q := range ps {
		total += q.share
	}
	for i, q := range ps {
		slope := q.cost / q.share
		next := f + q.share
		if i == len(ps)-1 || math.Floor(next/total*maxPieces) > math.Floor(f/total*maxPieces) {
			out = append(out, line{a: slope, c: cost - slope*f})
		}
		f, cost = next, cost+q.cost
	}
	if len(out) > maxPieces {
		out = append(out[:maxPieces-1], out[len(out)-1])
	}
	return out, math.Min(total, 1)
}

// gpuSeconds is the GPU-seconds pool p has in [a, b).
func gpuSeconds(p *Pool, a, b float64) float64 {
	if p.Capacity == nil {
		return float64(p.GPUs) * (b - a)
	}
	return p.Capacity.Mean(a, b) * (b - a)
}
