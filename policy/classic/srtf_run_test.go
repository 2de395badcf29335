package classic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestSRTFRunOrder drives srtfOrder.running through random rounds of
// jobs that start, stop, end (their slots taken by new jobs) and whose
// keys mostly fall by the round's length, some standing still (a restart),
// some falling at another rate, some jumping, with ties among them: the
// running jobs it returns, with their keys, must be those that sorting
// every running job afresh by srtfCompare gives, every round. Rounds with
// many moves (the insertion pass gives up and sorts) and snapshots whose
// jobs share a slot or have none (not one engine's) are among them.
func TestSRTFRunOrder(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x5f))
		var o srtfOrder
		key := map[*engine.Status]float64{}
		var active []*engine.Status
		free := []int{} // slots of ended jobs
		slots := 0
		next := 0
		newJob := func() *engine.Status {
			slot := slots
			if len(free) > 0 && r.IntN(2) == 0 {
				slot, free = free[len(free)-1], free[:len(free)-1]
			} else {
				slots++
			}
			st := &engine.Status{Job: &job.Job{ID: fmt.Sprintf("j%04d", next), Submit: float64(next / 3)}, Slot: slot}
			next++
			key[st] = float64(r.IntN(50)) * 10 // ties among keys
			return st
		}
		for range 30 + r.IntN(30) {
			active = append(active, newJob())
		}
		stirred, odd := 0, 0
		for round := range 60 {
			// Jobs end, arrive, start and stop.
			for i := 0; i < len(active); i++ {
				if r.IntN(15) == 0 {
					free = append(free, active[i].Slot)
					delete(key, active[i])
					active = slices.Delete(active, i, i+1)
					i--
				}
			}
			for range r.IntN(6) {
				active = append(active, newJob())
			}
			for _, st := range active {
				switch running := len(st.GPUs) > 0; {
				case !running && r.IntN(3) == 0:
					st.GPUs = []cluster.GPUID{0}
				case running && r.IntN(10) == 0:
					st.GPUs = nil
				}
			}
			// Keys: the running ones fall by the round's length, but some.
			stir := round%7 == 6
			for _, st := range active {
				if len(st.GPUs) == 0 {
					continue
				}
				switch k := r.IntN(20); {
				case stir:
					key[st] = float64(r.IntN(50)) * 10
				case k == 0: // restarting: stands still
				case k == 1:
					key[st] -= 30 // slower
				case k == 2:
					key[st] = float64(r.IntN(50)) * 10
				default:
					key[st] -= 60
				}
			}
			if stir {
				stirred++
			}
			// Now and then a snapshot not of one engine.
			jobs := slices.Clone(active)
			var undo func()
			if round%11 == 10 && len(jobs) > 2 {
				odd++
				a, b := jobs[0], jobs[1]
				sa, sb := a.Slot, b.Slot
				if round%2 == 0 {
					b.Slot = sa // two jobs in one slot
				} else {
					a.Slot = -1
				}
				undo = func() { a.Slot, b.Slot = sa, sb }
			}
			s := &engine.Snapshot{Jobs: jobs}
			o.running(s, func(st *engine.Status) float64 { return key[st] })
			var want []srtfKeyed
			for _, st := range jobs {
				if len(st.GPUs) > 0 {
					want = append(want, srtfKeyed{key[st], st})
				}
			}
			slices.SortFunc(want, srtfCompare)
			if !slices.Equal(o.run, want) {
				t.Fatalf("seed %d round %d: the running order differs from a full sort:\n got %v\nwant %v", seed, round, keyedIDs(o.run), keyedIDs(want))
			}
			if undo != nil {
				undo()
			}
		}
		if stirred == 0 || odd == 0 {
			t.Fatalf("seed %d: no stirred round (%d) or odd snapshot (%d)", seed, stirred, odd)
		}
	}
}

// keyedIDs names the jobs of an order, with their keys.
func keyedIDs(a []srtfKeyed) []string {
	var out []string
	for _, k := range a {
		out = append(out, fmt.Sprintf("%s:%g", k.st.Job.ID, k.k))
	}
	return out
}

// TestSortedByInsertion: the insertion pass sorts a nearly sorted slice,
// and gives up on a reversed one, leaving a permutation of it.
func TestSortedByInsertion(t *testing.T) {
	mk := func(keys ...float64) []srtfKeyed {
		var a []srtfKeyed
		for i, k := range keys {
			a = append(a, srtfKeyed{k, &engine.Status{Job: &job.Job{ID: fmt.Sprintf("j%d", i)}}})
		}
		return a
	}
	a := mk(1, 2, 5, 3, 4, 6, 8, 7, 9, 10)
	if !sortedByInsertion(a) || !slices.IsSortedFunc(a, srtfCompare) {
		t.Fatalf("nearly sorted: got %v", keyedIDs(a))
	}
	b := mk(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
	c := slices.Clone(b)
	if sortedByInsertion(b) {
		t.Fatalf("reversed: the pass should give up, got %v", keyedIDs(b))
	}
	slices.SortFunc(b, srtfCompare)
	slices.SortFunc(c, srtfCompare)
	if !slices.Equal(b, c) {
		t.Fatalf("reversed: not a permutation: %v against %v", keyedIDs(b), keyedIDs(c))
	}
}
