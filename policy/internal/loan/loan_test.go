package loan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMCKnapsack: small multiple-choice knapsacks by hand.
func TestMCKnapsack(t *testing.T) {
	a := []Choice{{1, 3}, {2, 5}}
	b := []Choice{{1, 4}, {2, 7}}
	cases := []struct {
		cap  int
		want []int
	}{
		{0, []int{-1, -1}},
		{1, []int{-1, 0}}, // B on 1 (4) beats A on 1 (3)
		{3, []int{0, 1}},  // A1 + B2 = 10 beats A2 + B1 = 9
		{4, []int{1, 1}},  // both on 2: 12
		{9, []int{1, 1}},
	}
	for _, tc := range cases {
		if got := MCKnapsack([][]Choice{a, b}, tc.cap); !slices.Equal(got, tc.want) {
			t.Errorf("capacity %d: %v, want %v", tc.cap, got, tc.want)
		}
	}
}

// TestMCKnapsackBruteForce: the DP's value equals the best of every
// combination on random small instances, within capacity.
func TestMCKnapsackBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := 0; it < 200; it++ {
		items := make([][]Choice, 1+r.IntN(4))
		for i := range items {
			for range r.IntN(4) {
				items[i] = append(items[i], Choice{GPUs: 1 + r.IntN(4), Value: float64(r.IntN(10))})
			}
		}
		capacity := r.IntN(9)
		pick := MCKnapsack(items, capacity)
		got, used := 0.0, 0
		for i, k := range pick {
			if k >= 0 {
				got += items[i][k].Value
				used += items[i][k].GPUs
			}
		}
		var best func(i, left int) float64
		best = func(i, left int) float64 {
			if i == len(items) {
				return 0
			}
			b := best(i+1, left)
			for _, c := range items[i] {
				if c.GPUs <= left {
					b = math.Max(b, c.Value+best(i+1, left-c.GPUs))
				}
			}
			return b
		}
		if want := best(0, capacity); used > capacity || math.Abs(got-want) > 1e-9 {
			t.Fatalf("instance %d: value %v using %d of %d, brute force %v", it, got, used, capacity, want)
		}
	}
}
