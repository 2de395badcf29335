package chronus

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tide-sched/tide/solver"
)

// Chronus' lease problem, apart from the policy so it can be tested on
// small instances worked out by hand.
//
// Time is cut into lease blocks (block 0 is the current lease). Each
// admitted SLO job needs Need blocks on Gpus GPUs; it may meet one of its
// deadline options, option v allowing only blocks 0 .. Options[v].Blocks-1
// and earning Options[v].Value. Block t holds at most Capacity[t] GPUs.

// leaseJob is one admitted SLO job.
type leaseJob struct {
	Gpus    int
	Need    int           // blocks still needed
	Options []leaseOption // by ascending deadline (so by non-increasing value)
}

// leaseOption is one deadline option: the job's blocks must all lie before
// Blocks.
type leaseOption struct {
	Blocks int
	Value  float64
}

// leasePlan is the answer: for each job the option it meets (-1 none) and
// the blocks it runs in (nil when none).
type leasePlan struct {
	Option []int
	Blocks [][]bool
	Value  float64 // sum of the chosen options' values
}

// runsNow reports whether job i holds block 0.
func (p *leasePlan) runsNow(i int) bool { return len(p.Blocks[i]) > 0 && p.Blocks[i][0] }

// leaseNowWeight is how the MILP's objective treats GPUs given to block 0,
// besides the options' values (Chronus' mip_objective): +1 runs as much of
// the SLO work as early as possible ("maximize"), -1 as late as possible,
// leaving the current lease to best-effort jobs ("minimize"), 0 neither.
type leaseNowWeight float64

// solveLeaseMILP picks each job's option and blocks to maximise the sum of
// the chosen options' values plus now x (GPUs in block 0) / max capacity,
// with GLPK. The model is our own formulation of the one in
// ChronusArtifact's MIPSolver.job_selection (binary x[job][block] and
// s[job][option], capacity per block, exactly the needed blocks before the
// chosen deadline), with one change that keeps GLPK fast: jobs of the same
// shape (GPUs, blocks needed, options) are interchangeable, so each such
// group g of n_g jobs gets integer counts instead of per-job binaries:
//
//	z[g][v] in 0..n_g   jobs of g meeting option v;  Z[g][v] = sum_{u<=v} z[g][u]
//	y[g][t] in 0..n_g   jobs of g running in block t
//	y[g][t] <= Z[g][last]                         a job runs at most once per block
//	sum_t y[g][t] = Need_g * Z[g][last]           chosen jobs get all their blocks
//	w[g][v][t] <= y[g][t], w[g][v][t] <= Z[g][v]  (continuous)
//	sum_{t < Blocks_gv} w[g][v][t] >= Need_g * Z[g][v]   the jobs on options <= v fit before it
//	sum_g Gpus_g y[g][t] <= Capacity[t]
//
// (w only for groups with several options: with one, the middle rows are
// implied.) A group of one job is exactly the artifact's per-job model.
// Counts turn back into jobs earliest deadline first (decompose). The
// artifact asks for exactly one option per job and falls back to greedy
// packing when that is infeasible; "at most one" keeps the model always
// feasible (a job that can meet nothing gets no blocks this lease).
//
// The search is given leaseNodeLimit branch-and-cut nodes: when they run
// out, the plan is the best one found, returned with an error wrapping
// errLeaseBudget (the caller uses the plan and warns); with no plan found
// by then, or when GLPK fails, the plan is nil and the error says why.
func solveLeaseMILP(jobs []leaseJob, capacity []int, now leaseNowWeight, gap float64) (*leasePlan, error) {
	return solveLeaseMILPNodes(jobs, capacity, now, gap, leaseNodeLimit)
}

// leaseNodeLimit is the lease MILP's search budget in branch-and-cut nodes
// (solver.Options.NodeLimit): a count, not a time, so a simulation decides
// the same on every machine. Some small lease problems are very hard for
// GLPK: one of 7 jobs on 16 GPUs ran for over 10 minutes without proving
// its plan within the gap (TestLeaseMILPBudgetStops has one of 4 jobs).
// The shipped Chronus scenarios' lease problems need far fewer nodes (the
// most seen is in docs/harvest.md), and the hardest one met in tests (6
// jobs on 4 GPUs, policytest's fallback workload) between 10,000 and
// 20,000, so the budget changes none of their decisions.
const leaseNodeLimit = 30000

// errLeaseBudget says the lease MILP ran out of nodes and its plan is the
// best found, not one proven within the gap.
var errLeaseBudget = errors.New("lease MILP stopped at its node budget")

// leaseWarning is the text of the plan warning for the lease problem's
// error err (Chronus' name first): the budget's incumbent used, or the
// greedy fallback.
func leaseWarning(name string, err error) string {
	if errors.Is(err, errLeaseBudget) {
		return fmt.Sprintf("%s: lease MILP stopped at its node budget (%d nodes), its best plan found used for the lease: %v", name, leaseNodeLimit, err)
	}
	return fmt.Sprintf("%s: lease MILP failed, admitted jobs packed greedily for the lease: %v", name, err)
}

