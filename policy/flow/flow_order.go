package flow

import (
	"cmp"

	"github.com/tide-sched/tide/engine"
)

// The order of a round's jobs (Flow.jobs), from the last round's (issue 19).
//
// ElasticFlow (and EdgeFlow, tidal) plans the active jobs by priority
// class, highest first, then earliest deadline, ties in the snapshot's
// order: a stable sort of every active job, each round. A job's priority
// and deadline never change (they are its Job's), so the jobs that stay
// from one round to the next keep their order, but for ties, which follow
// the snapshot's order of this round. So each round starts from the last
// round's order of the jobs still active (found by engine slot), the jobs
// that came since after them, and kept.Order puts
// that in flowCompare's order: an insertion pass over the kept jobs (which
// moves none unless the snapshot's order of two tied jobs changed), the
// newcomers sorted apart and merged in. flowCompare breaks ties by the
// index in this round's snapshot, so it is a total order and the result
// is the stable sort's, job for job, whatever order the round started
// from (TestFlowOrderKept compares them over random rounds).
//
// So the last round's order is only where the sort starts: a round the
// policy did not see (a wrapper's, a state restored) leaves it further
// from sorted, and the insertion pass gives up and a full sort runs
// (kept.InsertionSorted). A snapshot whose jobs are not one engine's (two
// in a slot, or a slot < 0: a test's, built by hand) has no last order to
// start from: its jobs are sorted afresh.

// flowCompare orders the round's jobs: priority class (highest first),
// then earliest deadline (+Inf without one), then their index in the
// snapshot's Jobs.
func flowCompare(x, y *fjob) int {
	if px, py := x.prio, y.prio; px != py {
		return cmp.Compare(py, px)
	}
	if c := cmp.Compare(x.deadline, y.deadline); c != 0 {
		return c
	}
	return cmp.Compare(x.at, y.at)
}

// sortJobs returns the round's jobs, pool[i] being jobs[i] (the
// snapshot's), in flowCompare's order, in m.js' memory; it sets each
// job's at (its index in jobs), prio (its priority, read once: the
// comparisons read only the fjobs) and ord (its place in the order).
func (m *flowMem) sortJobs(jobs []*engine.Status) []*fjob {
	all := m.pool[:len(jobs)]
	for i, j := range all {
		j.at, j.prio = i, j.st.Job.Priority
	}
	out := m.ord.Sort(m.js[:0], all, jobs, flowCompare, fjobStatus)
	for i, j := range out {
		j.ord = i
	}
	m.js = out
	return out
}

// fjobStatus is j's status.
func fjobStatus(j *fjob) *engine.Status { return j.st }
