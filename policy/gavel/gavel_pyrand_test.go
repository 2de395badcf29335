package gavel

import "testing"

// TestPyRandom checks pyRandom against CPython 3.11: for each seed,
// random.Random(seed).random() and then randrange(n) for n = 1, 2, 3, 3, 2,
// 7, 1000, as printed by
//
//	python3 -c 'import random; r = random.Random(SEED); print(r.random(), [r.randrange(n) for n in (1,2,3,3,2,7,1000)])'
func TestPyRandom(t *testing.T) {
	ns := []int{1, 2, 3, 3, 2, 7, 1000}
	for _, c := range []struct {
		seed  uint64
		first float64
		draws []int
	}{
		{0, 0.8444218515250481, []int{0, 0, 1, 2, 1, 3, 940}},
		{1, 0.13436424411240122, []int{0, 1, 0, 1, 1, 3, 667}},
		{5, 0.6229016948897019, []int{0, 0, 1, 0, 0, 1, 115}},
		{1<<40 + 3, 0.21978710637116716, []int{0, 1, 2, 1, 0, 3, 570}},
	} {
		r := newPyRandom(c.seed)
		if got := r.float64(); got != c.first {
			t.Errorf("seed %d: random() = %v, CPython %v", c.seed, got, c.first)
		}
		for i, n := range ns {
			if got := r.randrange(n); got != c.draws[i] {
				t.Errorf("seed %d: draw %d, randrange(%d) = %d, CPython %d", c.seed, i, n, got, c.draws[i])
			}
		}
	}
}
