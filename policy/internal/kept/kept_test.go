package kept

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// item is a key with a tag naming the item (unique), so that tests see
// which of two equal keys came first.
type item struct {
	key, tag int
}

func byKey(a, b item) int { return cmp.Compare(a.key, b.key) }

// byKeyTag is a total order: the key, then the tag.
func byKeyTag(a, b item) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.tag, b.tag)
}

// nearly returns n items sorted by key, keys drawn from [0, keys) (ties
// when keys < n), then stirred: each item swapped with one up to far
// places on with probability p.
func nearly(r *rand.Rand, n, keys, far int, p float64) []item {
	a := make([]item, n)
	for i := range a {
		a[i] = item{key: r.IntN(keys), tag: i}
	}
	slices.SortStableFunc(a, byKey)
	for i := range a {
		if r.Float64() < p {
			j := min(n-1, i+r.IntN(far+1))
			a[i], a[j] = a[j], a[i]
		}
	}
	return a
}

// TestInsertionSorted: on a nearly sorted slice the pass gives what a
// stable sort gives, ties in their order; where it gives up the slice is
// a permutation of itself. Both happen over the random inputs.
func TestInsertionSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sorted, gaveUp := 0, 0
	for round := range 3000 {
		n := r.IntN(60)
		p := []float64{0, 0.05, 0.3, 1}[round%4]
		a := nearly(r, n, 1+r.IntN(2*n+1), 1+r.IntN(8), p)
		want := slices.Clone(a)
		slices.SortStableFunc(want, byKey)
		got := slices.Clone(a)
		if InsertionSorted(got, byKey) {
			sorted++
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: %v\nsorted to %v\nwant %v", round, a, got, want)
			}
			continue
		}
		gaveUp++
		slices.SortStableFunc(got, byKeyTag)
		slices.SortStableFunc(want, byKeyTag)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: gave up on %v leaving %v, not a permutation", round, a, got)
		}
	}
	if sorted < 1000 || gaveUp < 100 {
		t.Fatalf("sorted %d, gave up %d: the inputs do not exercise both", sorted, gaveUp)
	}
	// Reversed, it gives up; sorted, it moves nothing.
	rev := []item{{5, 0}, {4, 1}, {3, 2}, {2, 3}, {1, 4}, {0, 5}}
	if InsertionSorted(rev, byKey) {
		t.Fatalf("reversed: the pass should give up, got %v", rev)
	}
}

// TestMergeInto: the merge of two sorted slices is the stable sort of the
// first followed by the second, ties between them with the first's first.
func TestMergeInto(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 3000 {
		na, nb := r.IntN(30), r.IntN(30)
		keys := 1 + r.IntN(20)
		a, b := make([]item, na), make([]item, nb)
		for i := range a {
			a[i] = item{r.IntN(keys), i}
		}
		for i := range b {
			b[i] = item{r.IntN(keys), na + i}
		}
		slices.SortStableFunc(a, byKey)
		slices.SortStableFunc(b, byKey)
		want := slices.SortedStableFunc(slices.Values(slices.Concat(a, b)), byKey)
		dst := make([]item, r.IntN(3), 64)
		for i := range dst {
			dst[i] = item{-1, -1 - i}
		}
		got := MergeInto(dst, a, b, byKey)
		if !slices.Equal(got[len(dst):], want) || !slices.Equal(got[:len(dst)], dst) {
			t.Fatalf("round %d: merge of %v and %v after %v: %v, want %v", round, a, b, dst, got, want)
		}
	}
}

// TestSortRounds drives an order through many rounds as a policy does:
// items leave, come and have their keys moved (a few far, most a
// little, some not at all); each round starts from the last round's
// order of the items still there, followed by the newcomers, and must
// equal the full stable sort of this round's items (by key, then tag: a
// total order).
func TestSortRounds(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 5))
		var live []item // this round's items, in no particular order
		var order []item
		var buf []item
		tag, merged := 0, 0
		for round := range 300 {
			// Leave.
			live = slices.DeleteFunc(live, func(item) bool { return r.Float64() < 0.1 })
			// Move keys.
			for i := range live {
				switch x := r.Float64(); {
				case x < 0.02:
					live[i].key = r.IntN(1000)
				case x < 0.3:
					live[i].key += r.IntN(7) - 3
				}
			}
			// Come.
			came := r.IntN(8)
			if round%50 == 0 {
				came = 40
			}
			first := tag
			for range came {
				live = append(live, item{r.IntN(1000), tag})
				tag++
			}
			// The last order of the items still there (their keys now),
			// then the newcomers.
			now := make(map[int]item, len(live))
			for _, it := range live {
				now[it.tag] = it
			}
			a := make([]item, 0, len(live))
			for _, it := range order {
				if x, ok := now[it.tag]; ok {
					a = append(a, x)
				}
			}
			m := len(a)
			for _, it := range live {
				if it.tag >= first {
					a = append(a, it)
				}
			}
			// The merge runs when a newcomer sorts before the last kept item.
			if m > 0 && m < len(a) && slices.ContainsFunc(a[m:], func(x item) bool { return byKeyTag(x, a[m-1]) < 0 }) {
				merged++
			}
			buf = Sort(a, m, byKeyTag, buf)
			want := slices.SortedStableFunc(slices.Values(live), byKeyTag)
			if !slices.Equal(a, want) {
				t.Fatalf("seed %d round %d: kept %v\nwant %v", seed, round, a, want)
			}
			if len(buf) != 0 || slices.ContainsFunc(buf[:cap(buf)], func(x item) bool { return x != item{} }) {
				t.Fatalf("seed %d round %d: buf handed back holding %v", seed, round, buf[:cap(buf)])
			}
			order = a
		}
		if merged < 100 {
			t.Fatalf("seed %d: %d rounds merged: the rounds do not exercise the merge", seed, merged)
		}
	}
}
