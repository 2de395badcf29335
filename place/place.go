// Package place holds the placers: they turn a plan's GPU counts into
// concrete GPUs (engine.Placer).
package place

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Lookup returns the placer called name: "pack" (default), "most-free" or
// "hived[:vc=TENANT@GPUS[@TYPE]/...]" (HiveD's cells and virtual clusters).
func Lookup(name string) (engine.Placer, error) {
	if base, opts, _ := strings.Cut(name, ":"); base == "hived" {
		return ParseHiveD(opts)
	}
	switch name {
	case "", "pack":
		return Pack{}, nil
	case "most-free":
		return MostFree{}, nil
	}
	return nil, fmt.Errorf("unknown placer %q: want pack, most-free or hived[:vc=TENANT@GPUS/...]", name)
}

// freeMap tracks free GPUs per node during one placement.
type freeMap struct {
	c        *cluster.Cluster
	free     [][]cluster.GPUID // node -> free GPU ids, ascending
	count    []int             // GPU type index (cluster.GPUTypes) -> free GPUs
	nodeType []int             // node -> GPU type index
	busy     []bool            // GPU -> kept by its holder
	all      []cluster.GPUID   // backing array of free
}

// freeMaps recycles the per-placement memory: a placement's free lists
// are scratch (take copies what it hands out), so rounds reuse them.
var freeMaps = sync.Pool{New: func() any { return new(freeMap) }}

// typeIdx is t's index in the cluster's GPU types, -1 if it has none.
func (f *freeMap) typeIdx(t string) int {
	for k, u := range f.c.GPUTypes() {
		if u == t {
			return k
		}
	}
	return -1
}

// start marks every GPU free except those kept by jobs whose assignment is
// unchanged, and returns the kept placements.
func start(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) (*freeMap, map[string][]cluster.GPUID) {
	f := newFreeMap(c)
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

// newFreeMap returns a freeMap for c from the pool.
func newFreeMap(c *cluster.Cluster) *freeMap {
	f := freeMaps.Get().(*freeMap)
	if f.c != c {
		f.c = c
		f.nodeType = f.nodeType[:0]
		for i := range c.Nodes {
			f.nodeType = append(f.nodeType, f.typeIdx(c.Nodes[i].GPUType))
		}
	}
	return f
}

// fill makes every GPU that busy does not mark free.
func (f *freeMap) fill(busy []bool) {
	c := f.c
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

// done gives f's memory back for the next placement.
func (f *freeMap) done() { freeMaps.Put(f) }

// grow returns s resized to n zero values, reusing its memory.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// available counts free GPUs of type t ("" = any type; then the type with
// the most free GPUs is returned with its count).
func (f *freeMap) available(t string) (string, int) {
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
func (f *freeMap) take(n, k int) []cluster.GPUID {
	f.count[f.nodeType[n]] -= k
	g := append([]cluster.GPUID(nil), f.free[n][:k]...)
	f.free[n] = f.free[n][k:]
	return g
}

// MostFree is the Pollux artifact's placer: a job takes GPUs from the node
// with the most free GPUs, then the next, until it has enough (ties go to
// the lowest node index). Jobs are placed in plan order.
type MostFree struct{}

// Name implements engine.Placer.
func (MostFree) Name() string { return "most-free" }

// Place implements engine.Placer.
func (MostFree) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	return placeEach(c, held, run, (*freeMap).mostFree)
}

// PlaceAdded implements engine.Adder.
func (MostFree) PlaceAdded(c *cluster.Cluster, busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
	return addEach(c, busy, add, (*freeMap).mostFree)
}

// mostFree takes k GPUs of type t from the nodes with the most free GPUs.
func (f *freeMap) mostFree(t string, k int) []cluster.GPUID {
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

// Pack is the default, topology-aware consolidating placer. For each job, in
// plan order, it tries in turn:
//  1. one node: the node with the fewest free GPUs that still fits the job
//     (best fit keeps whole nodes free for larger jobs);
//  2. one rack: the rack needing the fewest nodes when its nodes are used
//     fullest first;
//  3. anywhere: nodes with the most free GPUs first.
//
// A job asking for no GPU type gets the type with the most free GPUs.
// Ties go to the lowest node or rack index, so placement is deterministic.
type Pack struct{}

// Name implements engine.Placer.
func (Pack) Name() string { return "pack" }

// Place implements engine.Placer.
func (Pack) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	return placeEach(c, held, run, (*freeMap).pack)
}

// PlaceAdded implements engine.Adder.
func (Pack) PlaceAdded(c *cluster.Cluster, busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
	return addEach(c, busy, add, (*freeMap).pack)
}

// exact takes the GPUs a.Nodes names, or nothing when any of those nodes
// lacks them (or has the wrong type).
func (f *freeMap) exact(a engine.Assignment) []cluster.GPUID {
	for _, n := range a.Nodes {
		if n.Node < 0 || n.Node >= len(f.free) || n.GPUs < 1 || len(f.free[n.Node]) < n.GPUs ||
			(a.GPUType != "" && f.c.Nodes[n.Node].GPUType != a.GPUType) {
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
func placeEach(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment,
	pick func(f *freeMap, t string, k int) []cluster.GPUID) map[string][]cluster.GPUID {
	f, out := start(c, held, run)
	defer f.done()
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
func addEach(c *cluster.Cluster, busy []bool, add []engine.Assignment,
	pick func(f *freeMap, t string, k int) []cluster.GPUID) map[string][]cluster.GPUID {
	f := newFreeMap(c)
	defer f.done()
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
func (f *freeMap) place(a engine.Assignment, pick func(f *freeMap, t string, k int) []cluster.GPUID) []cluster.GPUID {
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

func (f *freeMap) pack(t string, k int) []cluster.GPUID {
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
func (f *freeMap) byFree(t string, r int) []int {
	var ids []int
	for _, nd := range f.c.Nodes {
		if nd.GPUType == t && len(f.free[nd.ID]) > 0 && (r < 0 || nd.RackIdx == r) {
			ids = append(ids, nd.ID)
		}
	}
	sort.SliceStable(ids, func(a, b int) bool { return len(f.free[ids[a]]) > len(f.free[ids[b]]) })
	return ids
}
