package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/cluster"
)

// Rounds that cost what changed (issue 19). A policy that keeps its own
// per-job state from round to round (Tiresias' queues) need not look at
// every active job to learn what moved: the snapshot lists the jobs whose
// state or GPUs changed since the previous round (Snapshot.Changed). And a
// round in which every running job keeps its GPUs may be planned as "as
// before, plus these" (Plan.Keep): the engine then checks and places only
// the jobs listed, so neither side walks the jobs that keep running.

// touch records that st's state, GPUs or history changed since the last
// round's snapshot: it joins the next snapshot's Changed, once.
func (e *Engine) touch(st *Status) {
	if !e.inRound {
		e.freezeReason(st) // before it changes
	}
	if st.touched == e.epoch {
		return
	}
	st.touched = e.epoch
	e.changed = append(e.changed, st)
}

// handChanged hands the jobs touched since the last round to s.Changed and
// starts a new epoch. The two slices take turns: the one handed out the
// round before, which its policy no longer holds, collects the next
// round's.
func (e *Engine) handChanged(s *Snapshot) {
	sc := &e.scratch
	clear(sc.changedOut) // let ended jobs go
	out := e.changed
	e.changed = sc.changedOut[:0]
	sc.changedOut = out
	if e.incrPolicy {
		s.Changed, s.Incremental, s.AddOnly = out, e.incr, e.addOnly()
	}
	s.Explains = e.explains
	e.epoch++
}

// setPolicyMode sets what the engine does for policy p: incremental
// snapshots (IncrementalPolicy) and, with Config.LazyCounters, lazy
// counters. Switching them off brings every active job's counters up to
// date first; switching them on starts a new log.
func (e *Engine) setPolicyMode(p Policy) {
	ip, ok := p.(IncrementalPolicy)
	e.incrPolicy = ok && ip.Incremental()
	xp, ok := p.(ExplainsWhenRead)
	e.explains = ok && xp.ExplainsWhenRead()
	jp, ok := p.(JobsOnDemand)
	e.lazyJobs = e.incrPolicy && ok && jp.JobsOnDemand()
	if !e.lazyJobs {
		e.list() // the tombstones go: the list is read as it is
	}
	lazy := e.incrPolicy && e.cfg.LazyCounters
	switch {
	case e.lazy && !lazy:
		for _, st := range e.list() {
			e.sync(st)
		}
		e.lazy = false
	case !e.lazy && lazy:
		e.acctBase += len(e.acctLog)
		e.acctLog = e.acctLog[:0]
		for _, st := range e.list() {
			st.acct = e.acctBase
		}
		e.lazy = true
	}
}

// logAccount logs a round's time: the active jobs count their seconds up
// to it when synced.
func (e *Engine) logAccount(now float64) {
	if n := len(e.acctLog); n > 0 && e.acctLog[n-1] == now {
		return // counting to the same time twice adds nothing
	}
	if n := len(e.acctLog); !whole(now) || (n > 0 && now < e.acctLog[n-1]) {
		e.lastOdd = e.acctBase + n
	}
	e.acctLog = append(e.acctLog, now)
	if len(e.acctLog) >= maxLog {
		// Count every active job up to now and start the log afresh: the
		// same additions each job's next sync would make, made earlier,
		// so the log's memory stays bounded (once every maxLog rounds,
		// a pass over the active jobs).
		for _, st := range e.list() {
			e.sync(st)
		}
		e.acctBase += len(e.acctLog)
		e.acctLog = e.acctLog[:0]
	}
}

// maxLog is the most round times a lazy log holds (the simulator's
// too).
var maxLog = 1 << 16

// sync brings st's counters up to the last logged round time, counting
// through every logged time it missed, in order: the sums a round by
// round count makes, to the bit. Without lazy counters it does nothing.
// (An active job's acct is never below acctBase: a log is dropped only
// once every active job has counted it.)
func (e *Engine) sync(st *Status) {
	if !e.lazy {
		return
	}
	first := st.acct
	ts := e.acctLog[st.acct-e.acctBase:]
	st.acct = e.acctBase + len(e.acctLog)
	if len(ts) > 0 && e.lastOdd < first && e.syncWhole(st, ts[len(ts)-1]) {
		return
	}
	// countTo at each time, with the counters in registers: nothing else
	// changes the job in between.
	since := st.since
	if len(st.GPUs) > 0 {
		held := st.HeldGPUs()
		executed, attained, typeNow, ran := st.Executed, st.Attained, st.typeNow, st.typeRan
		for _, t := range ts {
			dt := t - since
			if dt <= 0 {
				continue
			}
			executed += dt
			attained += dt * held
			typeNow += dt
			ran = true
			since = t
		}
		st.Executed, st.Attained, st.typeNow, st.typeRan, st.since = executed, attained, typeNow, ran, since
		return
	}
	waited := st.Waited
	for _, t := range ts {
		dt := t - since
		if dt <= 0 {
			continue
		}
		waited += dt
		since = t
	}
	st.Waited, st.since = waited, since
}