// solveLeaseMILPNodes is solveLeaseMILP with a node budget (0: none).
func solveLeaseMILPNodes(jobs []leaseJob, capacity []int, now leaseNowWeight, gap float64, nodes int) (*leasePlan, error) {
	m := solver.New()
	maxCap := 1
	for _, c := range capacity {
		maxCap = max(maxCap, c)
	}
	groups := groupLeaseJobs(jobs)
	type vars struct {
		z []solver.Var // by option
		y []solver.Var // by block
	}
	gv := make([]vars, len(groups))
	var obj []solver.Term
	perBlock := make([][]solver.Term, len(capacity))
	for gi, g := range groups {
		j := jobs[g[0]]
		n := float64(len(g))
		last := 0
		for _, o := range j.Options {
			last = max(last, min(o.Blocks, len(capacity)))
		}
		var cum []solver.Term // Z[g][v] as terms
		for k, o := range j.Options {
			z := m.AddIntVar(0, n, fmt.Sprintf("z%d_%d", gi, k))
			gv[gi].z = append(gv[gi].z, z)
			cum = append(cum, solver.Term{Var: z, Coef: 1})
			obj = append(obj, solver.Term{Var: z, Coef: o.Value})
		}
		m.Le(cum, n, fmt.Sprintf("one%d", gi))
		all := scaled(cum, -float64(j.Need))
		for t := 0; t < last; t++ {
			y := m.AddIntVar(0, n, fmt.Sprintf("y%d_%d", gi, t))
			gv[gi].y = append(gv[gi].y, y)
			all = append(all, solver.Term{Var: y, Coef: 1})
			perBlock[t] = append(perBlock[t], solver.Term{Var: y, Coef: float64(j.Gpus)})
			m.Le(append(scaled(cum, -1), solver.Term{Var: y, Coef: 1}), 0, fmt.Sprintf("once%d_%d", gi, t))
			if t == 0 && now != 0 {
				obj = append(obj, solver.Term{Var: y, Coef: float64(now) * float64(j.Gpus) / float64(maxCap)})
			}
		}
		m.Eq(all, 0, fmt.Sprintf("need%d", gi))
		for k, o := range j.Options {
			zk := cum[:k+1]
			within := scaled(zk, -float64(j.Need))
			for t := 0; t < min(o.Blocks, last); t++ {
				if len(j.Options) == 1 {
					within = append(within, solver.Term{Var: gv[gi].y[t], Coef: 1})
					continue
				}
				w := m.AddVar(0, n, fmt.Sprintf("w%d_%d_%d", gi, k, t))
				m.Le([]solver.Term{{Var: w, Coef: 1}, {Var: gv[gi].y[t], Coef: -1}}, 0, "")
				m.Le(append(scaled(zk, -1), solver.Term{Var: w, Coef: 1}), 0, "")
				within = append(within, solver.Term{Var: w, Coef: 1})
			}
			m.Ge(within, 0, fmt.Sprintf("deadline%d_%d", gi, k))
		}
	}
	for t, terms := range perBlock {
		if len(terms) > 0 {
			m.Le(terms, float64(capacity[t]), fmt.Sprintf("cap%d", t))
		}
	}
	m.SetObjective(solver.Maximize, obj)
	sol, err := m.Solve(solver.Options{MIPGap: gap, NodeLimit: nodes})
	if err != nil {
		return nil, fmt.Errorf("chronus lease MILP: %w", err)
	}
	if sol.Status != solver.Optimal && sol.Status != solver.Feasible {
		return nil, fmt.Errorf("chronus lease MILP: %s", sol.Status)
	}
	p := &leasePlan{Option: make([]int, len(jobs)), Blocks: make([][]bool, len(jobs))}
	for i := range p.Option {
		p.Option[i] = -1
	}
	for gi, g := range groups {
		z := make([]int, len(gv[gi].z))
		for k, v := range gv[gi].z {
			z[k] = int(math.Round(sol.Value(v)))
		}
		y := make([]int, len(gv[gi].y))
		for t, v := range gv[gi].y {
			y[t] = int(math.Round(sol.Value(v)))
		}
		decompose(jobs, g, z, y, p)
	}
	if sol.NodeLimited {
		return p, fmt.Errorf("chronus lease MILP (%d jobs, %d blocks): %w after %d nodes", len(jobs), len(capacity), errLeaseBudget, nodes)
	}
	return p, nil
}

func scaled(ts []solver.Term, f float64) []solver.Term {
	out := make([]solver.Term, len(ts))
	for i, t := range ts {
		out[i] = solver.Term{Var: t.Var, Coef: t.Coef * f}
	}
	return out
}

