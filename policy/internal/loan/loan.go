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
	return AppendPools(nil, s, loan, lendable)
}

// AppendPools is Pools written over dst[:0], for a policy that keeps the
// slice from round to round: it allocates only when dst is too short.
// lendable is only called, never kept.
func AppendPools(dst []Pool, s *engine.Snapshot, loan bool, lendable func(site *cluster.Site, gpuType string) int) []Pool {
	dst = dst[:0]
	sites := s.Cluster.Sites()
	for _, infers := range [2]bool{false, true} {
		if infers && !loan {
			break
		}
		for i := range sites {
			site := &sites[i]
			if (site.Kind == cluster.SiteInference) != infers {
				continue
			}
			// The site's GPU types, each once, in the order of its nodes:
			// the pools appended for this site so far are the types seen.
			first := len(dst)
			for _, id := range site.Nodes {
				if t := s.Cluster.Nodes[id].GPUType; !hasType(dst[first:], t) {
					dst = append(dst, Pool{Site: site.Name, Type: t, Infer: infers})
				}
			}
			for k := first; k < len(dst); k++ {
				p := &dst[k]
				p.Free = s.Available(site.Name, p.Type)
				if infers && lendable != nil {
					p.Free = lendable(site, p.Type)
				}
			}
		}
	}
	return dst
}

// Serves reports whether job st may run on the pool's GPUs: it asks for
// no GPU type (Job.GPUType "") or for the pool's. The engine refuses a plan
// that gives a job another type than it asks for, so a pinned job competes
// only for the pools of its type.
func (p Pool) Serves(st *engine.Status) bool {
	return st.Job.GPUType == "" || st.Job.GPUType == p.Type
}

// AppendPinned appends to a waiting job's terms, when st pins a GPU type,
// "; only a100 GPUs": the reason's free count is of every type, and a
// pinned job may wait while GPUs of other types are free.
func AppendPinned(b []byte, st *engine.Status) []byte {
	if t := st.Job.GPUType; t != "" {
		b = append(b, "; only "...)
		b = append(b, t...)
		b = append(b, " GPUs"...)
	}
	return b
}

