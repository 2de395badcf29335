// Package minheap keeps a binary min-heap in a plain slice. It runs the
// steps of container/heap (the same sift up and down, the same swaps), so
// elements that compare equal come out in the same order as there, but
// without its interface: container/heap's Push takes and its Pop returns
// an `any`, and a value that is not a pointer is copied to the garbage-
// collected heap each time it is put in one, one allocation per element
// pushed and another per element popped. Here Push allocates only when the
// slice grows, and Pop never does.
//
// less is the heap's order, strict (less(a, a) is false); the smallest
// element under it is (*h)[0].
package minheap

// Init orders h as a heap, in O(len(h)) steps.
func Init[T any](h []T, less func(a, b T) bool) {
	n := len(h)
	for i := n/2 - 1; i >= 0; i-- {
		down(h, i, n, less)
	}
}

// Push adds x to the heap *h.
func Push[T any](h *[]T, x T, less func(a, b T) bool) {
	*h = append(*h, x)
	up(*h, len(*h)-1, less)
}

// Pop removes the smallest element of the non-empty heap *h and returns
// it. The slot it leaves at the end of the slice is zeroed, so that the
// slice holds no pointer to it.
func Pop[T any](h *[]T, less func(a, b T) bool) T {
	s := *h
	n := len(s) - 1
	s[0], s[n] = s[n], s[0]
	down(s, 0, n, less)
	x := s[n]
	var zero T
	s[n] = zero
	*h = s[:n]
	return x
}

func up[T any](h []T, j int, less func(a, b T) bool) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !less(h[j], h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func down[T any](h []T, i0, n int, less func(a, b T) bool) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && less(h[j2], h[j1]) {
			j = j2 // right child
		}
		if !less(h[j], h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
