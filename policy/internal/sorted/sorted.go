// Package sorted turns the maps a policy keeps into slices sorted by key
// and back, so that state encoded from them (engine.EncodeState, a gob)
// is the same bytes for the same state: gob writes a map in Go's random
// iteration order.
package sorted

import (
	"cmp"
	"iter"
	"maps"
	"slices"
)

// Pair is one map entry.
type Pair[K cmp.Ordered, V any] struct {
	Key K
	Val V
}

// Pairs lists m's entries by increasing key; nil for an empty map.
func Pairs[K cmp.Ordered, V any](m map[K]V) []Pair[K, V] {
	if len(m) == 0 {
		return nil
	}
	out := make([]Pair[K, V], 0, len(m))
	for k, v := range m {
		out = append(out, Pair[K, V]{k, v})
	}
	slices.SortFunc(out, func(a, b Pair[K, V]) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Map builds the map Pairs listed, never nil (a later key wins, though
// Pairs gives each key once).
func Map[K cmp.Ordered, V any](ps []Pair[K, V]) map[K]V {
	out := make(map[K]V, len(ps))
	for _, p := range ps {
		out[p.Key] = p.Val
	}
	return out
}

// All yields m's entries by increasing key.
func All[K cmp.Ordered, V any](m map[K]V) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
