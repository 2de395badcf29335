package kept

import "slices"

// ByCount puts items in order of key, smallest first, ties in items'
// order: the order slices.SortStableFunc by key gives, made by counting
// instead of comparing, for keys that are small integers (a job's minimum
// GPUs, a node's free GPUs). Every key must lie in [lo, hi]; the cost is
// two passes over items and one over hi-lo+1 counters. The result is
// dst's memory (grown to len(items)) and counts its scratch; both are
// returned for the next call to reuse.
func ByCount[T any](dst, items []T, key func(T) int, lo, hi int, counts []int) ([]T, []int) {
	n := hi - lo + 1
	counts = slices.Grow(counts[:0], n)[:n]
	clear(counts)
	for _, x := range items {
		counts[key(x)-lo]++
	}
	// Summed, counts[k] is where the first item of key lo+k goes; each
	// item placed moves it on.
	sum := 0
	for k, c := range counts {
		counts[k] = sum
		sum += c
	}
	dst = slices.Grow(dst[:0], len(items))[:len(items)]
	for _, x := range items {
		k := key(x) - lo
		dst[counts[k]] = x
		counts[k]++
	}
	return dst, counts
}
