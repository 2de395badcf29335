package loan

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
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

// mcKnapsackPlain is the recurrence as DeepBoot states it, a full table
// over every capacity and every choice: the reference MCKnapsack's
// shortcuts must agree with, pick for pick.
func mcKnapsackPlain(items [][]Choice, capacity int) []int {
	capacity = max(capacity, 0)
	n := len(items)
	dp := make([][]float64, n+1)
	pick := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]float64, capacity+1)
		pick[i] = make([]int, capacity+1)
	}
	for i := 1; i <= n; i++ {
		for g := 0; g <= capacity; g++ {
			dp[i][g], pick[i][g] = dp[i-1][g], -1
			for k, c := range items[i-1] {
				if c.GPUs > g || c.GPUs < 0 {
					continue
				}
				if v := dp[i-1][g-c.GPUs] + c.Value; v > dp[i][g]+1e-12 {
					dp[i][g], pick[i][g] = v, k
				}
			}
		}
	}
	out := make([]int, n)
	g := capacity
	for i := n; i >= 1; i-- {
		out[i-1] = pick[i][g]
		if k := out[i-1]; k >= 0 {
			g -= items[i-1][k].GPUs
		}
	}
	return out
}

// TestMCKnapsackShortcuts: the capacity cut and the pruning of dominated
// choices give the plain recurrence's picks, ties included, on lists by
// GPU count (the callers' shape, with plateaus and falls as saturating
// speedups have), on lists in any order, and on pools far larger than the
// jobs' demand.
func TestMCKnapsackShortcuts(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	for it := 0; it < 3000; it++ {
		items := make([][]Choice, r.IntN(6))
		for i := range items {
			sorted := r.IntN(3) > 0
			g, v := r.IntN(3), 0.0
			for range r.IntN(7) {
				if sorted {
					g += r.IntN(3)
					v += float64(r.IntN(5) - 1) // plateaus and falls as well as rises
				} else {
					g, v = r.IntN(6)-r.IntN(2), float64(r.IntN(6))
				}
				items[i] = append(items[i], Choice{GPUs: g, Value: v})
			}
		}
		capacity := r.IntN(12)
		if r.IntN(4) == 0 {
			capacity = 50 + r.IntN(1000)
		}
		if got, want := MCKnapsack(items, capacity), mcKnapsackPlain(items, capacity); !slices.Equal(got, want) {
			t.Fatalf("instance %d, capacity %d, items %v: picks %v, the plain recurrence %v", it, capacity, items, got, want)
		}
	}
}

// TestCounts: every count within the budget; beyond it the least, the
// most and the powers of two between, in order and each once.
func TestCounts(t *testing.T) {
	walk := func(c Counts, lo, hi int) []int {
		var out []int
		for n := lo; n <= hi; n = c.Next(n, hi) {
			out = append(out, n)
		}
		return out
	}
	if got := walk(CountsFor(64, 160*64), 1, 6); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("within the budget: %v", got)
	}
	thin := CountsFor(2048, 100*2048)
	for _, c := range []struct {
		lo, hi int
		want   []int
	}{
		{1, 2048, []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}},
		{3, 20, []int{3, 4, 8, 16, 20}},
		{0, 5, []int{0, 1, 2, 4, 5}},
		{7, 7, []int{7}},
		{5, 4, nil},
	} {
		if got := walk(thin, c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("thinned %d..%d: %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// TestKnapsackReuse: one Knapsack solving instance after instance, large
// and small in turn (its tables then hold the last instance's values
// beyond this one's), gives the plain recurrence's picks each time, with
// items that try a few choices, 16 to 40 and over 255 (a pick table of two
// bytes a cell), and pools just short of the items' demand and far short
// of it (the rows kept narrow or wide).
func TestKnapsackReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 19))
	var k Knapsack
	for it := 0; it < 600; it++ {
		items := make([][]Choice, r.IntN(9))
		demand := 0
		for i := range items {
			most := 0
			switch r.IntN(7) {
			case 0: // many choices in any order: none is pruned
				for range 256 + r.IntN(60) {
					c := Choice{GPUs: r.IntN(9), Value: float64(r.IntN(40))}
					items[i] = append(items[i], c)
					most = max(most, c.GPUs)
				}
			case 1: // by GPUs, each worth more than the last: 16 to 40 tried
				g, v := r.IntN(2), 0.0
				for range 16 + r.IntN(25) {
					g += r.IntN(2)
					v += float64(1 + r.IntN(3))
					items[i] = append(items[i], Choice{GPUs: g, Value: v})
					most = max(most, g)
				}
			default: // by GPUs, fewest first, as the callers list them
				g, v := r.IntN(3), 0.0
				for range r.IntN(12) {
					g += r.IntN(4)
					v += float64(r.IntN(7) - 1)
					items[i] = append(items[i], Choice{GPUs: g, Value: v})
					most = max(most, g)
				}
			}
			demand += most
		}
		var capacity int
		switch r.IntN(3) {
		case 0:
			capacity = r.IntN(demand + 2)
		case 1:
			capacity = max(demand-r.IntN(4), 0) // just short: narrow rows
		default:
			capacity = demand + r.IntN(50)
		}
		want := mcKnapsackPlain(items, capacity)
		if got := k.Solve(items, capacity); !slices.Equal(got, want) {
			t.Fatalf("instance %d, capacity %d, items %v: picks %v, the plain recurrence %v", it, capacity, items, got, want)
		}
	}
}

