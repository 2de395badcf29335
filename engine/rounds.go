package engine

import (
	"slices"

	"github.com/tide-sched/tide/cluster"
)

// A scheduling round touches every active job once (accounting; the
// snapshot holds pointers to the engine's records, not copies), unless
// its policy plans incrementally with lazy counters (incremental.go), and
// allocates nothing once the engine has seen its largest
// round: the buffers below are reused, jobs named by a plan are found
// through the previous plan's order before falling back to the ID map, and
// jobs that end leave the active list lazily (compact), swept out by the
// round's own pass over the active jobs (account).

// scratch is the memory a round reuses.
type scratch struct {
	snap    Snapshot
	ptrs    []*Status // the snapshot's Jobs
	planned []*Status // this round's plan, by assignment
	last    []*Status // the last plan checked, by assignment (lookup hints)
	perType []int     // GPUs a plan asks per cluster type index
	held    map[string][]cluster.GPUID
	adds    []Assignment               // the assignments a round only adds (Adder)
	added   map[string][]cluster.GPUID // their GPUs, by job (placeAdded)
	// reasoned are the jobs the last round's plan gave a non-zero entry
	// in Plan.Reasons (reasons.go).
	reasoned []*Status
	// partShare sums the shares of the plan's fractional jobs per GPU type
	// index, the last entry for jobs of any type; anyParts says the plan
	// has one (fraction.go).
	partShare []float64
	anyParts  bool
	// changedOut is the last snapshot's Changed (incremental.go).
	changedOut []*Status
	// stops are a Keep plan's stopped jobs and freed their GPUs per type
	// index (incremental.go).
	stops []*Status
	freed []int
	// changes is the memory of the changes Schedule returns: the last
	// round's, cleared when the next one starts (Schedule).
	changes []Change
}

// keepChanges keeps changes, a round's result built on sc.changes (grown
// as needed), for the next round to reuse.
func (sc *scratch) keepChanges(changes []Change) {
	if cap(changes) >= cap(sc.changes) {
		sc.changes = changes
	}
}

// perTypeCounts returns a zeroed count per GPU type of c.
func (sc *scratch) perTypeCounts(c *cluster.Cluster) []int {
	n := len(c.GPUTypes())
	if cap(sc.perType) < n {
		sc.perType = make([]int, n)
	}
	sc.perType = sc.perType[:n]
	clear(sc.perType)
	return sc.perType
}

// remember keeps planned as the hints for the next round's lookups.
func (sc *scratch) remember(planned []*Status) {
	for i, st := range planned {
		st.planPos = i + 1
	}
	sc.last, sc.planned = planned, sc.last
}

// lookup finds the job id names, trying first the job at *hint in the last
// plan: plans change little from round to round, so the ID map is seldom
// needed. It moves *hint past the job found.
func (e *Engine) lookup(id string, hint *int) *Status {
	last := e.scratch.last
	if h := *hint; h < len(last) && last[h].Job.ID == id && !last[h].State.Terminal() {
		*hint = h + 1
		return last[h]
	}
	st := e.jobs[id]
	if st != nil && st.planPos > 0 && st.planPos <= len(last) && last[st.planPos-1] == st {
		*hint = st.planPos
	}
	return st
}

// typeIndex is t's index in c.GPUTypes(), -1 when c has no such type.
func typeIndex(c *cluster.Cluster, t string) int {
	for k, u := range c.GPUTypes() {
		if u == t {
			return k
		}
	}
	return -1
}

// compact drops the jobs that ended since the last compact from the
// active list, under every policy: each becomes a tombstone (Status.gone)
// with its slot freed, in the list's order (they are sorted by submission
// first). The tombstones are swept out in one pass: by the next round's
// pass over the active jobs where it makes one (account: a round whose
// counters are kept eagerly, every round of a policy that plans in
// full), by the first read of the list (list), and at once when they
// would be a quarter of it. A job ending thus costs compact O(log k)
// (the sort of the k that ended since the last compact), and the sweep
// at most one move of the list for all the jobs that ended, inside a
// pass the round makes anyway (O(1) amortized where the quarter sweeps),
// rather than a move of the entries after it each. Which slots are
// freed, and in which order, is what removing them at once would give: a
// sweep frees the ended jobs it meets in the list's order too.
func (e *Engine) compact() {
	if e.ended == 0 {
		return
	}
	if len(e.endedList) != e.ended || e.tombs+e.ended >= len(e.active)/4 {
		e.compactAll()
		return
	}
	slices.SortFunc(e.endedList, func(a, b *Status) int {
		if lessSubmit(a, b) {
			return -1
		}
		return 1
	})
	for _, st := range e.endedList {
		e.left(st)
	}
	e.tombs += e.ended
	clear(e.endedList)
	e.endedList, e.ended = e.endedList[:0], 0
}

// list returns the active list with every job that ended out of it.
func (e *Engine) list() []*Status {
	e.compact()
	if e.tombs > 0 {
		e.compactAll()
	}
	return e.active
}

// compactAll drops every job that ended, and every tombstone, from the
// active list in one pass.
func (e *Engine) compactAll() {
	clear(e.endedList)
	e.endedList = e.endedList[:0]
	k := 0
	for _, st := range e.active {
		switch {
		case st.gone:
		case !st.State.Terminal():
			e.active[k] = st
			k++
		default:
			e.left(st)
		}
	}
	clear(e.active[k:])
	e.active = e.active[:k]
	e.ended, e.tombs = 0, 0
}

// left forgets an ended job that has left the active list: its slot is
// free, and its record too under Config.ForgetEnded.
func (e *Engine) left(st *Status) {
	st.gone = true
	e.slots = append(e.slots, st.Slot)
	if e.cfg.ForgetEnded && e.jobs[st.Job.ID] == st {
		delete(e.jobs, st.Job.ID)
	}
}

// takeSlot hands out a Status.Slot: one a job that left the active list
// gave back, else a new one.
func (e *Engine) takeSlot() int {
	if n := len(e.slots); n > 0 {
		s := e.slots[n-1]
		e.slots = e.slots[:n-1]
		return s
	}
	e.nSlots++
	return e.nSlots - 1
}
