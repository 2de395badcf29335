package kept

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// jobItem is a round's item: a job, its key this round and its index in the
// round's jobs.
type jobItem struct {
	st     *engine.Status
	key, i int
}

func byKeyIndex(a, b jobItem) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

func jobOf(x jobItem) *engine.Status { return x.st }

// TestOrderRounds drives an Order through many random rounds of an
// engine-like set of jobs and compares its result, every round, with the
// stable sort of the round's items by key: jobs end (their slot freed,
// their Status sometimes reused by a later job in another slot) and
// arrive (at the end, or out of order inside the jobs), keys tie often
// and some move between rounds, some rounds come in another order (a
// wrapper's), some are not seen, some are built by hand (no slots), and
// some follow a Forget.
func TestOrderRounds(t *testing.T) {
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 7))
		var o Order[jobItem]
		var dst []jobItem
		var jobs []*engine.Status
		var free []int
		var dead []*engine.Status
		key := map[*engine.Status]int{}
		slots, id, kept, stirred := 0, 0, 0, 0
		sorted := false
		for round := range 400 {
			jobs = slices.DeleteFunc(jobs, func(st *engine.Status) bool {
				if r.Float64() >= 0.08 {
					return false
				}
				free, dead = append(free, st.Slot), append(dead, st)
				return true
			})
			for st := range key {
				if r.Float64() < 0.03 {
					key[st] = r.IntN(20)
				}
			}
			n := r.IntN(6)
			if round%40 == 0 {
				n = 60
			}
			for range n {
				slot := slots
				if len(free) > 0 && r.IntN(2) == 0 {
					k := r.IntN(len(free))
					slot = free[k]
					free = slices.Delete(free, k, k+1)
				} else {
					slots++
				}
				st := new(engine.Status)
				if len(dead) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(dead))
					st = dead[k]
					dead = slices.Delete(dead, k, k+1)
				}
				*st = engine.Status{Job: &job.Job{ID: fmt.Sprint(id)}, Slot: slot}
				id++
				key[st] = r.IntN(20)
				if len(jobs) > 0 && r.IntN(8) == 0 {
					jobs = slices.Insert(jobs, r.IntN(len(jobs)), st)
				} else {
					jobs = append(jobs, st)
				}
			}
			if r.IntN(10) == 0 {
				continue // not seen
			}
			snap, byHand := jobs, false
			switch x := r.IntN(20); {
			case x == 0:
				snap = slices.Clone(jobs)
				r.Shuffle(len(snap), func(i, k int) { snap[i], snap[k] = snap[k], snap[i] })
				stirred++
			case x == 1:
				snap = nil
				for _, st := range jobs {
					c := *st
					c.Slot = -1
					key[&c] = key[st]
					snap = append(snap, &c)
				}
				byHand = true
			case x == 2:
				o.Forget()
				sorted = false
			}
			if sorted && !byHand {
				kept++
			}
			sorted = true
			items := make([]jobItem, len(snap))
			for i, st := range snap {
				items[i] = jobItem{st, key[st], i}
			}
			want := slices.Clone(items)
			slices.SortStableFunc(want, func(a, b jobItem) int { return cmp.Compare(a.key, b.key) })
			dst = o.Sort(dst, items, snap, byKeyIndex, jobOf)
			if !slices.Equal(dst, want) {
				t.Fatalf("seed %d round %d:\n got %v\nwant %v", seed, round, dst, want)
			}
			// The same round again, as the engine hands it: the order is
			// kept, so the check for items already in order (which stops
			// at the first out of order) and one insertion pass find it
			// sorted, at most 2(n-1) comparisons, where a sort from the
			// snapshot's order makes more.
			if byHand || len(snap) < 2 {
				continue
			}
			compared := 0
			count := func(a, b jobItem) int { compared++; return byKeyIndex(a, b) }
			dst = o.Sort(dst, items, snap, count, jobOf)
			if !slices.Equal(dst, want) || compared > 2*(len(snap)-1) {
				t.Fatalf("seed %d round %d, again: %d comparisons for %d jobs (at most %d), got %v\nwant %v",
					seed, round, compared, len(snap), 2*(len(snap)-1), dst, want)
			}
		}
		if kept < 250 || stirred < 5 {
			t.Fatalf("seed %d: %d rounds from a kept order, %d stirred: too few", seed, kept, stirred)
		}
	}
}
