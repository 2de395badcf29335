package classic

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/kept"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// SRTF's order, its waiting part kept from round to round (issue 19).
//
// SRTF orders the active jobs by remaining time on the GPUs they ask for
// (Snapshot.Remaining), then submission, then ID (alloc.SortByKey). A
// waiting job's remaining time stands still while it waits (its progress
// does), so between rounds of the same engine the waiting jobs' order
// moves only when jobs arrive, leave, start or stop, all of which
// Snapshot.Changed lists: srtfOrder takes those out of the waiting order
// and puts the jobs that now wait in (their key computed once, as they
// come), and each round sorts only the running jobs, whose remaining time
// moves (from their order of the last round, srtf_run.go), and merges them
// with the waiting order. On a snapshot that does
// not carry Changed (the first round, after a failed round or a restored
// state, a wrapper's, one built by hand) or one that does not follow the
// last it saw, it sorts every active job as before and keeps the waiting
// part. The order is the sort's, job for job (TestSRTFKeptMatchesFull,
// TestLazyQueueMatchesFull).

// srtfKeyed is a job with its remaining time.
type srtfKeyed struct {
	k  float64
	st *engine.Status
}

// srtfCompare is alloc.SortByKey's order: the key, then submission, then
// ID.
func srtfCompare(a, b srtfKeyed) int {
	if c := cmp.Compare(a.k, b.k); c != 0 {
		return c
	}
	return submitOrder(a.st, b.st)
}

// submitOrder is the engine's order of active jobs, the tie-break of
// alloc.SortByKey: submission time, then ID.
func submitOrder(a, b *engine.Status) int {
	ja, jb := a.Job, b.Job
	if ja.Submit != jb.Submit {
		return cmp.Compare(ja.Submit, jb.Submit)
	}
	return strings.Compare(ja.ID, jb.ID)
}

// srtfOrder is SRTF's order of the active jobs, the waiting ones kept.
type srtfOrder struct {
	seen roster.Follower       // the rounds wait describes
	in   roster.Slots[float64] // the waiting jobs' keys
	wait []srtfKeyed           // the waiting jobs, by srtfCompare
	run  []srtfKeyed           // the running jobs, by srtfCompare (the last round's, kept: srtf_run.go)
	came []srtfKeyed           // scratch: the jobs that came to wait, or to run
	next []srtfKeyed           // scratch: the merge of wait (or run) and the jobs that came
	jobs []*engine.Status      // the order handed out
	keys []float64             // the key of each job of jobs (Key)
	ran  srtfRan               // which jobs run this round (srtf_run.go)
}

// stop says o no longer follows the rounds (a round it did not see).
func (o *srtfOrder) stop() { o.seen.Stop() }

// order returns the active jobs of s in SRTF's order, rem being a job's
// remaining time: the waiting ones from the last round's order and
// s.Changed when o saw the round before, else sorted afresh. The slice is
// o's, valid until the next call.
func (o *srtfOrder) order(s *engine.Snapshot, rem func(*engine.Status) float64) []*engine.Status {
	kept := s.Incremental && s.From() != nil && o.seen.Next(s) && o.apply(s, rem)
	// The running jobs' remaining time moves: read it, in the last
	// round's order, and sort (srtf_run.go); then merge.
	o.running(s, rem)
	if !kept || len(o.run)+len(o.wait) != len(s.Jobs) {
		o.rebuild(s, rem)
	}
	o.jobs, o.keys = o.jobs[:0], o.keys[:0]
	i := 0
	for _, r := range o.run {
		for i < len(o.wait) && srtfCompare(o.wait[i], r) < 0 {
			o.jobs, o.keys = append(o.jobs, o.wait[i].st), append(o.keys, o.wait[i].k)
			i++
		}
		o.jobs, o.keys = append(o.jobs, r.st), append(o.keys, r.k)
	}
	for _, w := range o.wait[i:] {
		o.jobs, o.keys = append(o.jobs, w.st), append(o.keys, w.k)
	}
	return o.jobs
}

// Key is the key (remaining time) of the job at index i of the order the
// last call to order returned: the value rem gave it, read once a round
// for a running job, once as it came to wait for a waiting one (its
// progress stands still while it waits).
func (o *srtfOrder) Key(i int, _ *engine.Status) float64 { return o.keys[i] }

// rebuild sorts the waiting jobs of s afresh; on a snapshot of no engine
// (or not one engine's slots) the next round sorts again.
func (o *srtfOrder) rebuild(s *engine.Snapshot, rem func(*engine.Status) float64) {
	clear(o.wait)
	o.wait = o.wait[:0]
	o.in.Clear()
	keep := s.Incremental && s.From() != nil
	for _, st := range s.Jobs {
		if len(st.GPUs) > 0 {
			continue
		}
		k := rem(st)
		o.wait = append(o.wait, srtfKeyed{k, st})
		if keep {
			if v, _ := o.in.Add(st); v != nil {
				*v = k
			} else {
				keep = false
			}
		}
	}
	slices.SortFunc(o.wait, srtfCompare)
	if !keep {
		o.seen.Stop()
	}
}

// apply brings the waiting order up to s from s.Changed; false when a
// job's slot holds another job o never saw leave (not this engine's
// rounds). order checks the counts.
func (o *srtfOrder) apply(s *engine.Snapshot, rem func(*engine.Status) float64) bool {
	// Out first, every changed job that waited (a new job may have taken
	// one's slot; a job that waits still may have a new history).
	for _, st := range s.Changed {
		k := o.in.Get(st)
		if k == nil {
			continue
		}
		i, ok := slices.BinarySearchFunc(o.wait, srtfKeyed{*k, st}, srtfCompare)
		if !ok || o.wait[i].st != st {
			return false
		}
		o.wait = slices.Delete(o.wait, i, i+1)
		o.in.Drop(st)
	}
	came := o.came[:0]
	for _, st := range s.Changed {
		if st.State.Terminal() || len(st.GPUs) > 0 {
			continue
		}
		v, fresh := o.in.Add(st)
		if v == nil || !fresh {
			return false
		}
		*v = rem(st)
		came = append(came, srtfKeyed{*v, st})
	}
	defer clear(came)
	if len(came) <= 8 {
		for _, c := range came {
			i, _ := slices.BinarySearchFunc(o.wait, c, srtfCompare)
			o.wait = slices.Insert(o.wait, i, c)
		}
	} else {
		// Many: sort them and merge, in one pass over the order.
		slices.SortFunc(came, srtfCompare)
		next := kept.MergeInto(o.next[:0], o.wait, came, srtfCompare)
		clear(o.wait)
		o.wait, o.next = next, o.wait[:0]
	}
	o.came = came[:0]
	return true
}
