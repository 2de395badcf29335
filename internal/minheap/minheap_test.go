package minheap

import (
	"container/heap"
	"math/rand/v2"
	"testing"
)

// item has a key with many ties and an identity, so that the order of
// equal keys is seen.
type item struct{ key, id int }

func less(a, b item) bool { return a.key < b.key }

// ref is container/heap's heap of items, the reference.
type ref []item

func (h ref) Len() int           { return len(h) }
func (h ref) Less(a, b int) bool { return h[a].key < h[b].key }
func (h ref) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *ref) Push(x any)        { *h = append(*h, x.(item)) }
func (h *ref) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestSameAsContainerHeap drives both heaps through the same random
// pushes, pops and re-initialisations and requires the same element out
// of every pop and the same slice after every step: the same order of
// equal keys, not only the same keys.
func TestSameAsContainerHeap(t *testing.T) {
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		var got []item
		var want ref
		keys := 1 + r.IntN(8) // few keys: many ties
		for step := range 400 {
			switch k := r.IntN(10); {
			case k < 5:
				x := item{r.IntN(keys), step}
				Push(&got, x, less)
				heap.Push(&want, x)
			case k < 9:
				if len(want) == 0 {
					continue
				}
				g, w := Pop(&got, less), heap.Pop(&want).(item)
				if g != w {
					t.Fatalf("seed %d step %d: popped %v, container/heap %v", seed, step, g, w)
				}
			default:
				r.Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
				got = append(got[:0], want...)
				Init(got, less)
				heap.Init(&want)
			}
			if len(got) != len(want) {
				t.Fatalf("seed %d step %d: %d elements, container/heap %d", seed, step, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("seed %d step %d: element %d is %v, container/heap's %v", seed, step, i, got[i], want[i])
				}
			}
		}
	}
}

// TestPopClearsSlot checks that a popped element's slot is zeroed, so a
// heap of pointers lets go of what it popped.
func TestPopClearsSlot(t *testing.T) {
	h := []item{{1, 1}, {2, 2}, {3, 3}}
	Init(h, less)
	Pop(&h, less)
	if tail := h[:3][2]; tail != (item{}) {
		t.Fatalf("the popped slot holds %v", tail)
	}
}

// TestNoAllocations: once the slice has room, pushing and popping
// allocate nothing (container/heap allocates twice per element).
func TestNoAllocations(t *testing.T) {
	h := make([]item, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range 32 {
			Push(&h, item{i % 5, i}, less)
		}
		for len(h) > 0 {
			Pop(&h, less)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func BenchmarkPushPop(b *testing.B) {
	b.Run("minheap", func(b *testing.B) {
		h := make([]item, 0, 1024)
		b.ReportAllocs()
		for i := range b.N {
			Push(&h, item{i * 7919 % 1000, i}, less)
			if len(h) > 512 {
				Pop(&h, less)
			}
		}
	})
	b.Run("container-heap", func(b *testing.B) {
		h := make(ref, 0, 1024)
		b.ReportAllocs()
		for i := range b.N {
			heap.Push(&h, item{i * 7919 % 1000, i})
			if len(h) > 512 {
				heap.Pop(&h)
			}
		}
	})
}
