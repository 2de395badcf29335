package gavel

import (
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// Rounds between re-plans that cost what changed (issue 19).
//
// Between its re-plans (Round seconds apart) Gavel keeps its last plan
// minus the jobs that left (keep): the running jobs keep their GPUs, a job
// of the plan that holds none is listed again, every other waiting job
// waits for the next re-plan. Nothing in that depends on how far the
// running jobs have got, so such a round is planned from what changed
// (Snapshot.Changed): the policy keeps, from round to round, the active
// jobs (roster.Roster), where each job stands in the last plan, which jobs
// of the plan hold no GPUs, and how many running jobs the plan does not
// keep where they are; and when every running job is kept, it plans the
// round as "as before, plus the jobs of the plan that hold none"
// (engine.Plan.Keep), explaining only the waiting jobs. The re-plans
// themselves are made in full: every job's priority moves with the time
// it has received. The plans are those of keep, job for job
// (TestFIFOPerfKeptMatchesFull).
type gavelKept struct {
	on     bool // the policy plans from what changed (Gavel.Incremental)
	roster roster.Roster
	jobs   roster.Slots[keptEntry]
	gen    int // bumped at each re-plan: older positions are stale
	// planOK says jobs, toStart and strays describe the last plan: the
	// policy made it, and has seen every round of the same engine since.
	planOK  bool
	seen    roster.Follower
	toStart []int // 1 + index in the last plan of its jobs holding no GPUs, ascending
	strays  int   // running jobs the last plan does not keep on their GPUs
	run     []engine.Assignment
	kept    int // rounds planned from what changed
	byID    map[string]int
}

// keptEntry is where a job stands against the last plan.
type keptEntry struct {
	pos    int  // 1 + its index in the last plan when gen is gavelKept.gen; else it is not in it
	gen    int  // gavelKept.gen when pos was set
	stray  bool // running on GPUs the last plan does not keep
	starts bool // in the last plan and holding no GPUs: listed in toStart
}

// Incremental implements engine.IncrementalPolicy: the rounds between
// re-plans are planned from what changed (gavel_kept.go), for the
// policies that opt in (fifo-perf) and never with space sharing (a Keep
// plan packs no pairs).
func (g *Gavel) Incremental() bool { return g.incr.on && !g.SpaceSharing }

// JobsOnDemand implements engine.JobsOnDemand: a round between re-plans
// planned from what changed reads no active job but those in Changed; the
// other rounds (a re-plan, a keep the kept state cannot follow, a rebuild)
// ask for the list first (Snapshot.ActiveJobs).
func (g *Gavel) JobsOnDemand() bool { return g.Incremental() }

// KeptRounds is how many rounds this instance planned from what changed:
// for tests and benchmarks.
func (g *Gavel) KeptRounds() int { return g.incr.kept }

// follow brings the kept state up to round s; it reports whether it holds
// the round (the roster does, at least: the plan's part may still wait for
// the next re-plan).
func (k *gavelKept) follow(g *Gavel, s *engine.Snapshot) bool {
	if !g.Incremental() {
		return false
	}
	if !k.roster.Follow(s) {
		k.planOK = false
		k.seen.Stop()
		return false
	}
	if !k.seen.Next(s) {
		k.planOK = false
	}
	if !k.planOK {
		return true
	}
	for _, st := range s.Changed {
		if st.State.Terminal() {
			if e := k.jobs.Get(st); e != nil {
				k.set(e, false, false)
				k.jobs.Drop(st)
			}
		}
	}
	for _, st := range s.Changed {
		if st.State.Terminal() {
			continue
		}
		e, _ := k.jobs.Add(st)
		if e == nil {
			k.planOK = false
			return true
		}
		k.place(g, s.Cluster, st, e)
	}
	return true
}

// place sets where st stands against the last plan: a running job the
// plan does not keep on its GPUs, or a fractional one it would start (a
// Keep plan lists none), is a stray; a job of the plan holding no GPUs
// starts.
func (k *gavelKept) place(g *Gavel, c *cluster.Cluster, st *engine.Status, e *keptEntry) {
	in := e.gen == k.gen && e.pos > 0
	running := len(st.GPUs) > 0
	stray := running && (!in || !keeps(c, g.last.Run[e.pos-1], st))
	starts := !running && in
	k.set(e, stray || (starts && st.Job.Fractional()), starts)
}

// keeps reports whether assignment a keeps running job st on its GPUs
// (the engine's rule: the same count, a compatible type, no shape asked,
// no site but its own: on a cluster of several sites a re-plan names the
// site of every job it runs).
func keeps(c *cluster.Cluster, a engine.Assignment, st *engine.Status) bool {
	return a.GPUs == len(st.GPUs) && (a.GPUType == "" || a.GPUType == st.Alloc.GPUType) && a.Nodes == nil &&
		(a.Site == "" || a.Site == c.NodeOf(st.GPUs[0]).Site) && a.PackWith == ""
}

// set updates e's stray and starts, and the count and list they feed.
func (k *gavelKept) set(e *keptEntry, stray, starts bool) {
	roster.Flag(&e.stray, &k.strays, stray)
	if starts != e.starts {
		e.starts = starts
		i, found := slices.BinarySearch(k.toStart, e.pos)
		switch {
		case starts && !found:
			k.toStart = slices.Insert(k.toStart, i, e.pos)
		case !starts && found:
			k.toStart = slices.Delete(k.toStart, i, i+1)
		}
	}
}

// planned records the plan a re-plan of round s made (g.last): where each
// active job stands in it, when the kept state follows the round. The
// engine has yet to apply the plan: the jobs it starts, stops or moves
// come back in the next round's Changed.
func (k *gavelKept) planned(g *Gavel, s *engine.Snapshot, followed bool) {
	k.planOK = false
	if followed {
		k.rebuild(g, s)
	}
}

// rebuild finds where each active job of round s stands in the last plan
// (a pass over the jobs, made at re-plans and at the first round after
// one the kept state did not follow).
func (k *gavelKept) rebuild(g *Gavel, s *engine.Snapshot) {
	k.planOK = false
	k.gen++
	if k.byID == nil {
		k.byID = map[string]int{}
	}
	clear(k.byID)
	for i, a := range g.last.Run {
		k.byID[a.Job] = i + 1
	}
	k.jobs.Clear()
	k.toStart, k.strays = k.toStart[:0], 0 // place inserts in order
	for _, st := range s.ActiveJobs() {
		e, _ := k.jobs.Add(st)
		if e == nil {
			return
		}
		if pos := k.byID[st.Job.ID]; pos > 0 {
			e.pos, e.gen = pos, k.gen
		}
		k.place(g, s.Cluster, st, e)
	}
	k.planOK = true
}

// keepKept is keep and its explanation for a round between re-plans,
// made from what changed; false when the round must take keep's full
// pass (a running job the last plan does not keep, a job the Keep plan
// cannot list, a round that cannot take a Keep plan).
func (g *Gavel) keepKept(s *engine.Snapshot) (engine.Plan, bool) {
	k := &g.incr
	if !k.planOK {
		k.rebuild(g, s)
	}
	if !k.planOK || k.strays > 0 || !s.AddOnly || s.Down != nil {
		return engine.Plan{}, false
	}
	run := k.run[:0]
	for _, pos := range k.toStart {
		a := g.last.Run[pos-1]
		if a.PackWith != "" || a.Nodes != nil {
			return engine.Plan{}, false
		}
		run = append(run, a)
	}
	k.run = run
	out := engine.Plan{Run: run, Keep: true}
	g.setNote(noteBetween)
	g.explainLazily(s, &out, k.roster.Held()) // the waiting jobs' reasons: gavel_reasons.go
	k.kept++
	return out, true
}
