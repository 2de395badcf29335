package harvest

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/loan"
)

// arylPolicies registers the policies this file defines; Policies calls it.
func arylPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "aryl",
		Presets: []string{"aryl:loan=false"},
		Summary: "Aryl / Lyra (EuroSys'23): idle inference servers lent to training; base (minimum) workers shortest job " +
			"first, extra workers by a multiple-choice knapsack on JCT reduction; reclaims take the servers whose jobs " +
			"lose least",
		Knobs: "loan=true: lend idle inference servers (false: the training cluster alone, the paper's baseline); " +
			"whole=true: lend only servers inference leaves wholly idle (false: any idle GPU); " +
			"elastic=true: extra workers by the knapsack (false: every job runs on the GPUs it asked for; with " +
			"loan=false, the papers' baseline without capacity loaning or elastic scaling)",
		Elastic:  true,
		Defaults: DefaultAryl,
		Build:    contract.Typed(DefaultAryl, func(_ contract.Context, k Aryl) (*Aryl, error) { return NewAryl(k), nil }),
	})
}

// Aryl is the capacity-loaning scheduler of Aryl (arXiv'22), published as
// Lyra (EuroSys'23). The papers' code is not public; this follows their
// description, with the gaps filled as the shared policy notes mark
// [recon] (../shared/docs/POLICIES.md, beside the repository, not in it):
//
//   - Loaning: inference servers inference leaves wholly idle are lent to
//     training (Whole); a job runs either on the training cluster or wholly
//     on loaned servers (a job never spans sites here, where Lyra keeps
//     base workers on the training cluster and puts flexible ones on loaned
//     servers).
//   - Base allocation: jobs by shortest remaining time at their minimum
//     worker count (Lyra orders its queue SJF); each takes its minimum on the
//     training cluster if it fits (a job running on loaned servers stays
//     there while they remain), else on loaned servers, else waits. A job
//     that pins a GPU type (Job.GPUType) takes only pools of that type.
//   - Extra workers: in each pool, a multiple-choice knapsack over the jobs
//     placed there, worth the JCT reduction rem(min) - rem(n) of running on
//     n workers instead of the minimum, within the pool's spare GPUs.
//   - Reclaim: when inference needs servers back, the simulator takes idle
//     ones first, then those whose jobs cost least to preempt (ReclaimCost:
//     GPU-seconds of restart the job loses).
type Aryl struct {
	Loan    bool `knob:"loan"`
	Whole   bool `knob:"whole"`
	Elastic bool `knob:"elastic"` // false: jobs run rigid, on the GPUs they asked for
	name    string

	// Scratch reused from round to round: the reasons' memory, and this
	// round's remaining times, for appendTerms.
	explain explain.Scratch
	terms   func(b []byte, st *engine.Status) []byte
	rem     map[*engine.Status]float64
	// and the round's working memory (run is a plan's Run: the engine is
	// done with it by the next round).
	pools []loan.Pool
	order []arylEntry
	free  []int
	try   []int
	in    []arylEntry
	items [][]loan.Choice
	run   []engine.Assignment
	sts   []*engine.Status
	ks    loan.Knapsack
}

// arylEntry is a job in Aryl's order for a round.
type arylEntry struct {
	st   *engine.Status
	pool int
	need int     // base workers: its minimum, or what it asked for when not elastic
	rem  float64 // on need GPUs of the first training pool's type, or the job's own
}

// DefaultAryl holds Aryl's default knobs.
var DefaultAryl = Aryl{Loan: true, Whole: true, Elastic: true}

// NewAryl builds Aryl with the knobs k holds; its name lists those off.
func NewAryl(k Aryl) *Aryl {
	a := &Aryl{Loan: k.Loan, Whole: k.Whole, Elastic: k.Elastic, name: "aryl"}
	if !a.Loan {
		a.name += ":loan=false"
	}
	if !a.Elastic {
		a.name += ":elastic=false"
	}
	if !a.Whole {
		a.name += ":whole=false"
	}
	return a
}

// Name implements engine.Policy.
func (a *Aryl) Name() string { return a.name }

// ProgressOnDemand implements engine.ProgressOnDemand: Aryl reads progress
// only through Snapshot.Remaining: every active job's, every round (its
// shortest-remaining-first order and the knapsack's gains, as its rule
// must), so a round pulls every running job. Where the simulator keeps
// every job current anyway (sites with inference load, job agents) it
// changes nothing.
func (a *Aryl) ProgressOnDemand() bool { return true }

// idleServerGPUs counts the GPUs of the site's servers of a GPU type that
// inference leaves wholly idle (all GPUs up).
func idleServerGPUs(s *engine.Snapshot, site *cluster.Site, gpuType string) int {
	k := 0
	for _, id := range site.Nodes {
		nd := &s.Cluster.Nodes[id]
		if nd.GPUType == gpuType && s.UpGPUs(nd) == nd.GPUs {
			k += nd.GPUs
		}
	}
	return k
}

