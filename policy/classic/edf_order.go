package classic

import (
	"cmp"
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/kept"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// EDF's order, kept from round to round (issue 19).
//
// EDF orders the active jobs by deadline, then submission, then ID
// (alloc.SortByKey with edfKey): a key that never changes while a job is
// active. So between rounds of the same engine the order moves only when
// jobs arrive or leave, both of which Snapshot.Changed lists: edfOrder
// takes the jobs that left out of the last round's order and puts those
// that arrived in, by binary search, instead of sorting every active job.
// On a snapshot that does not carry Changed (the first round, after a
// failed round or a restored state, a wrapper's, one built by hand) or
// one that does not follow the last it saw, it sorts every active job as
// before and keeps the result. The order is the sort's, job for job
// (TestEDFKeptMatchesFull, TestLazyQueueMatchesFull).

// edfOrder is EDF's kept order of the active jobs.
type edfOrder struct {
	seen roster.Follower // the rounds jobs describes
	in   roster.Slots[struct{}]
	jobs []*engine.Status // the active jobs, by edfBefore
	came []*engine.Status // scratch: the jobs that arrived this round
	next []*engine.Status // scratch: the merge of jobs and came
	// keyed is sort's scratch: the jobs with their keys.
	keyed []srtfKeyed
}

// edfKey is EDF's key: a job's deadline, +Inf for none (last).
func edfKey(st *engine.Status) float64 {
	if st.Job.Deadline > 0 {
		return st.Job.Deadline
	}
	return math.Inf(1)
}

// edfCompare is alloc.SortByKey's order under edfKey: the key, then
// submission, then ID.
func edfCompare(a, b *engine.Status) int {
	if c := cmp.Compare(edfKey(a), edfKey(b)); c != 0 {
		return c
	}
	return submitOrder(a, b)
}

// stop says o no longer follows the rounds (a round it did not see).
func (o *edfOrder) stop() { o.seen.Stop() }

// order returns the active jobs of s in EDF's order: from the last
// round's order and s.Changed when o saw the round before, else sorted
// afresh. The slice is o's, valid until the next call.
func (o *edfOrder) order(s *engine.Snapshot) []*engine.Status {
	if !s.Incremental || s.From() == nil {
		o.seen.Stop()
		return o.sort(s.Jobs)
	}
	if !o.seen.Next(s) || !o.apply(s) {
		o.rebuild(s)
	}
	return o.jobs
}

// rebuild sorts the active jobs of s afresh.
func (o *edfOrder) rebuild(s *engine.Snapshot) {
	o.sort(s.Jobs)
	o.in.Clear()
	for _, st := range o.jobs {
		if v, _ := o.in.Add(st); v == nil {
			o.seen.Stop() // not one engine's slots: the next round sorts again
			return
		}
	}
}

// sort sorts jobs into o.jobs and returns it: alloc.SortByKey's order
// under edfKey (each key computed once), in memory kept from round to
// round.
func (o *edfOrder) sort(jobs []*engine.Status) []*engine.Status {
	keyed := slices.Grow(o.keyed[:0], len(jobs))
	for _, st := range jobs {
		keyed = append(keyed, srtfKeyed{edfKey(st), st})
	}
	slices.SortFunc(keyed, srtfCompare) // the key, then submission, then ID: SortByKey's
	clear(o.jobs)
	o.jobs = slices.Grow(o.jobs[:0], len(keyed))
	for _, k := range keyed {
		o.jobs = append(o.jobs, k.st)
	}
	clear(keyed)
	o.keyed = keyed[:0]
	return o.jobs
}

// apply brings the order up to s from s.Changed; false when a job's slot
// holds another job o never saw leave (not this engine's rounds).
func (o *edfOrder) apply(s *engine.Snapshot) bool {
	// The jobs that left first: a new job may have taken one's slot.
	for _, st := range s.Changed {
		if !st.State.Terminal() || o.in.Get(st) == nil {
			continue
		}
		o.in.Drop(st)
		i, ok := slices.BinarySearchFunc(o.jobs, st, edfCompare)
		if !ok || o.jobs[i] != st {
			return false
		}
		o.jobs = slices.Delete(o.jobs, i, i+1)
	}
	o.came = o.came[:0]
	for _, st := range s.Changed {
		if st.State.Terminal() {
			continue
		}
		v, fresh := o.in.Add(st)
		if v == nil {
			return false
		}
		if fresh {
			o.came = append(o.came, st)
		}
	}
	defer clear(o.came)
	if len(o.came) <= 8 {
		for _, st := range o.came {
			i, _ := slices.BinarySearchFunc(o.jobs, st, edfCompare)
			o.jobs = slices.Insert(o.jobs, i, st)
		}
		return len(o.jobs) == len(s.Jobs)
	}
	// Many arrivals: sort them and merge, in one pass over the order.
	slices.SortFunc(o.came, edfCompare)
	next := kept.MergeInto(o.next[:0], o.jobs, o.came, edfCompare)
	clear(o.jobs)
	o.jobs, o.next = next, o.jobs[:0]
	return len(o.jobs) == len(s.Jobs)
}