// hasType reports whether one of pools is of GPU type t.
func hasType(pools []Pool, t string) bool {
	for i := range pools {
		if pools[i].Type == t {
			return true
		}
	}
	return false
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
// Its shortcuts (Knapsack.Solve) leave every answer as the plain
// recurrence gives it. Its cost is the table's cells times the choices
// tried; callers keep the choices few on large pools (Counts).
func MCKnapsack(items [][]Choice, capacity int) []int {
	return new(Knapsack).Solve(items, capacity)
}

// Knapsack is MCKnapsack's memory, kept by a policy that solves knapsacks
// every round: each slice is grown only when a round needs more than any
// before, so rounds of the same size allocate nothing. The zero value is
// ready to use; a Knapsack is not safe for concurrent use.
type Knapsack struct {
	tried []Choice // the choices worth trying, item after item
	index []int32  // each tried choice's index in its item's list
	from  []int    // item i's tried choices are tried[from[i]:from[i+1]]
	lo    []int    // item i's row of picks holds columns lo[i]..hi[i]
	hi    []int
	at    []int // and starts at at[i] in the pick table

	prev, cur []float64
	// The pick table: per cell, 1 + the place in its item's tried choices
	// of the one it takes (0: none), in the narrowest of these that holds
	// the most tried choices of any item (usually a byte).
	pick8  []uint8
	pick16 []uint16
	pick32 []uint32
	out    []int
}

// Solve is MCKnapsack with k's memory. The slice it returns is k's, valid
// until the next Solve.
//
// Three shortcuts leave every answer as the plain recurrence gives it:
//
//   - where an item's choices are listed by GPUs, fewest first, a choice
//     worth no more than an earlier one is never tried (the earlier one,
//     on fewer GPUs, always scores at least as much and is tried first);
//   - row i of the table (items[:i+1]) is the same in every column from
//     P_i, the most GPUs items[:i+1] can take together, on (each cell sees
//     the same inputs there), so it is computed only up to P_i and read at
//     P_i beyond it; the table stops at the most GPUs all items can take;
//   - the choices are read back from the last column, and every item after
//     i takes at most S_(i+1) GPUs together, so row i is read only from
//     column capacity - S_(i+1) on: the columns below are not computed or
//     kept. With W the table's width, row i keeps min(W, P_i) -
//     max(0, W - S_(i+1)) + 1 cells: at most the GPUs the items ask beyond
//     the pool, and one cell when all fit.
//
// A row is filled a choice at a time, one straight pass over its cells
// each (a cell still tries its item's choices in their order, keeping a
// later one only when it adds over 1e-12, so every cell ends as the
// recurrence leaves it, ties included).
//
// So its cost is the cells kept times the choices tried, and its memory one
// byte a cell (two or four when an item tries over 255 or 65,535 choices).
func (k *Knapsack) Solve(items [][]Choice, capacity int) []int {
	capacity = max(capacity, 0)
	n := len(items)
	k.tried, k.index = k.tried[:0], k.index[:0]
	k.from = append(k.from[:0], 0)
	demand, top, widest := 0, 0, 0 // top: the most GPUs the tried choices take together
	for _, it := range items {
		most, best, sorted := 0, math.Inf(-1), true
		for j, c := range it {
			sorted = sorted && (j == 0 || c.GPUs >= it[j-1].GPUs)
			most = max(most, c.GPUs)
		}
		hi := 0
		for j, c := range it {
			if c.GPUs < 0 || c.GPUs > capacity {
				continue
			}
			if sorted && c.Value <= best {
				continue
			}
			best = max(best, c.Value)
			k.tried, k.index = append(k.tried, c), append(k.index, int32(j))
			hi = max(hi, c.GPUs)
		}
		k.from = append(k.from, len(k.tried))
		widest = max(widest, len(k.tried)-k.from[len(k.from)-2])
		demand += most
		top += hi
	}
	// Reading the choices back from column min(capacity, demand), as the
	// plain table does, or from column min(capacity, top) gives the same
	// picks: every row is flat from its P_i on, and P_(n-1) = top.
	w := min(capacity, demand, top)
	k.lo, k.hi, k.at = grow(k.lo, n), grow(k.hi, n), grow(k.at, n)
	cells, p, s := 0, 0, top // p = P_i, s = S_(i+1)
	for i := range n {
		most := 0
		for _, c := range k.tried[k.from[i]:k.from[i+1]] {
			most = max(most, c.GPUs)
		}
		p, s = p+most, s-most
		k.lo[i], k.hi[i], k.at[i] = max(0, w-s), min(w, p), cells
		if k.from[i] < k.from[i+1] {
			cells += k.hi[i] - k.lo[i] + 1
		}
	}
	k.prev, k.cur = grow(k.prev, w+1), grow(k.cur, w+1)
	k.out = grow(k.out, n)
	switch {
	case widest <= math.MaxUint8:
		k.pick8 = grow(k.pick8, cells)
		solve(k, items, w, k.pick8)
	case widest <= math.MaxUint16:
		k.pick16 = grow(k.pick16, cells)
		solve(k, items, w, k.pick16)
	default:
		k.pick32 = grow(k.pick32, cells)
		solve(k, items, w, k.pick32)
	}
	return k.out
}

// solve fills the pick table (cells as Solve lays them out) and reads the
// choices back from column w into k.out.
func solve[T uint8 | uint16 | uint32](k *Knapsack, items [][]Choice, w int, pick []T) {
	prev, cur := k.prev, k.cur
	prev[0] = 0 // the row before the first item: nothing, worth 0
	last := 0   // prev holds its row up to column last
	for i := range items {
		tried := k.tried[k.from[i]:k.from[i+1]]
		if len(tried) == 0 {
			continue // the row is the one before
		}
		lo, hi := k.lo[i], k.hi[i]
		for g := last + 1; g <= hi; g++ {
			prev[g] = prev[last] // flat from the previous row's P on
		}
		row := pick[k.at[i] : k.at[i]+hi-lo+1]
		// Each cell tries the choices in order, as the recurrence does;
		// the choices go outside so that each is a pass over the row.
		copy(cur[lo:hi+1], prev[lo:hi+1])
		clear(row)
		for j, c := range tried {
			if c.GPUs > hi {
				continue // no cell of the row can take it
			}
			from := max(lo, c.GPUs)
			src := prev[from-c.GPUs : hi+1-c.GPUs]
			dst := cur[from : hi+1][:len(src)]
			took := row[from-lo:][:len(src)]
			for x, p := range src {
				if v := p + c.Value; v > dst[x]+1e-12 {
					dst[x], took[x] = v, T(j+1)
				}
			}
		}
		prev, cur, last = cur, prev, hi
	}
	g := w
	for i := len(items) - 1; i >= 0; i-- {
		k.out[i] = -1
		if k.from[i] == k.from[i+1] {
			continue
		}
		took := int(pick[k.at[i]+min(g, k.hi[i])-k.lo[i]])
		if took > 0 {
			c := k.from[i] + took - 1
			k.out[i] = int(k.index[c])
			g -= k.tried[c].GPUs
		}
	}
}

// grow returns b with length n, reusing its memory when it holds n; the
// contents are not cleared.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
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
	o := speedupFor(s, st, t)
	return o.at(n)
}