// groupLeaseJobs groups job indexes by shape, in order of first appearance.
func groupLeaseJobs(jobs []leaseJob) [][]int {
	var groups [][]int
	at := map[string]int{}
	for i, j := range jobs {
		key := fmt.Sprint(j.Gpus, j.Need, j.Options)
		g, ok := at[key]
		if !ok {
			g = len(groups)
			at[key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// decompose turns a group's counts into jobs: the group's jobs in order take
// options z (earliest first); block by block, the y[t] chosen jobs with the
// earliest deadline, then the most blocks still missing, run. A job that
// ends short of its blocks (only possible when the counts cannot be split,
// which the w rows rule out for nested deadlines) is given no option.
func decompose(jobs []leaseJob, g []int, z, y []int, p *leasePlan) {
	type cand struct {
		i, opt, left int
	}
	var cs []cand
	k := 0
	for opt, n := range z {
		for ; n > 0 && k < len(g); n-- {
			cs = append(cs, cand{i: g[k], opt: opt, left: jobs[g[k]].Need})
			k++
		}
	}
	for _, c := range cs {
		p.Blocks[c.i] = make([]bool, len(y))
	}
	for t, n := range y {
		sort.SliceStable(cs, func(a, b int) bool {
			if cs[a].opt != cs[b].opt {
				return cs[a].opt < cs[b].opt
			}
			return cs[a].left > cs[b].left
		})
		for ci := range cs {
			if n == 0 {
				break
			}
			c := &cs[ci]
			if c.left > 0 && t < jobs[c.i].Options[c.opt].Blocks {
				p.Blocks[c.i][t] = true
				c.left--
				n--
			}
		}
	}
	for _, c := range cs {
		if c.left > 0 {
			p.Blocks[c.i] = nil
			continue
		}
		p.Option[c.i] = c.opt
		p.Value += jobs[c.i].Options[c.opt].Value
	}
}

// packLeases is ChronusArtifact's fast packing (MIPSolver's
// batch_fast_check_if_packable / batch_fast_job_selection, rewritten):
// jobs by most GPUs first, then least slack (first deadline's blocks minus
// need), then latest deadline; each takes the first of its options it fits
// in, filling the latest free blocks first (so work is left as late as its
// deadline allows and the current lease stays free). A job that fits no
// option gets nothing; ok is false then. Used to admit jobs, and for the
// lease problem when it is too large for the MILP.
func packLeases(jobs []leaseJob, capacity []int) (p *leasePlan, ok bool) {
	free := append([]int(nil), capacity...)
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return packCompare(jobs, a, b) })
	p = &leasePlan{Option: make([]int, len(jobs)), Blocks: make([][]bool, len(jobs))}
	ok = true
	var got []int
	for _, i := range order {
		j := jobs[i]
		p.Option[i], got = packOne(j, free, got[:0])
		if p.Option[i] < 0 {
			ok = false
			continue
		}
		p.Value += j.Options[p.Option[i]].Value
		p.Blocks[i] = make([]bool, min(j.Options[p.Option[i]].Blocks, len(free)))
		for _, t := range got {
			p.Blocks[i][t] = true
		}
	}
	return p, ok
}

// packCompare is packLeases' order between jobs a and b (indexes into jobs):
// most GPUs first, then least slack, then latest first deadline; stable
// (the lower index first on ties).
func packCompare(jobs []leaseJob, a, b int) int {
	ja, jb := &jobs[a], &jobs[b]
	if ja.Gpus != jb.Gpus {
		return -cmp.Compare(ja.Gpus, jb.Gpus)
	}
	if sa, sb := ja.first()-ja.Need, jb.first()-jb.Need; sa != sb {
		return cmp.Compare(sa, sb)
	}
	if c := cmp.Compare(jb.first(), ja.first()); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// first is the blocks of j's first option (0 without options).
func (j *leaseJob) first() int {
	if len(j.Options) == 0 {
		return 0
	}
	return j.Options[0].Blocks
}

// packOne is packLeases' step for one job: the first of j's options with
// j.Need blocks free of j.Gpus GPUs before it, the latest such blocks; it
// takes them from free and returns the option and the blocks (appended to
// got, latest first), or -1 when no option fits (free unchanged).
func packOne(j leaseJob, free []int, got []int) (int, []int) {
	for k, o := range j.Options {
		last := min(o.Blocks, len(free))
		got = got[:0]
		for t := last - 1; t >= 0 && len(got) < j.Need; t-- {
			if free[t] >= j.Gpus {
				got = append(got, t)
			}
		}
		if len(got) < j.Need {
			continue
		}
		for _, t := range got {
			free[t] -= j.Gpus
		}
		return k, got
	}
	return -1, got[:0]
}

// leaseBlocks is the number of whole leases between lease index k and an
// absolute deadline d: the blocks a job may use to finish by d
// (ChronusArtifact's compute_maximum_lease: floor(d / lease) - k).
func leaseBlocks(d, lease float64, k int) int {
	return int(math.Floor(d/lease+1e-9)) - k
}
