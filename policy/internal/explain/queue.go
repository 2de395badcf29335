package explain

import (
	"github.com/tide-sched/tide/engine"
)

// Reasons worked out when read from a copy of the round's order (issue 19,
// engine.Explainer): SRTF, EDF, Gandiva, Themis and FIFO with backfill.
//
// PlanAppend and KeptAppend write a reason for every job a round leaves
// waiting, and one job ending and one arriving moves the figures of most
// of them (the jobs ahead, the GPUs free). A Queue keeps instead, for this
// round and the last (the engine may ask for the last round's during this
// one), the policy's order of the round (a copy of its pointers), each
// job's place in it (the planned and the waiting jobs ahead of it), a
// figure of the job for the policy's terms, and the GPUs the plan leaves
// free: a waiting job's reason is worked out from these when it is read,
// the very text PlanAppend or KeptAppend writes. A round still writes the
// reasons of the jobs it preempts or shrinks (they hold GPUs when it
// plans, and are few), in Plan.Reasons; it costs its order's length in
// copies of pointers and numbers, no text and no map.

// Order is a round's order as Queue.Record takes it.
type Order struct {
	// Jobs is the policy's order of the round, most important first,
	// each job once: every job of the snapshot that the plan does not
	// run on at least the GPUs it holds is in it (for a plan with
	// engine.Plan.Keep, which stops none: the waiting jobs, the running
	// ones all kept).
	Jobs []*engine.Status
	// Given is the GPUs the plan gives each job of Jobs, 0 none (Given
	// makes it from a plan).
	Given []int
	// Key is a figure of the job at index i of Jobs that Terms states
	// (remaining time, rho), taken for the jobs the plan does not run;
	// nil: none.
	Key func(i int, st *engine.Status) float64
	// Figs are figures of the round that Terms states.
	Figs [2]int
	// Terms appends the job's standing in the policy's own terms (the
	// terms of PlanAppend) from its key and the round's figures.
	Terms func(b []byte, st *engine.Status, key float64, figs [2]int) []byte
	// Ahead and Held, for a round planned with engine.Plan.Keep, are the
	// running jobs, all ahead of Jobs, and the GPUs they hold
	// (KeptAppend's ahead and held); 0 for a plan that lists every job.
	Ahead, Held int
	// Preempted, for a plan that lists every job it runs (not
	// engine.Plan.Keep), leaves the reasons of the jobs it preempts (they
	// hold GPUs and the plan gives them none) to Reason too, worked out
	// when read once they hold none: PlanAppend's "preempted" text. The
	// policy's Terms must then read of such a job, when the reason is
	// read, what they read when the round was planned (its key aside):
	// Tiresias' attained service, which stands still from the moment it
	// is preempted. False: Record writes them in plan.Reasons.
	Preempted bool
}

// Queue keeps what the reasons of a round's waiting jobs are worked out
// from, for this round and the last; the zero Queue is ready. A policy
// calls Next at the start of every round, then Record in a round whose
// waiting jobs' reasons it leaves to Reason (engine.Plan.Explain).
type Queue struct {
	cur, old queueRound
	given    []int
	buf      []byte
	texts    []queueText // by slot: the last reason worked out
	reasons  map[string]engine.Reason
}

// queueRound is a recorded round.
type queueRound struct {
	round int // Snapshot.Round + 1; 0 none
	jobs  []*engine.Status
	ents  []queueEnt
	at    []int32 // by slot: index in jobs
	free  Free
	mem   *freeMem // free's counts: each round its own (a pointer: Next swaps the rounds, not their memory)
	figs  [2]int
	terms func(b []byte, st *engine.Status, key float64, figs [2]int) []byte
}

// queueEnt is a job's place in a recorded round.
type queueEnt struct {
	runAhead, waitAhead int32
	waits               bool // left waiting without GPUs: Reason's
	preempted           bool // held GPUs the plan gives it none of (Order.Preempted)
	key                 float64
}

// queueText is a reason worked out, kept while its text stays the same.
type queueText struct {
	st   *engine.Status
	text string
}

// Next starts the round of Snapshot.Round round: the round recorded last
// becomes the old one when it is round-1's, and none is recorded for this
// one yet.
func (q *Queue) Next(round int) {
	q.old, q.cur = q.cur, q.old
	if q.old.round != round { // not the last round's (round-1, plus one)
		q.old.round = 0
	}
	q.cur.round = 0
}

// Lazy reports whether a round of s may leave its waiting jobs' reasons
// to be worked out when read: s is an engine's snapshot that carries what
// changed (an engine that hands a policy Snapshot.Changed takes
// engine.Plan.Explain), or one whose engine says it takes the plan's
// Explain in every round (Snapshot.Explains, for an
// engine.ExplainsWhenRead policy). A snapshot built by hand, or a
// wrapper's, gets every reason in Plan.Reasons.
func Lazy(s *engine.Snapshot) bool { return (s.Incremental || s.Explains) && s.From() != nil }

// Given returns the GPUs run gives each job of order, in q's memory, when
// run lists jobs of order in order's order (as alloc.Greedy plans), each
// once; false otherwise.
func (q *Queue) Given(order []*engine.Status, run []engine.Assignment) ([]int, bool) {
	g := q.given[:0]
	k := 0
	for _, st := range order {
		n := 0
		if k < len(run) && run[k].Job == st.Job.ID {
			n = run[k].GPUs
			k++
		}
		g = append(g, n)
	}
	q.given = g
	return g, k == len(run)
}