// BenchmarkKnapsack: one Solve, reusing its Knapsack, on a pool of 10,000
// GPUs and 5,000 jobs that each try the thinned counts 1, 2, 4, ... up to
// 1 to 8 GPUs, values rising with a concave speedup: the jobs ask for
// about 1.9 times the pool.
func BenchmarkKnapsack(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	items := make([][]Choice, 5000)
	for i := range items {
		most := 1 << r.IntN(4)
		w := 0.5 + r.Float64()
		for n := 1; n <= most; n *= 2 {
			items[i] = append(items[i], Choice{GPUs: n, Value: w * math.Sqrt(float64(n))})
		}
	}
	var k Knapsack
	k.Solve(items, 10000)
	b.ResetTimer()
	for b.Loop() {
		k.Solve(items, 10000)
	}
}

// TestKnapsacksPinnedType: a job that pins a GPU type is an item only in
// the pools of its type; an unpinned one in every pool. The knapsacks went
// pool by pool whatever a job asked for, so the first pool's type went to
// jobs pinned to another, and the engine refused the plan.
func TestKnapsacksPinnedType(t *testing.T) {
	c, err := cluster.New([]cluster.Node{
		{Name: "a", Site: "train", GPUType: "a100", GPUs: 4},
		{Name: "v", Site: "train", GPUType: "v100", GPUs: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{Now: 600, Cluster: c, Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 4, "v100": 2}}
	for _, x := range []struct{ id, typ string }{{"v1", "v100"}, {"any", ""}, {"v2", "v100"}, {"v3", "v100"}, {"a1", "a100"}} {
		j := enginetest.Job(x.id).GPUs(1).Type(x.typ).Seconds(1000).Obj()
		s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: j.Work, FirstStart: -1, LastStart: -1, Finish: -1})
	}
	pools := Pools(s, false, nil)
	run, left := new(Speedups).Knapsacks(s, pools, s.Jobs,
		func(*engine.Status, Pool) float64 { return 1 }, func(*engine.Status) float64 { return 1 })
	got := map[string]string{}
	for _, a := range run {
		got[a.Job] = a.GPUType
	}
	// Two V100s for three V100 jobs: one waits, with A100s to spare.
	want := map[string]string{"v1": "v100", "v2": "v100", "any": "a100", "a1": "a100"}
	if !maps.Equal(got, want) || len(left) != 1 || left[0].Job.ID != "v3" {
		t.Errorf("types %v, left %d job(s); want %v and v3 left", got, len(left), want)
	}
	for _, st := range s.Jobs {
		for _, p := range pools {
			if lo, hi := RangeIn(s, st, p); p.Serves(st) != (lo <= hi) {
				t.Errorf("job %s in pool %s: RangeIn [%d, %d], Serves %v", st.Job.ID, p.Type, lo, hi, p.Serves(st))
			}
		}
	}
}
