package elastic

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOpenNodesMatchesSort: openNodes (a counting sort, kept while the
// state does not change) lists the same nodes in the same order as the
// stable sort by free GPUs it replaced, on states the search goes through:
// random jobs given random shapes and taken off again, with and without
// interference.
func TestOpenNodesMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 9))
	for seed := range uint64(4) {
		for _, interference := range []bool{true, false} {
			p := NewPollux("fast")
			p.Interference = interference
			pr := newPxProblem(pxRandomSnap(seed, 24, 4, 40), p)
			s := pr.newState()
			for step := range 400 {
				j := rng.IntN(len(pr.jobs))
				s.set(j, nil)
				if rng.IntN(3) > 0 {
					s.openNodes(pr.jobs[j].typ)
					if row := s.spread(1+rng.IntN(8), 1+rng.IntN(3)); row != nil && s.fits(j, row) {
						s.set(j, row)
					} else if row := s.single(pr.jobs[j].typ, 1+rng.IntN(4)); row != nil {
						s.set(j, row)
					}
				}
				for ty := range pr.types {
					// The sort it replaced.
					var want []int
					wantMax := 0
					for i, nd := range pr.nodes {
						if nd.typ != ty || s.free[i] == 0 {
							continue
						}
						wantMax = max(wantMax, s.free[i])
						if !interference || s.dist[i] < 0 {
							want = append(want, i)
						}
					}
					slices.SortStableFunc(want, func(a, b int) int { return -cmp.Compare(s.free[a], s.free[b]) })
					for range 2 { // the second answer comes from the kept one
						if got := s.openNodes(ty); got != wantMax || !slices.Equal(s.cand, want) {
							t.Fatalf("seed %d step %d type %d: openNodes %d %v, sort %d %v", seed, step, ty, got, s.cand, wantMax, want)
						}
					}
				}
			}
		}
	}
}