// syncWhole is sync through logged times that are whole seconds, in
// order, up to end: when the job's counters, its GPUs and the seconds to
// add are whole numbers too (below 2^52), every addition the loop makes
// is exact, so the sums telescope and adding end - since at once gives
// the very same bits. It reports false, changing nothing, otherwise.
func (e *Engine) syncWhole(st *Status, end float64) bool {
	if !whole(st.since) {
		return false
	}
	d := end - st.since
	if d <= 0 {
		return true // every step adds nothing, as in the loop
	}
	if len(st.GPUs) > 0 {
		held := st.HeldGPUs()
		ex, at, tn := st.Executed+d, st.Attained+d*held, st.typeNow+d
		if !whole(held) || !whole(st.Executed) || !whole(st.Attained) || !whole(st.typeNow) || !whole(ex) || !whole(at) || !whole(tn) {
			return false
		}
		st.Executed, st.Attained, st.typeNow, st.typeRan, st.since = ex, at, tn, true, end
		return true
	}
	w := st.Waited + d
	if !whole(st.Waited) || !whole(w) {
		return false
	}
	st.Waited, st.since = w, end
	return true
}

// whole reports whether x is a whole number below 2^52 in size: sums and
// products of such numbers that stay below it are exact.
func whole(x float64) bool { return x == math.Trunc(x) && math.Abs(x) < 1<<52 }

// Sync brings st's time-dependent counters (Attained, Executed, Waited,
// TypeSeconds) up to the snapshot's time. Under an engine that keeps them
// lazily (Config.LazyCounters, for an IncrementalPolicy) a job's counters
// in a round's snapshot are current only after Sync; a policy reading
// them calls it first. Elsewhere it does nothing.
func (s *Snapshot) Sync(st *Status) {
	if s.eng != nil {
		s.eng.sync(st)
	}
}

// Sync is Snapshot.Sync for an executor reading an active job's counters
// between rounds.
func (e *Engine) Sync(st *Status) { e.sync(st) }

// addOnly reports whether this round could take a Keep plan: the placer
// places around the GPUs held, no GPU is down and no jobs share GPUs.
func (e *Engine) addOnly() bool {
	_, adder := e.cfg.Placer.(Adder)
	return adder && e.nDown == 0 && e.co == nil && e.partGPUs() == 0
}

// gpuTypeIndex fills e.typeOf (GPU -> index of its type in the cluster's
// GPUTypes) and e.heldOfType (GPUs held per type index).
func (e *Engine) gpuTypeIndex() {
	c := e.cfg.Cluster
	e.typeOf = make([]uint16, c.TotalGPUs())
	for g := range e.typeOf {
		e.typeOf[g] = uint16(typeIndex(c, c.NodeOf(cluster.GPUID(g)).GPUType))
	}
	e.heldOfType = make([]int, len(c.GPUTypes()))
}

