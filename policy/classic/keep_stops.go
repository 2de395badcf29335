package classic

import (
	"github.com/tide-sched/tide/engine"
)

// A congested round as "as before, less these, plus those" (issue 19).
//
// SRTF and EDF plan a round in which some job does not fit with a greedy
// pass over their order of every active job: it runs jobs while they fit,
// preempting the running ones it leaves out. The plan lists every job it
// runs, and the engine then checks, keeps and places every running job,
// a pass over all of them with map lookups for each. Both policies run
// every job on the GPUs it asks for, so a running job the pass takes keeps
// its GPUs: the same plan reads "keep the running jobs, stop those the pass
// leaves out, start the waiting ones it takes" (engine.Plan.Keep,
// Plan.Stop), which the engine checks, stops and places job for job as it
// does the full plan (the preemptions in its order of the jobs, then the
// starts in plan order, around the GPUs held), touching only the jobs
// listed. Its reasons are the full plan's: those of the jobs it preempts
// in Plan.Reasons, the waiting jobs' worked out when read (explain.Queue,
// which recorded the full plan).

// stopKeeper is the memory a policy keeps for such plans.
type stopKeeper struct {
	run  []engine.Assignment // the waiting jobs the pass starts
	stop []string            // the running jobs it leaves out
	n    int                 // rounds planned so: for tests
}

// keep rewrites plan, the greedy pass over order (every active job of s,
// in order: the plan lists jobs of order in order's order) with its
// reasons recorded (Plan.Explain set), as a Keep plan with Stop, and
// reports true; it reports false, leaving plan as it is, when the round
// cannot take such a plan (Snapshot.AddOnly, one GPU type, one site, no
// GPU down) or the plan is not one: it declines, packs or shapes jobs,
// gives a running job other GPUs than it holds, or starts a job on part
// of a GPU.
func (k *stopKeeper) keep(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status) bool {
	if !s.Incremental || !s.AddOnly || s.Down != nil || plan.Explain == nil || len(plan.Decline) > 0 || len(plan.Stop) > 0 ||
		len(s.Cluster.GPUTypes()) != 1 || len(s.Cluster.Sites()) > 1 {
		return false
	}
	run, stop := k.run[:0], k.stop[:0]
	defer func() { k.run, k.stop = run[:0], stop[:0] }() // the memory, for the next round
	i := 0
	for _, st := range order {
		var a *engine.Assignment
		if i < len(plan.Run) && plan.Run[i].Job == st.Job.ID {
			a = &plan.Run[i]
			i++
		}
		switch {
		case a != nil && (a.PackWith != "" || a.Nodes != nil || a.Site != ""):
			return false
		case a != nil && len(st.GPUs) > 0:
			if a.GPUs != len(st.GPUs) || (a.GPUType != "" && a.GPUType != st.Alloc.GPUType) {
				return false // the job would be resized or moved
			}
		case a != nil:
			if st.Job.Fractional() {
				return false
			}
			run = append(run, *a)
		case len(st.GPUs) > 0:
			stop = append(stop, st.Job.ID)
		}
	}
	if i != len(plan.Run) {
		return false // the plan lists a job outside the order
	}
	plan.Run, plan.Stop, plan.Keep = run, stop, true
	k.n++
	return true
}
