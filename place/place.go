// Package place holds the placers: they turn a plan's GPU counts into
// concrete GPUs (engine.Placer).
package place

import (
	"bytes"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"unsafe"

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

// freeMap tracks free GPUs per node during one placement. It outlives the
// placement: the pool hands the same one back for the next placement on the
// same cluster, and refresh brings it up to date by rebuilding only the
// nodes whose GPUs were taken or freed since (the engine's busy mask is
// compared with the one the lists were built from). Its indexes answer the
// placers' questions (the best-fitting node, the nodes with the most free
// GPUs, a rack's nodes by free GPUs) without a scan of every node.
type freeMap struct {
	c        *cluster.Cluster
	free     [][]cluster.GPUID // node -> free GPU ids, ascending (a window of all)
	count    []int             // GPU type index (cluster.GPUTypes) -> free GPUs
	nodeType []int             // node -> GPU type index
	busy     []bool            // GPU -> kept by its holder (start's scratch)
	all      []cluster.GPUID   // backing array of free: node n's at all[n.First:]
	// seen marks the GPUs the free lists hold as not free: busy when the
	// lists were last brought up to date, or taken since.
	seen  []bool
	ready bool // free, count, seen and the indexes describe c
	// bucket[t][k] holds the nodes of type t with exactly k free GPUs
	// (k >= 1); rackN[r][off[t]+k] counts them in rack r.
	bucket [][]nodeSet
	off    []int
	rackN  [][]int
	ids    []int // scratch: nodes chosen by pack
}

// freeMaps recycles the placements' memory and state: the free lists are
// scratch (take copies what it hands out) kept in step with the busy mask,
// so a round's placement costs what changed since the last one.
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
	f.refresh(busy)
	return f, out
}

// newFreeMap returns a freeMap for c from the pool.
func newFreeMap(c *cluster.Cluster) *freeMap {
	f := freeMaps.Get().(*freeMap)
	if f.c != c {
		f.c = c
		f.ready = false
		f.nodeType = f.nodeType[:0]
		for i := range c.Nodes {
			f.nodeType = append(f.nodeType, f.typeIdx(c.Nodes[i].GPUType))
		}
	}
	return f
}

// refresh makes free exactly the GPUs that busy does not mark. Only the
// nodes on which busy differs from seen are rebuilt; the first refresh on a
// cluster builds everything.
func (f *freeMap) refresh(busy []bool) {
	if !f.ready {
		f.build(busy)
		return
	}
	// Compare a block at a time (bytes.Equal reads words), then find the
	// nodes that differ inside a block that does.
	now, was := asBytes(busy), asBytes(f.seen[:len(busy)])
	const block = 512
	for lo := 0; lo < len(now); lo += block {
		hi := min(lo+block, len(now))
		if bytes.Equal(now[lo:hi], was[lo:hi]) {
			continue
		}
		for g := lo; g < hi; g++ {
			if now[g] != was[g] {
				n := f.c.NodeOf(cluster.GPUID(g))
				f.rebuild(n, busy)
				g = int(n.First) + n.GPUs - 1
			}
		}
	}
}

// asBytes is b's memory as bytes: a bool is one byte, 0 or 1, so two masks
// are equal exactly when their bytes are.
func asBytes(b []bool) []byte {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))
}

// build sets every list and index up from busy.
func (f *freeMap) build(busy []bool) {
	c := f.c
	types := len(c.GPUTypes())
	f.free = grow(f.free, len(c.Nodes))
	f.count = grow(f.count, types)
	f.all = grow(f.all, c.TotalGPUs())
	f.seen = grow(f.seen, c.TotalGPUs())
	most := grow(f.off, types+1) // most GPUs on a node, by type; then offsets
	for i, n := range c.Nodes {
		most[f.nodeType[i]] = max(most[f.nodeType[i]], n.GPUs)
	}
	f.bucket = grow(f.bucket, types)
	for t := range f.bucket {
		f.bucket[t] = grow(f.bucket[t], most[t]+1)
		for k := range f.bucket[t] {
			f.bucket[t][k].reset(len(c.Nodes))
		}
	}
	sum := 0
	for t := 0; t <= types; t++ {
		m := most[t]
		most[t] = sum
		sum += m + 1
	}
	f.off = most
	f.rackN = grow(f.rackN, len(c.Racks()))
	for r := range f.rackN {
		f.rackN[r] = grow(f.rackN[r], sum)
	}
	for i := range c.Nodes {
		f.free[i] = nil
		f.rebuild(&c.Nodes[i], busy)
	}
	f.ready = true
}

