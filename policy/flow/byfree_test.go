package flow

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestByFree: byFree's order of the nodes is the stable sort by free GPUs
// (most first, ties in the nodes' order) it replaced, on random clusters
// (node IDs in any order, free counts with many ties, some negative).
func TestByFree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	var m flowMem
	for round := range 2000 {
		n := r.IntN(40)
		free := make([]int, n+r.IntN(5))
		for i := range free {
			free[i] = r.IntN(9) - r.IntN(2)
		}
		nodes := r.Perm(len(free))[:n]
		want := slices.Clone(nodes)
		slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(free[b], free[a]) })
		if got := m.byFree(nodes, free); !slices.Equal(got, want) {
			t.Fatalf("round %d: free %v, nodes %v: got %v, want %v", round, free, nodes, got, want)
		}
	}
}