// speedupOf is Speedup for one job on GPU type t at any count, the
// remaining time on its minimum, which every count divides, worked out
// once (the model's remaining times are most of a knapsack's set-up).
type speedupOf struct {
	s      *engine.Snapshot
	st     *engine.Status
	t      string
	fitted bool    // valued by its goodput model
	lo     int     // the count speedups are measured from
	base   float64 // the remaining time on lo GPUs
}

// speedupFor prepares Speedup for st on type t.
func speedupFor(s *engine.Snapshot, st *engine.Status, t string) speedupOf {
	o := speedupOf{s: s, st: st, t: t}
	if h := st.Hints; h != nil && h.Fitted {
		o.fitted = true
		return o
	}
	o.lo = max(st.Job.MinGPUs, 1)
	o.base = s.Remaining(st, o.lo, t)
	return o
}

// at is Speedup(s, st, n, t). A remaining time is the same each time it
// is asked for in a round, so base stands for the one on lo GPUs.
func (o *speedupOf) at(n int) float64 {
	if o.fitted {
		per := max(o.s.GPUsPerNode[o.t], 1)
		return o.st.Hints.Function().Speedup((n+per-1)/per, n)
	}
	base, r := o.base, o.base
	if n != o.lo {
		r = o.s.Remaining(o.st, n, o.t)
	}
	if !(base > 0) || math.IsInf(base, 0) || !(r > 0) || math.IsInf(r, 0) {
		if math.IsInf(r, 1) && !math.IsInf(base, 1) {
			return 0 // the model says it cannot run on n
		}
		return float64(n)
	}
	return float64(o.lo) * base / r
}

// Range is the GPU counts a job may take in a pool of free GPUs:
// [MinGPUs, min(its maximum, free)]; empty (lo > hi) when it does not fit.
func Range(s *engine.Snapshot, st *engine.Status, free int) (lo, hi int) {
	return st.Job.MinGPUs, min(alloc.MaxGPUs(s, st), free)
}

// RangeIn is Range in pool p: the counts job st may take of p's free
// GPUs, empty (lo > hi) when it does not fit or p is not of the type st
// asks for (Serves).
func RangeIn(s *engine.Snapshot, st *engine.Status, p Pool) (lo, hi int) {
	lo, hi = Range(s, st, p.Free)
	if !p.Serves(st) {
		hi = lo - 1
	}
	return lo, hi
}

