package place

// The placers' free lists as they were before they were kept from one
// placement to the next (a scan of every GPU and node per placement), kept
// here as the reference that TestIncrementalMatchesScan compares with.

import (
	"sort"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// refMap tracks free GPUs per node during one placement.
type refMap struct {
	c        *cluster.Cluster
	free     [][]cluster.GPUID // node -> free GPU ids, ascending
	count    []int             // GPU type index (cluster.GPUTypes) -> free GPUs
	nodeType []int             // node -> GPU type index
	busy     []bool            // GPU -> kept by its holder
	all      []cluster.GPUID   // backing array of free
}

// typeIdx is t's index in the cluster's GPU types, -1 if it has none.
func (f *refMap) typeIdx(t string) int {
	for k, u := range f.c.GPUTypes() {
		if u == t {
			return k
		}
	}
	return -1
}

// start marks every GPU free except those kept by jobs whose assignment is
// unchanged, and returns the kept placements.
func refStart(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) (*refMap, map[string][]cluster.GPUID) {
	f := &refMap{c: c}
	f.busy = grow(f.busy, c.TotalGPUs())
	busy := f.busy
	out := make(map[string][]cluster.GPUID, len(run))
	for _, a := range run {
		h := held[a.Job]
		if len(h) == 0 || len(h) != a.GPUs {
			continue
		}
		if a.GPUType != "" && c.NodeOf(h[0]).GPUType != a.GPUType {
			continue
		}
		if !a.Fits(c, h) || (a.Site != "" && c.NodeOf(h[0]).Site != a.Site) {
			continue
		}
		out[a.Job] = h
		for _, g := range h {
			busy[g] = true
		}
	}
	f.fill(busy)
	return f, out
}

// fill makes every GPU that busy does not mark free.
func (f *refMap) fill(busy []bool) {
	c := f.c
	f.nodeType = f.nodeType[:0]
	for i := range c.Nodes {
		f.nodeType = append(f.nodeType, f.typeIdx(c.Nodes[i].GPUType))
	}
	// One backing array for every node's free list.
	f.free = grow(f.free, len(c.Nodes))
	f.count = grow(f.count, len(c.GPUTypes()))
	all := f.all[:0]
	for i, n := range c.Nodes {
		from := len(all)
		for k := 0; k < n.GPUs; k++ {
			if g := n.First + cluster.GPUID(k); !busy[g] {
				all = append(all, g)
			}
		}
		f.free[n.ID] = all[from:len(all):len(all)]
		f.count[f.nodeType[i]] += len(all) - from
	}
	f.all = all
}

// available counts free GPUs of type t ("" = any type; then the type with
// the most free GPUs is returned with its count).
func (f *refMap) available(t string) (string, int) {
	if t != "" {
		if k := f.typeIdx(t); k >= 0 {
			return t, f.count[k]
		}
		return t, 0
	}
	best, bestN := "", -1
	for k, typ := range f.c.GPUTypes() {
		if f.count[k] > bestN {
			best, bestN = typ, f.count[k]
		}
	}
	return best, bestN
}

// take removes k free GPUs from node n (lowest ids first) and returns a
// copy of them (the free lists are scratch).
func (f *refMap) take(n, k int) []cluster.GPUID {
	f.count[f.nodeType[n]] -= k
	g := append([]cluster.GPUID(nil), f.free[n][:k]...)
	f.free[n] = f.free[n][k:]
	return g
}

// mostFree takes k GPUs of type t from the nodes with the most free GPUs.
func (f *refMap) mostFree(t string, k int) []cluster.GPUID {
	var gpus []cluster.GPUID
	for len(gpus) < k {
		best := -1
		for _, nd := range f.c.Nodes {
			if nd.GPUType == t && len(f.free[nd.ID]) > 0 && (best < 0 || len(f.free[nd.ID]) > len(f.free[best])) {
				best = nd.ID
			}
		}
		gpus = append(gpus, f.take(best, min(len(f.free[best]), k-len(gpus)))...)
	}
	return gpus
}

// exact takes the GPUs a.Nodes names, or nothing when any of those nodes
// lacks them (or has the wrong type).
func (f *refMap) exact(a engine.Assignment) []cluster.GPUID {
	for i, n := range a.Nodes {
		if n.Node < 0 || n.Node >= len(f.free) || n.GPUs < 1 || len(f.free[n.Node]) < n.GPUs ||
			(a.GPUType != "" && f.c.Nodes[n.Node].GPUType != a.GPUType) ||
			listedBefore(a.Nodes[:i], n.Node) {
			return nil
		}
	}
	var gs []cluster.GPUID
	for _, n := range a.Nodes {
		gs = append(gs, f.take(n.Node, n.GPUs)...)
	}
	return gs
}

// placeEach keeps the jobs whose assignment is unchanged and, in plan order,
// gives each other job k GPUs of type t from pick, when that many are free.
func refPlaceEach(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment,
	pick func(f *refMap, t string, k int) []cluster.GPUID) map[string][]cluster.GPUID {
	f, out := refStart(c, held, run)
	for _, a := range run {
		if _, kept := out[a.Job]; kept {
			continue
		}
		if gs := f.place(a, pick); gs != nil {
			out[a.Job] = gs
		}
	}
	return out
}

// addEach is placeEach for engine.Adder: every GPU busy marks is kept by
// its holder and each job of add is placed, in order, around them.
func refAddEach(c *cluster.Cluster, busy []bool, add []engine.Assignment,
	pick func(f *refMap, t string, k int) []cluster.GPUID) map[string][]cluster.GPUID {
	f := &refMap{c: c}
	f.fill(busy)
	out := make(map[string][]cluster.GPUID, len(add))
	for _, a := range add {
		if gs := f.place(a, pick); gs != nil {
			out[a.Job] = gs
		}
	}
	return out
}

// place gives a the GPUs pick chooses (or a.Nodes names), nil when they
// are not free.
func (f *refMap) place(a engine.Assignment, pick func(f *refMap, t string, k int) []cluster.GPUID) []cluster.GPUID {
	if len(a.Nodes) > 0 {
		return f.exact(a)
	}
	if len(f.c.Sites()) > 1 {
		return f.inSite(a, pick)
	}
	t, n := f.available(a.GPUType)
	if n < a.GPUs {
		return nil
	}
	return pick(f, t, a.GPUs)
}

func (f *refMap) pack(t string, k int) []cluster.GPUID {
	c := f.c
	// 1. One node, best fit.
	best := -1
	for _, nd := range c.Nodes {
		if nd.GPUType != t {
			continue
		}
		if fr := len(f.free[nd.ID]); fr >= k && (best < 0 || fr < len(f.free[best])) {
			best = nd.ID
		}
	}
	if best >= 0 {
		return f.take(best, k)
	}
	// 2. One rack, fewest nodes.
	bestRack, bestNodes := -1, 0
	for r := range c.Racks() {
		nodes := f.byFree(t, r)
		got, used := 0, 0
		for _, id := range nodes {
			if got >= k {
				break
			}
			got += len(f.free[id])
			used++
		}
		if got >= k && (bestRack < 0 || used < bestNodes) {
			bestRack, bestNodes = r, used
		}
	}
	nodes := f.byFree(t, -1)
	if bestRack >= 0 {
		nodes = f.byFree(t, bestRack)
	}
	// 3. (or 2.) Fill from the fullest free nodes.
	var gpus []cluster.GPUID
	for _, id := range nodes {
		if len(gpus) == k {
			break
		}
		gpus = append(gpus, f.take(id, min(len(f.free[id]), k-len(gpus)))...)
	}
	return gpus
}

// byFree lists nodes of type t with free GPUs (in rack r, or all when r < 0),
// most free first, then by node index.
func (f *refMap) byFree(t string, r int) []int {
	var ids []int
	for _, nd := range f.c.Nodes {
		if nd.GPUType == t && len(f.free[nd.ID]) > 0 && (r < 0 || nd.RackIdx == r) {
			ids = append(ids, nd.ID)
		}
	}
	sort.SliceStable(ids, func(a, b int) bool { return len(f.free[ids[a]]) > len(f.free[ids[b]]) })
	return ids
}

// inSite places a on a multi-site cluster: within a.Site when set, else in
// the first site (cluster order) that has enough free GPUs of the type the
// job asks for (or of its most plentiful free type there). On an edge site a
// job takes one server: the best-fitting one. Other sites' nodes are hidden
// from pick while it runs, so no placer spreads a job across sites. It
// returns nil when no site can hold the job now.
func (f *refMap) inSite(a engine.Assignment, pick func(f *refMap, t string, k int) []cluster.GPUID) []cluster.GPUID {
	c := f.c
	for _, site := range c.Sites() {
		if a.Site != "" && site.Name != a.Site {
			continue
		}
		count := map[string]int{}
		for _, id := range site.Nodes {
			count[c.Nodes[id].GPUType] += len(f.free[id])
		}
		t := a.GPUType
		if t == "" {
			for _, typ := range c.GPUTypes() {
				if t == "" || count[typ] > count[t] {
					t = typ
				}
			}
		}
		if count[t] < a.GPUs {
			continue
		}
		if site.Kind == cluster.SiteEdge {
			best := -1
			for _, id := range site.Nodes {
				if n := len(f.free[id]); c.Nodes[id].GPUType == t && n >= a.GPUs && (best < 0 || n < len(f.free[best])) {
					best = id
				}
			}
			if best < 0 {
				continue
			}
			return f.take(best, a.GPUs)
		}
		// Hide the other sites' free GPUs from pick, then restore them.
		saved := make(map[int][]cluster.GPUID)
		for i := range c.Nodes {
			if c.Nodes[i].Site != site.Name && len(f.free[i]) > 0 {
				saved[i] = f.free[i]
				f.count[f.nodeType[i]] -= len(f.free[i])
				f.free[i] = nil
			}
		}
		gs := pick(f, t, a.GPUs)
		for i, fr := range saved {
			f.free[i] = fr
			f.count[f.nodeType[i]] += len(fr)
		}
		return gs
	}
	return nil
}
