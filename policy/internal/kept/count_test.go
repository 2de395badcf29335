package kept

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestByCount compares ByCount with slices.SortStableFunc by key on random
// items with many ties, its memory reused from call to call (a longer
// call before a shorter one, counts left dirty).
func TestByCount(t *testing.T) {
	type item struct{ key, id int }
	var dst []item
	var counts []int
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		lo := r.IntN(20) - 10
		hi := lo + r.IntN(8)
		items := make([]item, r.IntN(60))
		for i := range items {
			items[i] = item{lo + r.IntN(hi-lo+1), i}
		}
		want := slices.Clone(items)
		slices.SortStableFunc(want, func(a, b item) int { return cmp.Compare(a.key, b.key) })
		dst, counts = ByCount(dst, items, func(x item) int { return x.key }, lo, hi, counts)
		if !slices.Equal(dst, want) {
			t.Fatalf("seed %d: %v, want %v", seed, dst, want)
		}
	}
}
