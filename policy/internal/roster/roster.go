// Package roster keeps, from one round of an engine to the next, what a
// policy planning from what changed (engine.IncrementalPolicy, issue 19)
// needs to know of the active jobs without walking them: the waiting jobs
// in the engine's order (submission time, then ID), how many GPUs the
// active jobs ask for and how many the running ones hold, and how many
// jobs the policy's shortcut cannot plan. It is brought up to date from
// Snapshot.Changed, so a round costs what changed, not what exists.
//
// FIFO, SRTF and Gandiva use it (policy/classic), Themis (policy/fair) and
// fifo-perf (policy/gavel) too; Tiresias keeps its own (tiresias_fast.go).
package roster

import (
	"slices"
	"strings"

	"github.com/tide-sched/tide/engine"
)

// Roster is the kept state. The zero value is ready; Odd may be set once,
// before the first round.
type Roster struct {
	// Odd, when set, marks the jobs beyond those Roster itself counts odd
	// that the policy's shortcut cannot plan (Gandiva's fragmented jobs,
	// Themis' elastic ones). It is asked again whenever a job changes,
	// so it may read only what changes with Snapshot.Changed.
	Odd func(s *engine.Snapshot, st *engine.Status) bool

	seen Follower // the rounds the roster holds
	jobs Slots[entry]

	waiting []*engine.Status // in the engine's order
	demand  int              // GPUs the active jobs ask for (Job.GPUs)
	held    int              // GPUs the running jobs hold
	running int
	odd     int
	// Kept counts the rounds the policy planned from the roster (Plan.Keep):
	// for tests and benchmarks.
	Kept int

	// BeforeRebuild, when set, is called before the roster is built
	// afresh from a snapshot (its Waiting and log still those of before).
	BeforeRebuild func()
	logging       bool
	log           []WaitOp
}

// WaitOp is a change to Waiting's order: job St put in at index At (its
// index just after) or taken out from it.
type WaitOp struct {
	St *engine.Status
	At int
	In bool
}

// Log starts (on) or stops logging the changes to Waiting's order, and
// forgets those logged: a policy that explains a round's waiting jobs by
// their index (engine.Explainer) finds an index of a round before by
// undoing the log (UndoIndex).
func (r *Roster) Log(on bool) {
	r.logging = on
	clear(r.log)
	r.log = r.log[:0]
}

// Logged is how many changes were logged since Log.
func (r *Roster) Logged() int { return len(r.log) }

// UndoIndex returns i, the index now in Waiting of job st (-1 when not in
// it), as it was before the changes logged from the from-th on, and
// whether st was in Waiting then.
func (r *Roster) UndoIndex(st *engine.Status, i, from int) (int, bool) {
	for k := len(r.log) - 1; k >= from; k-- {
		op := r.log[k]
		switch {
		case op.St == st && op.In:
			i = -1 // not in before
		case op.St == st:
			i = op.At
		case i < 0:
		case op.In && op.At < i:
			i--
		case !op.In && op.At <= i:
			i++
		}
	}
	return i, i >= 0
}

// Before returns Waiting as it was before the changes logged from the
// from-th on, in out's memory.
func (r *Roster) Before(from int, out []*engine.Status) []*engine.Status {
	out = append(out[:0], r.waiting...)
	for k := len(r.log) - 1; k >= from; k-- {
		if op := r.log[k]; op.In {
			out = slices.Delete(out, op.At, op.At+1)
		} else {
			out = slices.Insert(out, op.At, op.St)
		}
	}
	return out
}

// Index is st's index in Waiting, -1 when it is not there (another
// status of the same job, another engine's, is not st).
func (r *Roster) Index(st *engine.Status) int {
	if i, ok := slices.BinarySearchFunc(r.waiting, st, compare); ok && r.waiting[i] == st {
		return i
	}
	return -1
}

type entry struct {
	held  int  // its GPUs when last seen
	waits bool // in waiting
	odd   bool // counted in odd
}