// rebuild lists node n's free GPUs anew from busy.
func (f *freeMap) rebuild(n *cluster.Node, busy []bool) {
	lo, hi := int(n.First), int(n.First)+n.GPUs
	copy(f.seen[lo:hi], busy[lo:hi])
	fr := f.all[lo:lo:hi]
	for g := lo; g < hi; g++ {
		if !busy[g] {
			fr = append(fr, cluster.GPUID(g))
		}
	}
	f.setFree(n.ID, fr)
}

// setFree makes fr node n's free list, keeping the counts and indexes.
func (f *freeMap) setFree(n int, fr []cluster.GPUID) {
	was, now := len(f.free[n]), len(fr)
	f.free[n] = fr
	if was == now {
		return
	}
	t := f.nodeType[n]
	f.count[t] += now - was
	rack := f.rackN[f.c.Nodes[n].RackIdx][f.off[t]:]
	if was > 0 {
		f.bucket[t][was].del(n)
		rack[was]--
	}
	if now > 0 {
		f.bucket[t][now].add(n)
		rack[now]++
	}
}

// done gives f back for the next placement.
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

// nodeSet is a set of node indexes, a bitset that knows its size.
type nodeSet struct {
	w []uint64
	n int
}

func (s *nodeSet) reset(nodes int) {
	s.w = grow(s.w, (nodes+63)/64)
	s.n = 0
}

func (s *nodeSet) add(i int) { s.w[i>>6] |= 1 << (i & 63); s.n++ }
func (s *nodeSet) del(i int) { s.w[i>>6] &^= 1 << (i & 63); s.n-- }

// next is the least member >= i, or -1.
func (s *nodeSet) next(i int) int {
	if s.n == 0 || i>>6 >= len(s.w) {
		return -1
	}
	k := i >> 6
	if w := s.w[k] >> (i & 63); w != 0 {
		return i + bits.TrailingZeros64(w)
	}
	for k++; k < len(s.w); k++ {
		if s.w[k] != 0 {
			return k<<6 + bits.TrailingZeros64(s.w[k])
		}
	}
	return -1
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
	var dst []cluster.GPUID // nil for k = 0
	if k > 0 {
		dst = make([]cluster.GPUID, 0, k)
	}
	return f.takeTo(dst, n, k)
}

