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
func MCKnapsack(items [][]Choice, capacity int) []int {
	capacity = max(capacity, 0)
	n := len(items)
	// dp[i][g]: best value with items[:i] using at most g GPUs.
	dp := make([][]float64, n+1)
	pick := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]float64, capacity+1)
		pick[i] = make([]int, capacity+1)
	}
	for i := 1; i <= n; i++ {
		for g := 0; g <= capacity; g++ {
			dp[i][g], pick[i][g] = dp[i-1][g], -1
			for k, c := range items[i-1] {
				if c.GPUs > g || c.GPUs < 0 {
					continue
				}
				if v := dp[i-1][g-c.GPUs] + c.Value; v > dp[i][g]+1e-12 {
					dp[i][g], pick[i][g] = v, k
				}
			}
		}
	}
	out := make([]int, n)
	g := capacity
	for i := n; i >= 1; i-- {
		out[i-1] = pick[i][g]
		if k := out[i-1]; k >= 0 {
			g -= items[i-1][k].GPUs
		}
	}
	return out
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
		for i, st := range left {
			lo, hi := Range(s, st, p.Free)
			f, w := factor(st), weight(st, p)
			for n := lo; n <= hi; n++ {
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
