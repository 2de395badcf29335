package flow

import (
	"cmp"

	"github.com/tide-sched/tide/engine"
)

// The order in which tidal parks its waiting jobs (Tidal.park), from the
// last round's (issue 19).
//
// park offers idle edge servers to the admitted deadline jobs still
// waiting for their cloud share, earliest deadline first, ties in the
// order of the jobs left (the snapshot's): a stable sort of every such
// job, each round it runs. A job's deadline never changes (its Job's), so
// the round starts from the last round's order of the jobs that wait
// still, those that came to wait after them, and kept.Order repairs that
// by parkCompare, which breaks ties by the index among this round's
// waiting jobs: a total order, so the result is the stable sort's, job
// for job, whatever the last round left (TestParkOrderKept).

// parkKeyed is a waiting job with its index among the round's waiting
// jobs.
type parkKeyed struct {
	st *engine.Status
	at int
}

// parkCompare orders the waiting jobs: earliest deadline, then index.
func parkCompare(a, b parkKeyed) int {
	if c := cmp.Compare(a.st.Job.Deadline, b.st.Job.Deadline); c != 0 {
		return c
	}
	return cmp.Compare(a.at, b.at)
}

func parkStatus(k parkKeyed) *engine.Status { return k.st }

// sortParkWait sorts wait, the round's waiting jobs, in place by
// parkCompare, starting from the last round's order.
func (t *Tidal) sortParkWait(wait []*engine.Status) {
	keyed := t.parkKeyed[:0]
	for i, st := range wait {
		keyed = append(keyed, parkKeyed{st, i})
	}
	sorted := t.parkOrder.Sort(t.parkSorted[:0], keyed, wait, parkCompare, parkStatus)
	for i, k := range sorted {
		wait[i] = k.st
	}
	clear(keyed) // the statuses are in parkOrder's own memory
	clear(sorted)
	t.parkKeyed, t.parkSorted = keyed[:0], sorted[:0]
}
