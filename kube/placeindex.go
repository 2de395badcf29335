package kube

import (
	"math/bits"

	"github.com/tide-sched/tide/cluster"
)

// freeIndex files a cluster's nodes by GPU type and by how many GPUs the
// placer may still give on each, so that workerPlacer finds a worker's
// best-fit node without looking at every node: scanning them all for
// each of a drain's jobs made one round's decision grow with nodes x jobs
// (16.8 s for 40,000 pending pods on 5,000 nodes at load 30, most of it
// that scan). The nodes of one type and free count are a bitset in node
// order, so the first node found in the fullest bucket is the one the
// scan would pick: fewest free GPUs, then the lowest node index.
type freeIndex struct {
	types  map[string]int // GPU type -> its number
	typeOf []int          // node -> its type's number
	at     []int          // node -> the free count it is filed under (-1: none)
	sets   [][][]uint64   // [type][free] -> bitset of nodes, nil while empty
	count  [][]int        // [type][free] -> nodes filed there
	words  int            // length of a bitset
}

// newFreeIndex files every node of c under free[node].
func newFreeIndex(c *cluster.Cluster, free []int) *freeIndex {
	x := &freeIndex{types: map[string]int{}, typeOf: make([]int, len(c.Nodes)), at: make([]int, len(c.Nodes)),
		words: (len(c.Nodes) + 63) / 64}
	top := 0
	for i, n := range c.Nodes {
		t, ok := x.types[n.GPUType]
		if !ok {
			t = len(x.types)
			x.types[n.GPUType] = t
		}
		x.typeOf[i] = t
		top = max(top, n.GPUs)
	}
	x.sets = make([][][]uint64, len(x.types))
	x.count = make([][]int, len(x.types))
	for t := range x.sets {
		x.sets[t] = make([][]uint64, top+1)
		x.count[t] = make([]int, top+1)
	}
	for i := range c.Nodes {
		x.at[i] = -1
		x.move(i, free[i])
	}
	return x
}

// move files node i under f free GPUs (none when f is out of range: a
// node with no GPU free is never picked).
func (x *freeIndex) move(i, f int) {
	t, old := x.typeOf[i], x.at[i]
	if f < 0 || f >= len(x.sets[t]) {
		f = -1
	}
	if f == old {
		return
	}
	w, bit := i/64, uint64(1)<<(i%64)
	if old >= 0 {
		x.sets[t][old][w] &^= bit
		x.count[t][old]--
	}
	if f >= 0 {
		if x.sets[t][f] == nil {
			x.sets[t][f] = make([]uint64, x.words)
		}
		x.sets[t][f][w] |= bit
		x.count[t][f]++
	}
	x.at[i] = f
}

// best is the node of type typ with the fewest free GPUs, at least g, that
// ok accepts (the lowest index among equals), or -1. ok is asked in that
// order, of every node before the one returned.
func (x *freeIndex) best(typ string, g int, ok func(i int) bool) int {
	t, known := x.types[typ]
	if !known {
		return -1
	}
	for f := max(g, 0); f < len(x.sets[t]); f++ {
		if x.count[t][f] == 0 {
			continue
		}
		for w, word := range x.sets[t][f] {
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				if ok(i) {
					return i
				}
				word &= word - 1
			}
		}
	}
	return -1
}