// Begin brings the roster up to round s and reports whether the round may
// be planned from it: the roster follows s's engine (the snapshot is the
// engine's round after the one the roster last saw, with Changed complete,
// or a round the roster could rebuild itself from), the round may take a
// Keep plan (Snapshot.AddOnly, no GPU down), the cluster has one GPU type
// and one site, and no active job is odd. A policy calls it once per round,
// whether it then plans from the roster or in full; on a snapshot that
// does not carry Changed (the first round, after a failed round or a
// restored state, a snapshot built by hand, a wrapper's) it does nothing
// and reports false, and the next round that carries one rebuilds it from
// Snapshot.Jobs.
func (r *Roster) Begin(s *engine.Snapshot) bool {
	return r.Follow(s) && r.odd == 0 && s.AddOnly && s.Down == nil && len(s.Cluster.GPUTypes()) == 1 && len(s.Cluster.Sites()) <= 1
}

// Follow is Begin without the conditions on the round: it reports whether
// the roster now holds round s (false on a snapshot without Changed).
func (r *Roster) Follow(s *engine.Snapshot) bool {
	if !s.Incremental || s.From() == nil {
		r.seen.Stop()
		return false
	}
	if !r.seen.Next(s) || !r.apply(s) {
		r.rebuild(s)
	}
	return true
}

// Follower tracks whether a keeper of per-round state has seen every
// round of one engine up to the last: then the next round's
// Snapshot.Changed brings it up to date.
type Follower struct {
	ok    bool
	from  *engine.Engine
	round int
}

// Next reports whether s is the round after the last one followed, of
// the same engine, and records s as followed.
func (f *Follower) Next(s *engine.Snapshot) bool {
	next := f.ok && f.from == s.From() && s.Round == f.round+1
	f.ok, f.from, f.round = s.From() != nil, s.From(), s.Round
	return next
}

// Stop records that the keeper missed a round: the next Next reports
// false.
func (f *Follower) Stop() { f.ok = false }

// Waiting are the active jobs that hold no GPUs, in the engine's order
// (submission time, then ID): shared, valid until the next Begin.
func (r *Roster) Waiting() []*engine.Status { return r.waiting }

// Demand is the GPUs the active jobs ask for (Job.GPUs), all together.
func (r *Roster) Demand() int { return r.demand }

// Held is the GPUs the running jobs hold.
func (r *Roster) Held() int { return r.held }

// Running is how many jobs hold GPUs.
func (r *Roster) Running() int { return r.running }

// Active is how many jobs are active, running or waiting: len(Snapshot.Jobs)
// without reading them (engine.JobsOnDemand).
func (r *Roster) Active() int { return r.running + len(r.waiting) }

// Fits reports whether every active job fits the cluster's GPUs at once,
// each on the count it asks for: then a greedy pass in any order runs
// them all. Valid after a Begin that reported true.
func (r *Roster) Fits(s *engine.Snapshot) bool {
	return r.demand <= s.Available("", s.Cluster.GPUTypes()[0])
}

// apply updates the roster from s.Changed; false when a job's slot holds
// another job the roster never saw leave (not this engine's rounds).
func (r *Roster) apply(s *engine.Snapshot) bool {
	// The jobs that left first: a new job may have taken one's slot.
	for _, st := range s.Changed {
		if st.State.Terminal() {
			r.drop(st)
		}
	}
	for _, st := range s.Changed {
		if !st.State.Terminal() && !r.add(s, st) {
			return false
		}
	}
	return true
}

// rebuild makes the roster from the active jobs of s (Snapshot.ActiveJobs:
// a policy that reads them on demand, engine.JobsOnDemand, may use a
// roster).
func (r *Roster) rebuild(s *engine.Snapshot) {
	if r.BeforeRebuild != nil {
		r.BeforeRebuild()
	}
	r.Log(false) // the changes from here on are not logged
	r.jobs.Clear()
	clear(r.waiting)
	r.waiting = r.waiting[:0]
	r.demand, r.held, r.running, r.odd = 0, 0, 0, 0
	for _, st := range s.ActiveJobs() {
		r.add(s, st) // the engine's slots are unique among its active jobs
	}
}

