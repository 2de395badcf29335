package elastic

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// pxKnapsackFull is the knapsack as it was before its rows were cut to
// the GPUs the jobs so far can use: every job's row covers every count up
// to the capacity. TestKnapsackMatchesFull compares the two.
func pxKnapsackFull(opts [][]pxPick, capacity int) ([]pxPick, float64) {
	dp, next := make([]float64, capacity+1), make([]float64, capacity+1)
	choice := make([]uint8, len(opts)*(capacity+1))
	for i, o := range opts {
		row := choice[i*(capacity+1) : (i+1)*(capacity+1)]
		for c := 0; c <= capacity; c++ {
			best, arg := math.Inf(1), 0
			for k, p := range o {
				if p.r > c {
					break
				}
				if v := dp[c-p.r] + p.cost; v < best {
					best, arg = v, k
				}
			}
			next[c], row[c] = best, uint8(arg)
		}
		dp, next = next, dp
	}
	picks := make([]pxPick, len(opts))
	c := capacity
	for i := len(opts) - 1; i >= 0; i-- {
		picks[i] = opts[i][choice[i*(capacity+1)+c]]
		c -= picks[i].r
	}
	return picks, dp[capacity]
}

// TestKnapsackMatchesFull: the knapsack with rows cut at the GPUs the jobs
// so far can use picks the same options at the same total cost, bit for
// bit, as the full table, on random option lists as options makes them
// (lightest first, from nothing at 0 GPUs, each cheaper than every lighter
// one, ties in cost and in GPUs included), capacities below, near and
// above what the jobs can use, and one scratch reused throughout.
func TestKnapsackMatchesFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 4))
	var sc pxScratch
	for iter := range 3000 {
		jobs := 1 + rng.IntN(30)
		opts := make([][]pxPick, jobs)
		most := 0
		for i := range opts {
			cost := float64(rng.IntN(8)) // small integers: many ties
			if rng.IntN(3) == 0 {
				cost = 10 * rng.Float64()
			}
			o := []pxPick{{cost: cost, n: i}} // nothing; n tells the options apart
			r := 0
			for range rng.IntN(6) {
				r += rng.IntN(3) // the same count twice sometimes
				if r == 0 {
					r = 1
				}
				cost -= float64(1 + rng.IntN(3))
				if rng.IntN(4) == 0 {
					cost += 0.5 * rng.Float64()
				}
				o = append(o, pxPick{r: r, n: i, keep: rng.IntN(5) == 0, cost: cost})
			}
			slices.SortStableFunc(o, func(a, b pxPick) int { return a.r - b.r })
			kept := o[:0]
			for _, p := range o {
				if len(kept) == 0 || p.cost < kept[len(kept)-1].cost {
					kept = append(kept, p)
				}
			}
			opts[i] = kept
			most += kept[len(kept)-1].r
		}
		capacity := rng.IntN(most + 2)
		if iter%3 == 0 {
			capacity = most + rng.IntN(20)
		}
		want, wantCost := pxKnapsackFull(opts, capacity)
		got, gotCost := sc.pxKnapsack(opts, capacity)
		if math.Float64bits(gotCost) != math.Float64bits(wantCost) || !slices.Equal(got, want) {
			t.Fatalf("iteration %d (capacity %d): picks %v cost %v, full table %v cost %v", iter, capacity, got, gotCost, want, wantCost)
		}
	}
}
