package flow

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// fullFlowSort is the order Flow.jobs gave before it kept its order: a
// stable sort of the snapshot's jobs by priority (highest first), then
// deadline.
func fullFlowSort(js []*fjob) []*fjob { return fullFlowSortInto(nil, js) }

// fullFlowSortInto is fullFlowSort appended to dst.
func fullFlowSortInto(dst, js []*fjob) []*fjob {
	dst = append(dst, js...)
	slices.SortStableFunc(dst, func(x, y *fjob) int {
		if x.st.Job.Priority != y.st.Job.Priority {
			if x.st.Job.Priority > y.st.Job.Priority {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.deadline, y.deadline)
	})
	return dst
}

// fakeJobs is an engine's active jobs as a kept order sees them, for the
// tests of kept orders: jobs end (their slot freed, their Status sometimes
// reused by a later job) and arrive (at the end of the snapshot, or out of
// order within it), with priorities and deadlines that tie often.
type fakeJobs struct {
	r     *rand.Rand
	jobs  []*engine.Status // the engine's order
	free  []int            // free slots
	dead  []*engine.Status // statuses of ended jobs, reusable
	slots int
	id    int
}

// step ends and adds jobs, many every 40th round.
func (e *fakeJobs) step(round int) {
	r := e.r
	e.jobs = slices.DeleteFunc(e.jobs, func(st *engine.Status) bool {
		if r.Float64() >= 0.08 {
			return false
		}
		e.free, e.dead = append(e.free, st.Slot), append(e.dead, st)
		return true
	})
	n := r.IntN(6)
	if round%40 == 0 {
		n = 60
	}
	for range n {
		j := &job.Job{ID: fmt.Sprintf("j%d", e.id), Priority: []int{0, 0, 0, 1, 2}[r.IntN(5)]}
		e.id++
		if x := r.IntN(12); x > 0 {
			j.Deadline = float64(100 * x)
		}
		slot := e.slots
		if len(e.free) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(e.free))
			slot = e.free[k]
			e.free = slices.Delete(e.free, k, k+1)
		} else {
			e.slots++
		}
		st := new(engine.Status)
		if len(e.dead) > 0 && r.IntN(3) == 0 { // a Status reused
			k := r.IntN(len(e.dead))
			st = e.dead[k]
			e.dead = slices.Delete(e.dead, k, k+1)
		}
		*st = engine.Status{Job: j, Slot: slot}
		if len(e.jobs) > 0 && r.IntN(8) == 0 { // out of order
			e.jobs = slices.Insert(e.jobs, r.IntN(len(e.jobs)), st)
		} else {
			e.jobs = append(e.jobs, st)
		}
	}
}

// snapshot is the jobs as a round hands them to the policy: mostly the
// engine's, sometimes in another order (a wrapper's: shuffled, or two
// neighbours swapped; stirred) or built by hand (copies without slots).
func (e *fakeJobs) snapshot() (snap []*engine.Status, stirred, byHand bool) {
	r := e.r
	switch x := r.IntN(20); {
	case x == 0:
		snap = slices.Clone(e.jobs)
		r.Shuffle(len(snap), func(i, k int) { snap[i], snap[k] = snap[k], snap[i] })
		return snap, true, false
	case x == 1 && len(e.jobs) > 1:
		snap = slices.Clone(e.jobs)
		k := r.IntN(len(snap) - 1)
		snap[k], snap[k+1] = snap[k+1], snap[k]
		return snap, true, false
	case x == 2:
		for _, st := range e.jobs {
			c := *st
			c.Slot = -1
			snap = append(snap, &c)
		}
		return snap, false, true
	}
	return e.jobs, false, false
}

