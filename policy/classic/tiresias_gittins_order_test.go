package classic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestGittinsKeptOrder drives sortGittins through random rounds of jobs
// that arrive, end (their slots taken by new jobs), change queue and whose
// indexes mostly drift a little, some jump, with ties among them (the
// entry time, submission and ID break them): the order it returns from
// the last round's must be the one sorting the queues afresh gives
// (queue, then compareIn), every round, snapshots that are not one
// engine's among them.
func TestGittinsKeptOrder(t *testing.T) { testKeptOrder(t, true) }

// TestLASKeptOrder is TestGittinsKeptOrder for 2D-LAS' order (sortKept):
// no index; a job that changes queue enters it now, and some enter their
// own queue again (a new entry time in the same queue).
func TestLASKeptOrder(t *testing.T) { testKeptOrder(t, false) }

// testKeptOrder drives sortGittins (gittins) or sortKept through random
// rounds, as TestGittinsKeptOrder says.
func testKeptOrder(t *testing.T, gittins bool) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x6177))
		tr := &Tiresias{Limits: []float64{10, 20, 30}}
		if gittins {
			tr.Gittins = NewGittins([]float64{1, 2, 3}, 5)
		}
		var active []tiresiasEntry
		var free []int
		slots, next := 0, 0
		newJob := func() tiresiasEntry {
			slot := slots
			if len(free) > 0 && r.IntN(2) == 0 {
				slot, free = free[len(free)-1], free[:len(free)-1]
			} else {
				slots++
			}
			st := &engine.Status{Job: &job.Job{ID: fmt.Sprintf("j%04d", next), Submit: float64(next / 4)}, Slot: slot}
			next++
			e := tiresiasEntry{st: st, queue: r.IntN(4), entered: float64(r.IntN(5))}
			if gittins {
				e.index = float64(r.IntN(8)) / 8
			}
			return e
		}
		for range 40 + r.IntN(40) {
			active = append(active, newJob())
		}
		moved, odd := 0, 0
		for round := range 60 {
			for i := 0; i < len(active); i++ {
				if r.IntN(12) == 0 {
					free = append(free, active[i].st.Slot)
					active = slices.Delete(active, i, i+1)
					i--
				}
			}
			for range r.IntN(8) {
				active = append(active, newJob())
			}
			for i := range active {
				e := &active[i]
				switch k := r.IntN(20); {
				case k == 0:
					e.queue, e.entered = r.IntN(4), float64(round)
					moved++
				case k == 1 && !gittins: // entered its queue again
					e.entered = float64(round)
					moved++
				case k == 1:
					e.index = float64(r.IntN(8)) / 8
				case k < 8 && gittins:
					e.index -= 0.01 * float64(r.IntN(3))
				}
			}
			// The snapshot's order: by submission, then ID.
			slices.SortFunc(active, func(a, b tiresiasEntry) int { return submitOrder(a.st, b.st) })
			jobs := make([]*engine.Status, len(active))
			for i, e := range active {
				jobs[i] = e.st
			}
			var undo func()
			if round%13 == 12 && len(jobs) > 2 {
				odd++
				a, b := jobs[0], jobs[1]
				sa, sb := a.Slot, b.Slot
				b.Slot = sa // two jobs in one slot: not one engine's
				undo = func() { a.Slot, b.Slot = sa, sb }
			}
			var got []tiresiasEntry
			if gittins {
				got = tr.sortGittins(slices.Clone(active), jobs)
			} else {
				got = tr.sortKept(slices.Clone(active), jobs)
			}
			tr.prev = append(tr.prev[:0], got...)
			want := slices.Clone(active)
			slices.SortFunc(want, func(a, b tiresiasEntry) int {
				if a.queue != b.queue {
					return a.queue - b.queue
				}
				return tr.compareIn(a, b)
			})
			if len(got) != len(want) {
				t.Fatalf("seed %d round %d: %d entries, want %d", seed, round, len(got), len(want))
			}
			for i := range got {
				if got[i].st != want[i].st || got[i].index != want[i].index || got[i].queue != want[i].queue {
					t.Fatalf("seed %d round %d: at %d got %s (queue %d, index %g), want %s (queue %d, index %g)", seed, round, i,
						got[i].st.Job.ID, got[i].queue, got[i].index, want[i].st.Job.ID, want[i].queue, want[i].index)
				}
			}
			if undo != nil {
				undo()
			}
		}
		if moved == 0 || odd == 0 {
			t.Fatalf("seed %d: %d moves, %d odd snapshots", seed, moved, odd)
		}
	}
}