// SpeedupKnapsacks gives the jobs of left GPUs pool by pool, in order
// (DeepBoot's ATS-T then ATS-I): in each pool, a multiple-choice knapsack
// over the jobs still without GPUs, a job on n GPUs (n in RangeIn: a job
// that pins a GPU type is an item only in the pools of its type) worth
// its speedup times weight(st, p), times factor(st) when n or the site
// differs from what it holds now (the restart factor). It returns the
// assignments, largest first within each pool, and the jobs left out.
func SpeedupKnapsacks(s *engine.Snapshot, pools []Pool, left []*engine.Status,
	weight func(st *engine.Status, p Pool) float64, factor func(st *engine.Status) float64) ([]engine.Assignment, []*engine.Status) {
	return new(Speedups).Knapsacks(s, pools, left, weight, factor)
}

// Speedups is SpeedupKnapsacks' memory, kept by a policy that runs them
// every round: it grows only when a round needs more than any before, so
// rounds of the same size allocate nothing. The zero value is ready to use.
type Speedups struct {
	// IdleOnly keeps a waiting job whose restart factor is 0 (young,
	// restarted often) an item at idleOnly of its speedup, so that it
	// takes GPUs no other job wants instead of waiting on idle GPUs until
	// its age outgrows its restarts' penalty (minutes under a live
	// clock). tidal sets it; DeepBoot's code leaves such a job out, and so
	// does deepboot.
	IdleOnly bool
	ks       Knapsack
	items    [][]Choice // per job, its choices (each job's slice kept)
	left     [2][]*engine.Status
	out      []engine.Assignment
}

// Knapsacks is SpeedupKnapsacks with sp's memory. It does not write left;
// weight and factor are only called. The slices it returns are sp's, valid
// until its next call (a plan's Run: the engine is done with it by the next
// round).
func (sp *Speedups) Knapsacks(s *engine.Snapshot, pools []Pool, left []*engine.Status,
	weight func(st *engine.Status, p Pool) float64, factor func(st *engine.Status) float64) ([]engine.Assignment, []*engine.Status) {
	out := sp.out[:0]
	for pi, p := range pools {
		if len(sp.items) < len(left) {
			sp.items = append(sp.items, make([][]Choice, len(left)-len(sp.items))...)
		}
		items := sp.items[:len(left)]
		choices := 0
		for _, st := range left {
			lo, hi := RangeIn(s, st, p)
			choices += max(hi-lo+1, 0)
		}
		counts := CountsFor(p.Free, choices)
		for i, st := range left {
			lo, hi := RangeIn(s, st, p)
			f, w := factor(st), weight(st, p)
			ch := items[i][:0]
			var speedup speedupOf
			if lo <= hi {
				speedup = speedupFor(s, st, p.Type)
			}
			site := SiteOf(s, st)
			for n := lo; n <= hi; n = counts.Next(n, hi) {
				v := speedup.at(n) * w
				if site != p.Site || len(st.GPUs) != n {
					if f > 0 || len(st.GPUs) > 0 || !sp.IdleOnly {
						v *= f
					} else {
						v *= idleOnly
					}
				}
				if v > 0 {
					ch = append(ch, Choice{GPUs: n, Value: v})
				}
			}
			items[i] = ch
		}
		pick := sp.ks.Solve(items, p.Free)
		// The jobs left out go to the next pool, in a buffer other than
		// the one left is read from (never the caller's).
		next := sp.left[pi%2][:0]
		first := len(out)
		for i, st := range left {
			if pick[i] < 0 {
				next = append(next, st)
				continue
			}
			out = append(out, engine.Assignment{Job: st.Job.ID, GPUs: items[i][pick[i]].GPUs, GPUType: p.Type, Site: p.Site})
		}
		LargestFirst(out[first:])
		sp.left[pi%2], left = next, next
	}
	sp.out = out
	return out, left
}

// idleOnly is the value factor of a waiting job whose restart factor is
// 0: small enough that any choice of positive value outweighs every such
// choice together, so such a job gets only GPUs left idle.
const idleOnly = 1e-9

// LargestFirst orders assignments by GPUs, most first (hardest to place),
// keeping the given order on ties.
func LargestFirst(run []engine.Assignment) []engine.Assignment {
	slices.SortStableFunc(run, func(a, b engine.Assignment) int { return b.GPUs - a.GPUs })
	return run
}