// TestFlowOrderKept drives Flow's kept order (sortJobs) through many
// random rounds (fakeJobs; some rounds the policy does not see) and
// compares it, every round, with the full stable sort it replaced.
func TestFlowOrderKept(t *testing.T) {
	for seed := range uint64(12) {
		e := &fakeJobs{r: rand.New(rand.NewPCG(seed, 19))}
		var m flowMem
		kept, stirred := 0, 0
		sorted := false // a round was sorted before this one
		for round := range 400 {
			e.step(round)
			if e.r.IntN(10) == 0 {
				continue // a round the policy does not see
			}
			snap, stir, byHand := e.snapshot()
			if stir {
				stirred++
			}
			if sorted && !byHand {
				kept++
			}
			sorted = true
			for i, st := range snap { // as Flow.jobs fills its pool
				if i == len(m.pool) {
					m.pool = append(m.pool, new(fjob))
				}
				d := math.Inf(1)
				if st.Job.Deadline > 0 {
					d = st.Job.Deadline
				}
				*m.pool[i] = fjob{st: st, deadline: d}
			}
			want := fullFlowSort(m.pool[:len(snap)])
			got := m.sortJobs(snap)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d round %d: kept order\n%v\nwant\n%v", seed, round, flowIDs(got), flowIDs(want))
			}
			for i, j := range got {
				if j.ord != i || snap[j.at] != j.st {
					t.Fatalf("seed %d round %d: job %s at %d has ord %d, at %d", seed, round, j.st.Job.ID, i, j.ord, j.at)
				}
			}
		}
		if kept < 300 || stirred < 20 {
			t.Fatalf("seed %d: %d rounds from a kept order, %d stirred: too few", seed, kept, stirred)
		}
	}
}

// TestParkOrderKept drives tidal's kept order of the jobs waiting to park
// (sortParkWait) through many random rounds and compares it, every round,
// with the stable sort by deadline it replaced. Each round's waiting jobs
// are some of the active jobs with a deadline (in the snapshot's order):
// most of those that waited the round before, and some others.
func TestParkOrderKept(t *testing.T) {
	for seed := range uint64(12) {
		e := &fakeJobs{r: rand.New(rand.NewPCG(seed, 21))}
		var tl Tidal
		waited := map[*engine.Status]bool{}
		kept, stirred := 0, 0
		for round := range 400 {
			e.step(round)
			if e.r.IntN(10) == 0 {
				continue // park does not run
			}
			snap, stir, byHand := e.snapshot()
			if stir {
				stirred++
			}
			var wait []*engine.Status
			again := 0
			for _, st := range snap {
				p := 0.2
				if waited[st] {
					p = 0.9
				}
				if st.Job.Deadline > 0 && e.r.Float64() < p {
					wait = append(wait, st)
					if waited[st] {
						again++
					}
				}
			}
			if again > 0 && !byHand {
				kept++
			}
			clear(waited)
			for _, st := range wait {
				waited[st] = true
			}
			want := slices.SortedStableFunc(slices.Values(wait), func(a, b *engine.Status) int {
				return cmp.Compare(a.Job.Deadline, b.Job.Deadline)
			})
			got := slices.Clone(wait)
			tl.sortParkWait(got)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d round %d: kept order\n%v\nwant\n%v", seed, round, statusIDs(got), statusIDs(want))
			}
		}
		if kept < 300 || stirred < 20 {
			t.Fatalf("seed %d: %d rounds from a kept order, %d stirred: too few", seed, kept, stirred)
		}
	}
}

// statusIDs names the jobs of an order with their deadlines.
func statusIDs(js []*engine.Status) []string {
	var out []string
	for _, st := range js {
		out = append(out, fmt.Sprintf("%s:%g", st.Job.ID, st.Job.Deadline))
	}
	return out
}

// flowIDs names the jobs of an order with their keys.
func flowIDs(js []*fjob) []string {
	var out []string
	for _, j := range js {
		out = append(out, fmt.Sprintf("%s:%d:%g", j.st.Job.ID, j.st.Job.Priority, j.deadline))
	}
	return out
}