// takeTo is take appending the GPUs to dst: a job's GPUs from several
// nodes go into one slice made for them all, not one per node.
func (f *freeMap) takeTo(dst []cluster.GPUID, n, k int) []cluster.GPUID {
	for _, id := range f.free[n][:k] {
		f.seen[id] = true
	}
	dst = append(dst, f.free[n][:k]...)
	f.setFree(n, f.free[n][k:])
	return dst
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
func (MostFree) PlaceAdded(c *cluster.Cluster, busy []bool, add []engine.Assignment, placed map[string][]cluster.GPUID) {
	addEach(c, busy, add, placed, (*freeMap).mostFree)
}

// mostFree takes k GPUs of type t from the nodes with the most free GPUs.
func (f *freeMap) mostFree(t string, k int) []cluster.GPUID {
	ti := f.typeIdx(t)
	if ti < 0 {
		return nil
	}
	var gpus []cluster.GPUID
	for len(gpus) < k {
		best := -1
		for n := len(f.bucket[ti]) - 1; n > 0 && best < 0; n-- {
			best = f.bucket[ti][n].next(0)
		}
		if best < 0 {
			break
		}
		if gpus == nil {
			gpus = make([]cluster.GPUID, 0, k) // nil when nothing is free
		}
		gpus = f.takeTo(gpus, best, min(len(f.free[best]), k-len(gpus)))
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
func (Pack) PlaceAdded(c *cluster.Cluster, busy []bool, add []engine.Assignment, placed map[string][]cluster.GPUID) {
	addEach(c, busy, add, placed, (*freeMap).pack)
}

// listedBefore reports whether node is among ns: a plan listing a node
// twice asks for a shape no GPUs have (engine.Assignment.Fits counts each
// node's GPUs once), and taking from it twice could overdraw it.
func listedBefore(ns []engine.NodeGPUs, node int) bool {
	for _, n := range ns {
		if n.Node == node {
			return true
		}
	}
	return false
}

// exact takes the GPUs a.Nodes names, or nothing when any of those nodes
// lacks them (or has the wrong type, or is listed twice).
func (f *freeMap) exact(a engine.Assignment) []cluster.GPUID {
	for i, n := range a.Nodes {
		if n.Node < 0 || n.Node >= len(f.free) || n.GPUs < 1 || len(f.free[n.Node]) < n.GPUs ||
			(a.GPUType != "" && f.c.Nodes[n.Node].GPUType != a.GPUType) ||
			listedBefore(a.Nodes[:i], n.Node) {
			return nil
		}
	}
	k := 0
	for _, n := range a.Nodes {
		k += n.GPUs
	}
	gs := make([]cluster.GPUID, 0, k)
	for _, n := range a.Nodes {
		gs = f.takeTo(gs, n.Node, n.GPUs)
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
// its holder and each job of add is placed, in order, around them, into
// out (the caller's map, reused across rounds: no map is made per call).
func addEach(c *cluster.Cluster, busy []bool, add []engine.Assignment, out map[string][]cluster.GPUID,
	pick func(f *freeMap, t string, k int) []cluster.GPUID) {
	f := newFreeMap(c)
	defer f.done()
	f.refresh(busy)
	for _, a := range add {
		if gs := f.place(a, pick); gs != nil {
			out[a.Job] = gs
		}
	}
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

// pack is Pack's choice of k GPUs of type t (its doc comment).
func (f *freeMap) pack(t string, k int) []cluster.GPUID {
	ti := f.typeIdx(t)
	if ti < 0 || k <= 0 {
		return nil
	}
	b := f.bucket[ti]
	// 1. One node, best fit: the fewest free GPUs that hold k.
	for n := k; n < len(b); n++ {
		if best := b[n].next(0); best >= 0 {
			return f.take(best, k)
		}
	}
	// 2. One rack, fewest nodes (taking its nodes with the most free first).
	bestRack, bestNodes := -1, 0
	for r, counts := range f.rackN {
		counts = counts[f.off[ti] : f.off[ti]+len(b)]
		got, used := 0, 0
		for n := len(b) - 1; n > 0 && got < k; n-- {
			m := counts[n]
			if m == 0 {
				continue
			}
			need := min(m, (k-got+n-1)/n)
			got += need * n
			used += need
		}
		if got >= k && (bestRack < 0 || used < bestNodes) {
			bestRack, bestNodes = r, used
		}
	}
	// 3. (or 2.) Fill from the fullest free nodes, of the rack or anywhere.
	ids, got := f.ids[:0], 0
	for n := len(b) - 1; n > 0 && got < k; n-- {
		for id := b[n].next(0); id >= 0 && got < k; id = b[n].next(id + 1) {
			if bestRack < 0 || f.c.Nodes[id].RackIdx == bestRack {
				ids = append(ids, id)
				got += n
			}
		}
	}
	f.ids = ids
	if len(ids) == 0 {
		return nil
	}
	gpus := make([]cluster.GPUID, 0, k)
	for _, id := range ids {
		gpus = f.takeTo(gpus, id, min(len(f.free[id]), k-len(gpus)))
	}
	return gpus
}