// Schedule implements engine.Policy.
func (a *Aryl) Schedule(s *engine.Snapshot) engine.Plan {
	var lend func(*cluster.Site, string) int
	if a.Whole {
		lend = func(site *cluster.Site, t string) int { return idleServerGPUs(s, site, t) }
	}
	pools := loan.AppendPools(a.pools, s, a.Loan, lend)
	a.pools = pools
	order := grow(a.order, len(s.Jobs))
	a.order = order
	for i, st := range s.Jobs {
		// Ranked by its time on the first training pool's type, or on
		// its own when it pins one (it can run on no other).
		t := st.Job.GPUType
		if t == "" && len(pools) > 0 {
			t = pools[0].Type
		}
		need := st.Job.MinGPUs
		if !a.Elastic {
			need = max(st.Job.GPUs, st.Job.MinGPUs)
		}
		order[i] = arylEntry{st: st, pool: -1, need: need, rem: s.Remaining(st, need, t)}
	}
	slices.SortStableFunc(order, func(x, y arylEntry) int { return cmp.Compare(x.rem, y.rem) })
	free := grow(a.free, len(pools))
	a.free = free
	for i, p := range pools {
		free[i] = p.Free
	}
	// Base workers. A job on loaned servers stays in their pool while it
	// fits; a job that pins a GPU type takes only a pool of that type (the
	// engine refuses a plan giving it another), and waits when none has
	// room.
	try := a.try[:0]
	for i := range order {
		e := &order[i]
		need := e.need
		cur := loan.SiteOf(s, e.st)
		try = try[:0]
		for k, p := range pools {
			if p.Infer && p.Site == cur {
				try = append(try, k)
			}
		}
		for k := range pools {
			try = append(try, k)
		}
		for _, k := range try {
			if free[k] >= need && pools[k].Serves(e.st) {
				free[k] -= need
				e.pool = k
				break
			}
		}
	}
	a.try = try
	// Extra workers, per pool.
	var plan engine.Plan
	run := a.run[:0]
	for k, p := range pools {
		in := a.in[:0]
		choices := 0
		for _, e := range order {
			if e.pool == k && a.Elastic {
				lo, hi := loan.Range(s, e.st, free[k]+e.st.Job.MinGPUs)
				choices += max(hi-lo, 0)
			}
		}
		counts := loan.CountsFor(free[k], choices)
		for _, e := range order {
			if e.pool == k {
				in = append(in, e)
			}
		}
		a.in = in
		if len(a.items) < len(in) {
			a.items = append(a.items, make([][]loan.Choice, len(in)-len(a.items))...)
		}
		items := a.items[:len(in)]
		for i, e := range in {
			ch := items[i][:0]
			if a.Elastic {
				lo, hi := loan.Range(s, e.st, free[k]+e.st.Job.MinGPUs)
				base := s.Remaining(e.st, lo, p.Type)
				for n := lo + 1; n <= hi; n = counts.Next(n, hi) {
					r := s.Remaining(e.st, n, p.Type)
					if gain := base - r; gain > 0 && !math.IsInf(gain, 0) {
						ch = append(ch, loan.Choice{GPUs: n - lo, Value: gain})
					}
				}
			}
			items[i] = ch
		}
		pick := a.ks.Solve(items, free[k])
		first := len(run)
		for i, e := range in {
			n := e.need
			if pick[i] >= 0 {
				n += items[i][pick[i]].GPUs
			}
			run = append(run, engine.Assignment{Job: e.st.Job.ID, GPUs: n, GPUType: p.Type, Site: p.Site})
		}
		loan.LargestFirst(run[first:])
	}
	a.run, plan.Run = run, run
	sts := grow(a.sts, len(order))
	a.sts = sts
	if a.rem == nil {
		a.rem = make(map[*engine.Status]float64, len(order))
	}
	clear(a.rem)
	for i, e := range order {
		sts[i], a.rem[e.st] = e.st, e.rem
	}
	if a.terms == nil { // made once: a closure made every round is allocated every round
		a.terms = a.appendTerms
	}
	a.explain.PlanAppend(s, &plan, sts, a.terms)
	clear(a.rem) // the statuses are the engine's
	return plan
}

// grow returns b with length n, reusing its memory when it holds n; the
// contents are not cleared.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// appendTerms appends a waiting job's standing to b: "remaining 3600 s on
// its base workers; shortest first", as this round ranked it, then, for a
// job that pins a GPU type, "; only a100 GPUs" (loan.AppendPinned).
func (a *Aryl) appendTerms(b []byte, st *engine.Status) []byte {
	b = append(b, "remaining "...)
	b = strconv.AppendFloat(b, a.rem[st], 'f', 0, 64)
	b = append(b, " s on its base workers; shortest first"...)
	return loan.AppendPinned(b, st)
}

// ReclaimCost implements engine.ReclaimCoster: the GPU-seconds of restart a
// preempted job loses (its GPUs x its model's restart cost), so servers
// whose jobs are cheapest to stop go back first.
func (a *Aryl) ReclaimCost(s *engine.Snapshot, st *engine.Status) float64 {
	if st == nil || len(st.GPUs) == 0 {
		return 0
	}
	return float64(len(st.GPUs)) * math.Max(s.Model.Costs(st.Job).Restart, 1)
}
