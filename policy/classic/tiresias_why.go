package classic

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// The reasons of the rounds Tiresias plans in full, worked out when read
// (issue 19, engine.ExplainsWhenRead).
//
// 2D-Gittins (and 2D-LAS with the starvation knob) plans every round in
// full: a running job's Gittins index moves with its attained service, so
// its order moves with time. Its waiting jobs' reasons ("waits; queue 2 of
// 4, attained 0.50 GPU-h; 12 running and 3 waiting job(s) ahead; needs 4
// GPUs, 2 free") state the jobs ahead and the GPUs free, which move with
// the order: writing them every round made a new string for most waiting
// jobs in a round in which nothing happened. Such a round instead records
// its order (explain.Queue, a copy of its pointers, each job's place and
// queue) and leaves the waiting jobs' reasons to the Queue, which works
// one out, the very text explain.PlanAppend writes, when the engine reads
// it. A waiting job's attained service stands still while it waits, so
// its terms read it then; its queue is recorded (a promotion by the knob
// moves it without service). The jobs the round preempts are left to it
// too (explain.Order.Preempted): their attained service stands still from
// the moment they stop, so their "preempted" text is worked out when read
// as well; a steady round whose order moves (a running job's index falls
// below a waiting one's) then writes no text at all. Behind a wrapper (explain.Lazy
// false) every reason is written in full, as before
// (TestLazyReasonsClassic in sim compares the two, job for job).

// ExplainsWhenRead implements engine.ExplainsWhenRead: the Tiresias that
// plans every round in full (2D-Gittins, or the starvation knob set)
// leaves its waiting jobs' reasons to be worked out when read. 2D-LAS
// without the knob plans from what changed (Incremental) and explains
// its kept rounds itself (tiresias_reasons.go).
func (t *Tiresias) ExplainsWhenRead() bool { return !t.Incremental() }

// lazyFull records a full round's order for its reasons (explain.Queue)
// and leaves the waiting jobs' reasons to it (plan.Explain); false when
// they are to be written in full: the snapshot does not take a plan's
// Explain (a wrapper's, one built by hand), or Tiresias plans from what
// changed (its full rounds write every reason, before it keeps its own).
func (t *Tiresias) lazyFull(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status) bool {
	if t.Incremental() || !explain.Lazy(s) {
		return false
	}
	if runsEvery(s, plan, order) {
		return true // no job waits or is preempted: no reason to give (PlanAppend writes none)
	}
	given, ok := t.why.Given(order, plan.Run)
	if !ok || !t.why.Record(s, plan, &explain.Order{Jobs: order, Given: given, Key: t.queueKey, Terms: t.whyTerms, Preempted: true}) {
		return false
	}
	plan.Explain = &t.why
	return true
}

// queueOfJob is st's queue (0-based) as this round's plan leaves its memo:
// explain.Order's Key.
func (t *Tiresias) queueOfJob(_ int, st *engine.Status) float64 {
	return float64(t.queueOf(st.Attained - t.memoOf(st)[memoBaseServ]))
}

// appendWhy is appendTerms from the recorded queue q: explain.Order's
// Terms.
func (t *Tiresias) appendWhy(b []byte, st *engine.Status, q float64, _ [2]int) []byte {
	return t.appendQueue(b, st, int(q))
}

// runsEvery reports whether plan, the greedy pass over order, runs every
// active job of s on at least the GPUs it holds, in order's order, and
// declines none: then no job has a reason, and the round records nothing
// (a round of a cluster with room, the commonest, costs one pass over the
// plan, as explain.PlanAppend's own check).
func runsEvery(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status) bool {
	if len(plan.Decline) > 0 || len(plan.Run) != len(s.Jobs) || len(order) != len(plan.Run) {
		return false
	}
	for i, a := range plan.Run {
		if st := order[i]; a.Job != st.Job.ID || len(st.GPUs) > a.GPUs {
			return false
		}
	}
	return true
}
