// Package loan holds what the harvesting policies (DeepBoot, Aryl,
// tidal) share: the cluster seen as GPU pools, one per site, in which
// training sites come first and inference sites lend what inference
// leaves; a job's value at each GPU count; and a multiple-choice knapsack
// that picks one count per job.
package loan

import (
	"math"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// A job never spans sites (the engine's rule), so a job runs either on the
// training cluster or wholly on loaned inference GPUs.

// Pool is one site's GPUs of one type for a round.
type Pool struct {
	Site  string
	Type  string // the pool's GPU type
	Infer bool   // an inference site (its GPUs are loaned)
	Free  int    // GPUs the policy may hand out
}

// Pools lists the training sites, then (with loan) the inference sites,
// in the cluster's order, each with its GPUs up now: one pool per GPU type
// a site holds, in the order of its nodes (a site with two types was one
// pool of its first node's type, counting every GPU, and DeepBoot and Aryl
// asked for more GPUs of that type than it had). lendable, when set, says
// how many of an inference site's up GPUs of a type may be lent.
func Pools(s *engine.Snapshot, loan bool, lendable func(site *cluster.Site, gpuType string) int) []Pool {
	var train, infer []Pool
	for _, site := range s.Cluster.Sites() {
		infers := site.Kind == cluster.SiteInference
		if infers && !loan {
			continue
		}
		for _, t := range siteTypes(s, &site) {
			p := Pool{Site: site.Name, Type: t, Free: s.Available(site.Name, t)}
			if !infers {
				train = append(train, p)
				continue
			}
			p.Infer = true
			if lendable != nil {
				p.Free = lendable(&site, t)
			}
			infer = append(infer, p)
		}
	}
	return append(train, infer...)
}

// siteTypes lists the GPU types of a site's nodes, each once, in the order
// of the nodes.
func siteTypes(s *engine.Snapshot, site *cluster.Site) []string {
	var types []string
	for _, id := range site.Nodes {
		if t := s.Cluster.Nodes[id].GPUType; !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types
}

// SiteOf is the site a running job is on, "" when it holds no GPUs.
func SiteOf(s *engine.Snapshot, st *engine.Status) string {
	if len(st.GPUs) == 0 {
		return ""
	}
	return s.Cluster.NodeOf(st.GPUs[0]).Site
}

// Choice is one way to run a job: GPUs (weight) for value.
type Choice struct {
	GPUs  int
	Value float64
}

// MCKnapsack solves the multiple-choice knapsack: for each item pick at most
// one choice so that the GPUs sum to at most capacity and the values sum to
// the most (DeepBoot's dp[i][g] = max(dp[i-1][g], max_w dp[i-1][g-w] +
// v_i(w))). It returns the chosen choice per item, -1 for none. Ties keep
// the earlier decision: an item is left out unless a choice adds value, and
// among equal choices the first listed wins, so results are deterministic.
//
// Two shortcuts leave every answer as the plain recurrence gives it: the
// table stops at the GPUs all items could use together (beyond that every
// column is the same), and where an item's choices are listed by GPUs,
// fewest first, a choice worth no more than an earlier one is never tried
// (the earlier one, on fewer GPUs, always scores at least as much and is
// tried first). Its cost is the table's columns times the choices tried;
// callers keep the choices few on large pools (Counts).
func MCKnapsack(items [][]Choice, capacity int) []int {
	capacity = max(capacity, 0)
	n := len(items)
	demand := 0
	tried := make([][]int, n) // per item, the indices of the choices worth trying
	for i, it := range items {
		most, best, sorted := 0, math.Inf(-1), true
		for k, c := range it {
			sorted = sorted && (k == 0 || c.GPUs >= it[k-1].GPUs)
			most = max(most, c.GPUs)
		}
		for k, c := range it {
			if c.GPUs < 0 || c.GPUs > capacity {
				continue
			}
			if sorted && c.Value <= best {
				continue
			}
			best = max(best, c.Value)
			tried[i] = append(tried[i], k)
		}
		demand += most
	}
	capacity = min(capacity, demand)
	w := capacity + 1
	// prev and cur: the best value with items[:i] on at most g GPUs;
	// pick[i*w+g] the choice item i takes there.
	prev, cur := make([]float64, w), make([]float64, w)
	pick := make([]int32, n*w)
	for i := 0; i < n; i++ {
		row := pick[i*w : (i+1)*w]
		for g := 0; g <= capacity; g++ {
			cur[g], row[g] = prev[g], -1
			for _, k := range tried[i] {
				c := items[i][k]
				if c.GPUs > g {
					continue
				}
				if v := prev[g-c.GPUs] + c.Value; v > cur[g]+1e-12 {
					cur[g], row[g] = v, int32(k)
				}
			}
		}
		prev, cur = cur, prev
	}
	out := make([]int, n)
	g := capacity
	for i := n - 1; i >= 0; i-- {
		out[i] = int(pick[i*w+g])
		if k := out[i]; k >= 0 {
			g -= items[i][k].GPUs
		}
	}
	return out
}

// knapsackBudget is the most table cells times choices (MCKnapsack's
// cost, about a nanosecond each) a pool's knapsack spends trying every GPU
// count of every job: a few milliseconds a round. Every shipped scenario's
// pools stay under it.
const knapsackBudget = 4_000_000

// Counts is the GPU counts a pool's knapsack tries for each job. Within
// knapsackBudget it is every count from a job's least to its most, as the
// papers' dynamic programmes do. Above it (a pool of thousands of GPUs and
// jobs that may each take all of them, as a duration-model trace's jobs
// may under an elastic policy) it is the least, the most and the powers of
// two between: the allocations Pollux and Sia restrict elastic jobs to,
// about 2 log2(GPUs) choices instead of GPUs, so a round on 2,048 GPUs
// costs milliseconds instead of seconds (docs/harvest.md).
type Counts struct{ thin bool }

// CountsFor chooses the counts for a pool of capacity GPUs whose jobs may
// take choices counts in all (the sum over jobs of most - least + 1).
func CountsFor(capacity, choices int) Counts {
	return Counts{thin: float64(capacity+1)*float64(choices) > knapsackBudget}
}

// Next is the count tried after n on the way to hi: n+1, or when thinned
// the next power of two above n, and hi last.
func (c Counts) Next(n, hi int) int {
	if !c.thin || n < 1 {
		return n + 1
	}
	p := 1
	for p <= n {
		p <<= 1
	}
	return min(p, max(hi, n+1))
}

// Speedup is a job's speed on n GPUs of type t relative to one GPU.
// A job whose agent has reported a fitted goodput model (Status.Hints) is
// valued as in DeepBoot's code, on the Pollux simulator: its goodput
// speedup, the best goodput (throughput x statistical efficiency, batch
// size chosen) on n GPUs packed onto as few nodes of type t as hold them,
// over the best on one GPU (goodput.Function.Speedup). Otherwise it comes
// from the snapshot's performance model (its throughput curve):
// MinGPUs x r(MinGPUs) / r(n), r the remaining time, so a job that cannot
// run on one GPU is measured from its minimum. When the model cannot
// predict (no remaining time), the speedup is n: linear.
func Speedup(s *engine.Snapshot, st *engine.Status, n int, t string) float64 {
	if h := st.Hints; h != nil && h.Fitted {
		per := max(s.GPUsPerNode[t], 1)
		return h.Function().Speedup((n+per-1)/per, n)
	}
	lo := max(st.Job.MinGPUs, 1)
	base := s.Remaining(st, lo, t)
	r := s.Remaining(st, n, t)
	if !(base > 0) || math.IsInf(base, 0) || !(r > 0) || math.IsInf(r, 0) {
		if math.IsInf(r, 1) && !math.IsInf(base, 1) {
			return 0 // the model says it cannot run on n
		}
		return float64(n)
	}
	return float64(lo) * base / r
}

// Range is the GPU counts a job may take in a pool of free GPUs:
// [MinGPUs, min(its maximum, free)]; empty (lo > hi) when it does not fit.
func Range(s *engine.Snapshot, st *engine.Status, free int) (lo, hi int) {
	return st.Job.MinGPUs, min(alloc.MaxGPUs(s, st), free)
}

// SpeedupKnapsacks gives the jobs of left GPUs pool by pool, in order
// (DeepBoot's ATS-T then ATS-I): in each pool, a multiple-choice knapsack
// over the jobs still without GPUs, a job on n GPUs (n in Range) worth
// its speedup times weight(st, p), times factor(st) when n or the site
// differs from what it holds now (the restart factor). It returns the
// assignments, largest first within each pool, and the jobs left out.
func SpeedupKnapsacks(s *engine.Snapshot, pools []Pool, left []*engine.Status,
	weight func(st *engine.Status, p Pool) float64, factor func(st *engine.Status) float64) ([]engine.Assignment, []*engine.Status) {
	var out []engine.Assignment
	for _, p := range pools {
		items := make([][]Choice, len(left))
		choices := 0
		for _, st := range left {
			lo, hi := Range(s, st, p.Free)
			choices += max(hi-lo+1, 0)
		}
		counts := CountsFor(p.Free, choices)
		for i, st := range left {
			lo, hi := Range(s, st, p.Free)
			f, w := factor(st), weight(st, p)
			for n := lo; n <= hi; n = counts.Next(n, hi) {
				v := Speedup(s, st, n, p.Type) * w
				if SiteOf(s, st) != p.Site || len(st.GPUs) != n {
					v *= f
				}
				if v > 0 {
					items[i] = append(items[i], Choice{GPUs: n, Value: v})
				}
			}
		}
		pick := MCKnapsack(items, p.Free)
		var next []*engine.Status
		var run []engine.Assignment
		for i, st := range left {
			if pick[i] < 0 {
				next = append(next, st)
				continue
			}
			run = append(run, engine.Assignment{Job: st.Job.ID, GPUs: items[i][pick[i]].GPUs, GPUType: p.Type, Site: p.Site})
		}
		out = append(out, LargestFirst(run)...)
		left = next
	}
	return out, left
}

// LargestFirst orders assignments by GPUs, most first (hardest to place),
// keeping the given order on ties.
func LargestFirst(run []engine.Assignment) []engine.Assignment {
	slices.SortStableFunc(run, func(a, b engine.Assignment) int { return b.GPUs - a.GPUs })
	return run
}
