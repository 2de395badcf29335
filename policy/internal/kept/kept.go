// Package kept sorts a round's jobs starting from the order they had at
// the last round (issue 19: a policy that sorts every active job each
// round keeps its order where the paper's rule allows).
//
// Between two rounds most jobs stay, and their keys either stand still or
// move a little, so last round's order of the jobs still there is sorted,
// or nearly: an insertion pass repairs it in about one comparison a job.
// The jobs that came since are few; they are sorted apart and merged in.
// Sort does that on a slice laid out so; Order keeps a round's order of
// engine jobs and lays the next round's out so, finding the jobs by slot.
//
// Where a round rebuilds its jobs anyway and the key is a small integer
// (a job's minimum GPUs, a node's free GPUs), ByCount orders them by
// counting, which costs less than keeping an order (count.go).
//
// Every function here but ByCount takes the order as a comparison c in
// the manner of slices.SortFunc. Where the caller wants the result of sorting every job
// afresh, c must be a total order on the items (no two distinct items
// compare equal: break ties by ID, or by the item's index in this round's
// input, which is what makes the result the one slices.SortStableFunc
// gives on that input). A total order has one sorted permutation, so any
// way of reaching it is the full sort's result, job for job.
package kept

import (
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/present"
)

// InsertionSorted sorts a, expected nearly sorted, by c with an insertion
// pass and reports true. The pass is stable: an item moves only past items
// that compare greater. It gives up once it has moved items past more
// than len(a) others in all (a comparison sort then costs less) and
// reports false, a then being a permutation of itself in no particular
// order; the caller sorts it.
func InsertionSorted[T any](a []T, c func(T, T) int) bool {
	moves := 0
	for i := 1; i < len(a); i++ {
		if c(a[i-1], a[i]) <= 0 {
			continue
		}
		x, j := a[i], i
		for j > 0 && c(a[j-1], x) > 0 {
			a[j] = a[j-1]
			j--
		}
		a[j] = x
		if moves += i - j; moves > len(a) {
			return false
		}
	}
	return true
}

// MergeInto appends to dst the merge of a and b, both sorted by c, and
// returns it. It is stable: on a tie a's item comes first, so the result
// is what slices.SortStableFunc gives on a followed by b. dst must not
// overlap a or b. (policy/classic's mergeInto, which this replaces, said
// so but put b's first; its callers' orders are total, so no tie ever
// reached it.)
func MergeInto[T any](dst, a, b []T, c func(T, T) int) []T {
	i := 0
	for _, y := range b {
		for i < len(a) && c(a[i], y) <= 0 {
			dst = append(dst, a[i])
			i++
		}
		dst = append(dst, y)
	}
	return append(dst, a[i:]...)
}

// Sort sorts a by c, a total order, in place: a[:m] are the items of the
// last round's order still there, in that order (nearly sorted by c), and
// a[m:] those that came since, in any order. The result is the one
// slices.SortFunc gives on a. buf is scratch memory for the merge, handed
// back (cleared, its length 0) to be passed again next round; it must not
// overlap a.
//
// Its cost is an insertion pass over a[:m] (a comparison sort when too
// much moved), a sort of a[m:], and a merge when a[m:] does not simply
// follow a[:m].
func Sort[T any](a []T, m int, c func(T, T) int, buf []T) []T {
	kept, came := a[:m], a[m:]
	if !InsertionSorted(kept, c) {
		slices.SortFunc(kept, c)
	}
	if len(came) == 0 {
		return buf[:0]
	}
	slices.SortFunc(came, c)
	if len(kept) == 0 || c(kept[len(kept)-1], came[0]) <= 0 {
		return buf[:0]
	}
	merged := MergeInto(buf[:0], kept, came, c)
	copy(a, merged)
	clear(merged) // let buf hold no item past this call
	return merged[:0]
}

// Order is the last round's order of a policy's jobs, kept for the next
// round's sort to start from (Order.Sort). The zero value is ready: its
// first sort starts from nothing.
type Order[T any] struct {
	prev    []*engine.Status // the last order's jobs, in that order
	present present.Set      // finds prev's jobs among this round's
	took    []bool           // scratch: by index in this round's jobs, in the kept part
	buf     []T              // Sort's scratch
}

// Sort appends to dst[:0] the items sorted by c and returns it; dst must
// not overlap items. items[i] is the job jobs[i] (the two of one length,
// job(items[i]) == jobs[i]), and c must be a total order on the items
// (break ties by the index i: the result is then the one
// slices.SortStableFunc gives on items). The result is the one
// slices.SortFunc gives, whatever order the last round left.
//
// Items already in order are taken as they are (one pass, which stops at
// the first item out of order). Else it starts from the order the last
// call returned: the jobs of it that are in jobs (found by engine slot,
// present.Set) first, in that order, then the others in items' order,
// repaired by Sort. So the last round's order is only where the sort
// starts: a round the policy did not see, or keys that moved, leave it
// further from sorted, and the insertion pass gives up for a full sort.
// Where there is no last order (the first call, after Forget) or jobs are
// not one engine's statuses (two in a slot, a slot < 0:
// present.Set.Mark), the items are sorted afresh. Either way the order is
// kept for the next call.
func (o *Order[T]) Sort(dst, items []T, jobs []*engine.Status, c func(T, T) int, job func(T) *engine.Status) []T {
	n := len(items)
	out := dst[:0]
	if slices.IsSortedFunc(items, c) {
		// In order already (the snapshot's order often is: keys that
		// follow submission): a pass that stops at the first item out of
		// order costs less than laying out the last order.
		out = append(out, items...)
	} else if len(o.prev) > 0 && o.present.Mark(jobs) {
		took := slices.Grow(o.took[:0], n)[:n]
		clear(took)
		for _, st := range o.prev {
			if i, ok := o.present.Index(st); ok && !took[i] {
				took[i] = true
				out = append(out, items[i])
			}
		}
		k := len(out)
		for i, x := range items {
			if !took[i] {
				out = append(out, x)
			}
		}
		o.took = took
		o.buf = Sort(out, k, c, o.buf)
	} else {
		out = append(out, items...)
		slices.SortFunc(out, c)
	}
	clear(o.prev) // let the jobs that ended go
	o.prev = o.prev[:0]
	for _, x := range out {
		o.prev = append(o.prev, job(x))
	}
	return out
}

// Forget drops the kept order: the next Sort sorts afresh. (Sort needs
// no Forget to stay right, see there; it saves the repair's cost where a
// caller knows the last order is far from this round's.)
func (o *Order[T]) Forget() {
	clear(o.prev)
	o.prev = o.prev[:0]
}