// add keeps st, or updates it; false when its slot holds another job.
func (r *Roster) add(s *engine.Snapshot, st *engine.Status) bool {
	e, fresh := r.jobs.Add(st)
	if e == nil {
		return false
	}
	if fresh {
		r.demand += st.Job.GPUs
	}
	r.held += len(st.GPUs) - e.held
	if (len(st.GPUs) > 0) != (e.held > 0) {
		if len(st.GPUs) > 0 {
			r.running++
		} else {
			r.running--
		}
	}
	e.held = len(st.GPUs)
	Flag(&e.odd, &r.odd, r.isOdd(s, st))
	switch waits := len(st.GPUs) == 0; {
	case waits && !e.waits:
		i, _ := slices.BinarySearchFunc(r.waiting, st, compare)
		r.waiting = slices.Insert(r.waiting, i, st)
		e.waits = true
		if r.logging {
			r.log = append(r.log, WaitOp{St: st, At: i, In: true})
		}
	case !waits && e.waits:
		r.unwait(st)
		e.waits = false
	}
	return true
}

// Flag sets *flag to v, counting the flags set in *n.
func Flag(flag *bool, n *int, v bool) {
	if v != *flag {
		*flag = v
		if v {
			*n++
		} else {
			*n--
		}
	}
}

// isOdd reports whether the shortcut cannot plan st: a fractional or
// packed job, one running on other than the GPUs it asks for, one asking
// for a type the cluster lacks, or one the policy's Odd marks.
func (r *Roster) isOdd(s *engine.Snapshot, st *engine.Status) bool {
	j := st.Job
	if j.Fractional() || st.PackedWith != "" || (len(st.GPUs) > 0 && len(st.GPUs) != j.GPUs) {
		return true
	}
	if t := s.Cluster.GPUTypes(); j.GPUType != "" && (len(t) != 1 || j.GPUType != t[0]) {
		return true
	}
	return r.Odd != nil && r.Odd(s, st)
}

// drop forgets st, which ended.
func (r *Roster) drop(st *engine.Status) {
	e := r.jobs.Get(st)
	if e == nil {
		return
	}
	r.demand -= st.Job.GPUs
	r.held -= e.held
	if e.held > 0 {
		r.running--
	}
	if e.odd {
		r.odd--
	}
	if e.waits {
		r.unwait(st)
	}
	r.jobs.Drop(st)
}

// unwait takes st out of the waiting jobs.
func (r *Roster) unwait(st *engine.Status) {
	if i, ok := slices.BinarySearchFunc(r.waiting, st, compare); ok {
		r.waiting = slices.Delete(r.waiting, i, i+1)
		if r.logging {
			r.log = append(r.log, WaitOp{St: st, At: i})
		}
	}
}

// compare is the engine's order of active jobs: submission time, then ID.
func compare(a, b *engine.Status) int {
	if a.Job.Submit != b.Job.Submit {
		if a.Job.Submit < b.Job.Submit {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Job.ID, b.Job.ID)
}

// Slots keeps a T for each active job of one engine, by Status.Slot (the
// slot alone does not name the job: each entry remembers its status).
type Slots[T any] struct{ s []slot[T] }

type slot[T any] struct {
	st *engine.Status
	v  T
}

// Get is st's entry, nil when st has none.
func (x *Slots[T]) Get(st *engine.Status) *T {
	if st.Slot < 0 || st.Slot >= len(x.s) || x.s[st.Slot].st != st {
		return nil
	}
	return &x.s[st.Slot].v
}

// Add returns st's entry and whether it is new (the zero T); nil when st
// has no slot or its slot holds another job, which the keeper never saw
// leave (not one engine's jobs). The entry is valid until the next Add.
func (x *Slots[T]) Add(st *engine.Status) (v *T, fresh bool) {
	if st.Slot < 0 {
		return nil, false
	}
	if st.Slot >= len(x.s) {
		x.s = slices.Grow(x.s, st.Slot+1-len(x.s))[:st.Slot+1]
	}
	e := &x.s[st.Slot]
	if e.st != st {
		if e.st != nil {
			return nil, false
		}
		*e, fresh = slot[T]{st: st}, true
	}
	return &e.v, fresh
}

// Drop forgets st's entry.
func (x *Slots[T]) Drop(st *engine.Status) {
	if x.Get(st) != nil {
		x.s[st.Slot] = slot[T]{}
	}
}

// Clear forgets every entry.
func (x *Slots[T]) Clear() { clear(x.s) }