// Record records the round of s, whose plan is plan and order o, and
// writes in plan.Reasons the reasons PlanAppend (KeptAppend, with Ahead)
// writes for the jobs o leaves holding GPUs they lose (preempted) or
// fewer (shrunk); the waiting jobs' are Reason's. It reports false, and
// records nothing, for a round it cannot explain so: a plan that declines
// jobs, or a job of s not in o that the plan does not run; PlanAppend
// explains those.
func (q *Queue) Record(s *engine.Snapshot, plan *engine.Plan, o *Order) bool {
	if len(plan.Decline) > 0 {
		return false
	}
	inOrder := 0
	for _, g := range o.Given {
		if g > 0 {
			inOrder++
		}
	}
	switch {
	case plan.Keep && len(plan.Stop) > 0:
		return false // stopped jobs outside the order
	case !plan.Keep && len(o.Jobs)+len(plan.Run)-inOrder != len(s.Jobs):
		return false // a job outside the order that does not run
	}
	c := &q.cur
	if c.mem == nil {
		c.mem = new(freeMem)
	}
	c.round, c.free, c.figs, c.terms = s.Round+1, c.mem.plan(s, plan, o.Held), o.Figs, o.Terms
	clear(c.jobs) // let ended jobs go
	c.jobs = append(c.jobs[:0], o.Jobs...)
	c.ents = c.ents[:0]
	runs, waits := int32(o.Ahead), int32(0)
	for i, st := range o.Jobs {
		e := queueEnt{runAhead: runs, waitAhead: waits}
		g := o.Given[i]
		if g == 0 || len(st.GPUs) > g {
			if o.Key != nil {
				e.key = o.Key(i, st)
			}
		}
		if g > 0 {
			runs++
		} else {
			waits++
			e.waits = len(st.GPUs) == 0
			if !e.waits && o.Preempted && !plan.Keep {
				e.waits, e.preempted = true, true
			}
		}
		if !e.waits && len(st.GPUs) > g {
			q.writeHeld(plan, st, g, e, c, len(s.Jobs))
		}
		c.ents = append(c.ents, e)
		if st.Slot >= len(c.at) {
			c.at = append(c.at, make([]int32, st.Slot+1-len(c.at))...)
		}
		c.at[st.Slot] = int32(i)
	}
	return true
}

// writeHeld writes in plan.Reasons the reason of job st, which holds GPUs
// the plan gives it g of (fewer, or none): PlanAppend's.
func (q *Queue) writeHeld(plan *engine.Plan, st *engine.Status, g int, e queueEnt, c *queueRound, jobs int) {
	buf := q.buf[:0]
	buf = appendLoss(buf, st, g, g > 0)
	buf = q.withTerms(buf, st, e, c)
	r := engine.Reason{}
	if g == 0 {
		buf = standing(buf, st, place{runAhead: int(e.runAhead), waitAhead: int(e.waitAhead)}, true, true, c.free)
		r.Position = int(e.waitAhead) + 1
	}
	r.Text = string(buf)
	q.buf = buf
	if plan.Reasons == nil {
		plan.Reasons = reuse(&q.reasons, 0)
	}
	plan.Reasons[st.Job.ID] = r
}

// withTerms appends the round's terms of the job (withTerms of Plan).
func (q *Queue) withTerms(buf []byte, st *engine.Status, e queueEnt, c *queueRound) []byte {
	if c.terms == nil {
		return buf
	}
	return withTerms(buf, st, func(b []byte, st *engine.Status) []byte { return c.terms(b, st, e.key, c.figs) })
}

// Reason is the reason of job st, one that the plan of round `round`
// (Snapshot.Round) left waiting, as recorded: engine.Explainer's Reason
// for a policy that hands its rounds' reasons to q. It is the zero Reason
// for a round q does not hold or a job it did not leave waiting.
func (q *Queue) Reason(st *engine.Status, round int) engine.Reason {
	var c *queueRound
	switch {
	case round+1 == q.cur.round:
		c = &q.cur
	case round+1 == q.old.round:
		c = &q.old
	default:
		return engine.Reason{}
	}
	if st.Slot < 0 || st.Slot >= len(c.at) {
		return engine.Reason{}
	}
	i := c.at[st.Slot]
	if int(i) >= len(c.jobs) || c.jobs[i] != st || !c.ents[i].waits {
		return engine.Reason{}
	}
	e := c.ents[i]
	buf := append(q.buf[:0], "waits"...)
	if e.preempted {
		buf = append(q.buf[:0], "preempted"...)
	}
	buf = q.withTerms(buf, st, e, c)
	buf = standing(buf, st, place{runAhead: int(e.runAhead), waitAhead: int(e.waitAhead)}, true, true, c.free)
	q.buf = buf
	if st.Slot >= len(q.texts) {
		q.texts = append(q.texts, make([]queueText, st.Slot+1-len(q.texts))...)
	}
	t := &q.texts[st.Slot]
	if t.st != st || t.text != string(buf) {
		*t = queueText{st: st, text: string(buf)}
	}
	return engine.Reason{Text: t.text, Position: int(e.waitAhead) + 1}
}
