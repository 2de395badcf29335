package classic

import (
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/kept"
)

// SRTF's running jobs, sorted from their order of the last round (issue 19).
//
// SRTF's key is a job's remaining time on the GPUs it asks for, packed
// (Snapshot.Remaining), not its remaining GPU-seconds. A running job's
// key falls at 1 s per second while it progresses at the rate of that
// shape, which SRTF's own plans give it (it runs every job on the GPUs it
// asks for). But not every running job progresses so: a job in its start
// or restart time (the model's Costs) does not progress at all, its key
// standing still while the others' fall; under a model where placement
// matters (Pollux's), a job the placer could not pack runs slower than
// the packed shape, its key falling more slowly. So the running jobs'
// order moves between rounds, a little: a job that just started is
// overtaken by those within its restart time of it. It cannot be kept
// without reading the keys, and reading them is what the rule does (a
// key is the model's, computed from the job's progress at this round).
// What need not be redone is the sort: the running jobs are read in the
// order they had at the last round (those that still run), which is
// sorted but for the few that moved, an insertion pass puts those back
// (falling back to a full sort when it has moved too much), and the jobs
// that started since are sorted apart and merged in (package kept). The order is
// srtfCompare's, a total order (IDs are unique), so the result is the one
// sorting every running job gives (TestSRTFRunOrder compares them over
// random rounds).

// srtfRan finds, by slot, which jobs run in a round.
type srtfRan struct {
	round uint32         // this round's mark; 0 none
	at    []srtfRanEntry // by Status.Slot
}

// srtfRanEntry is a slot's job and the round it was last seen running
// (seen) and placed in the order (placed).
type srtfRanEntry struct {
	st           *engine.Status
	seen, placed uint32
}

// running sets o.run to the running jobs of s, sorted by srtfCompare, with
// their keys read by rem: from o.run's order of the last round when every
// running job has a slot of its own (an engine's snapshot), else sorted
// afresh.
func (o *srtfOrder) running(s *engine.Snapshot, rem func(*engine.Status) float64) {
	r := &o.ran
	r.round++
	if r.round == 0 { // wrapped: the old marks could match
		clear(r.at)
		r.round = 1
	}
	mark := r.round
	came := o.came[:0]
	defer func() { clear(came); o.came = came[:0] }()
	own := true
	for _, st := range s.Jobs {
		if len(st.GPUs) == 0 {
			continue
		}
		came = append(came, srtfKeyed{st: st})
		if !own {
			continue
		}
		if st.Slot < 0 {
			own = false
			continue
		}
		if st.Slot >= len(r.at) {
			r.at = slices.Grow(r.at, st.Slot+1-len(r.at))[:st.Slot+1]
		}
		e := &r.at[st.Slot]
		if e.seen == mark && e.st != st {
			own = false // two jobs in one slot: not one engine's
			continue
		}
		*e = srtfRanEntry{st: st, seen: mark}
	}
	if !own {
		// Sort every running job afresh; the next round has no order to
		// start from.
		for i := range came {
			came[i].k = rem(came[i].st)
		}
		slices.SortFunc(came, srtfCompare)
		clear(o.run)
		o.run = append(o.run[:0], came...)
		r.round++ // no entry is this round's: nothing is placed from it
		return
	}
	// The jobs of the last order that still run, in that order, their
	// keys read now.
	run := o.run[:0]
	for _, k := range o.run {
		st := k.st
		if st.Slot < 0 || st.Slot >= len(r.at) {
			continue
		}
		if e := &r.at[st.Slot]; e.st == st && e.seen == mark && e.placed != mark {
			e.placed = mark
			run = append(run, srtfKeyed{rem(st), st})
		}
	}
	clear(o.run[len(run):]) // let the jobs that stopped or ended go
	if !sortedByInsertion(run) {
		slices.SortFunc(run, srtfCompare)
	}
	// The jobs that started since, sorted apart and merged in.
	n := 0
	for _, c := range came {
		if r.at[c.st.Slot].placed != mark {
			came[n] = srtfKeyed{rem(c.st), c.st}
			n++
		}
	}
	if n == 0 {
		o.run = run
		return
	}
	slices.SortFunc(came[:n], srtfCompare)
	next := kept.MergeInto(o.next[:0], run, came[:n], srtfCompare)
	clear(run)
	o.run, o.next = next, run[:0]
}

// sortedByInsertion sorts a, nearly sorted, by srtfCompare with an
// insertion pass and reports true; it gives up, reporting false with a
// still a permutation of itself, once the pass has moved more entries
// than a has (a sort then costs less).
func sortedByInsertion(a []srtfKeyed) bool { return kept.InsertionSorted(a, srtfCompare) }