// checkKeep validates a Keep plan: every job it lists is active, holds no
// GPUs, is listed once, within its limits and of whole GPUs, unpacked,
// and the GPUs it asks, with those held, fit each type. It returns the
// status of each job listed, in plan order.
func (e *Engine) checkKeep(p Plan, s *Snapshot) ([]*Status, error) {
	if !s.AddOnly {
		return nil, fmt.Errorf("plan keeps the running jobs (Plan.Keep), which this round cannot take (Snapshot.AddOnly is false)")
	}
	freed, err := e.checkStops(p)
	if err != nil {
		return nil, err
	}
	sc := &e.scratch
	planned := sc.planned[:0]
	perType := sc.perTypeCounts(e.cfg.Cluster)
	e.resetParts()
	hint := 0
	c := e.cfg.Cluster
	for _, a := range p.Run {
		st, err := e.checkAssignment(a, &hint)
		if err != nil {
			return nil, err
		}
		planned = append(planned, st)
		if len(st.GPUs) > 0 {
			return nil, fmt.Errorf("plan keeps the running jobs (Plan.Keep) and lists job %s, which holds GPUs", a.Job)
		}
		if a.PackWith != "" || st.Job.Fractional() {
			return nil, fmt.Errorf("plan keeps the running jobs (Plan.Keep) and packs job %s or gives it part of a GPU", a.Job)
		}
		t := a.GPUType
		if t == "" {
			t = st.Job.GPUType
		}
		if t != "" {
			k := typeIndex(c, t)
			if k < 0 {
				return nil, fmt.Errorf("plan asks for %d %s GPUs, the cluster has 0", a.GPUs, t)
			}
			perType[k] += a.GPUs
		}
	}
	sc.planned = planned
	held := 0
	for k, n := range e.heldOfType {
		held += n - freed[k]
	}
	total := held
	for _, a := range p.Run {
		total += a.GPUs
	}
	if total > c.TotalGPUs() {
		return nil, fmt.Errorf("plan asks for %d GPUs beside the %d held, the cluster has %d", total-held, held, c.TotalGPUs())
	}
	for k, n := range perType {
		if t, h := c.GPUTypes()[k], e.heldOfType[k]-freed[k]; n+h > c.GPUsOfType(t) {
			return nil, fmt.Errorf("plan asks for %d %s GPUs beside the %d held, the cluster has %d", n, t, h, c.GPUsOfType(t))
		}
	}
	sc.remember(planned)
	return planned, nil
}

// checkStops validates a Keep plan's Stop (every job it lists is active,
// holds GPUs and is listed once, marked checked this round) and returns
// the GPUs the jobs stopped hold per type index, in scratch memory; the
// jobs, in the engine's order of the active jobs, are left in
// scratch.stops.
func (e *Engine) checkStops(p Plan) ([]int, error) {
	sc := &e.scratch
	freed := slices.Grow(sc.freed[:0], len(e.heldOfType))[:len(e.heldOfType)]
	clear(freed)
	sc.freed = freed
	stops := sc.stops[:0]
	for _, id := range p.Stop {
		st := e.jobs[id]
		if st == nil || st.State.Terminal() {
			return nil, fmt.Errorf("plan stops job %q, which is not active", id)
		}
		if st.checked == e.rounds {
			return nil, fmt.Errorf("plan stops job %s twice", id)
		}
		if len(st.GPUs) == 0 {
			return nil, fmt.Errorf("plan stops job %s, which holds no GPUs", id)
		}
		st.checked = e.rounds
		for _, g := range st.GPUs {
			freed[e.typeOf[g]]++
		}
		stops = append(stops, st)
	}
	slices.SortFunc(stops, func(a, b *Status) int {
		if lessSubmit(a, b) {
			return -1
		}
		return 1 // statuses are distinct
	})
	sc.stops = stops
	return freed, nil
}

// scheduleKeep finishes a round whose plan keeps every running job
// (Plan.Keep) but those it stops (Plan.Stop): it checks, stops and places
// only the jobs the plan lists.
func (e *Engine) scheduleKeep(plan Plan, snap *Snapshot) ([]Change, error) {
	now := snap.Now
	planned, err := e.checkKeep(plan, snap)
	if err != nil {
		return nil, err
	}
	e.memos(plan)
	e.explain(plan, planned, now)
	declined, err := e.decline(plan, now)
	if err != nil {
		return nil, err
	}
	// The stopped jobs free their GPUs first, as a full plan's
	// preemptions do.
	sc := &e.scratch
	for _, st := range sc.stops {
		declined = e.preempt(st, now, declined)
	}
	clear(sc.stops)
	if len(plan.Run) == 0 {
		return declined, nil
	}
	placed := e.placeAdded(e.cfg.Placer.(Adder), plan.Run)
	defer e.placedDone(plan.Run)
	if err := e.checkPlacement(Plan{Run: plan.Run}, placed, true); err != nil {
		return nil, fmt.Errorf("placer %s: %w", e.cfg.Placer.Name(), err)
	}
	return e.apply(plan, planned, placed, declined, now), nil
}

// memos stores the plan's memos on their jobs.
func (e *Engine) memos(plan Plan) {
	if len(plan.Memo) == 0 {
		return // a policy's map, emptied but kept, may be large to walk
	}
	for id, m := range plan.Memo {
		if st := e.jobs[id]; st != nil {
			st.Memo = m
		}
	}
}
