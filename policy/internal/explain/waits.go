package explain

import (
	"github.com/tide-sched/tide/engine"
)

// Reasons worked out when read for a policy without an order (issue 19,
// engine.Explainer): DeepBoot, whose knapsacks rank no job ahead of
// another, so PlanAppend (nil order) writes a waiting job "waits", its
// terms, and the GPUs it needs against those the plan leaves free. Its
// terms state a figure that moves with time (DeepBoot's restart factor,
// from the job's age), so written in full a round makes a new string for
// each waiting job whose figure crossed a rounding step. Waits keeps
// instead, for this round and the last (the engine may ask for the last
// round's during this one), each waiting job's figure (taken when the
// round is planned, as PlanAppend takes it) by slot, the round's figures
// and the GPUs free: the reason is worked out from these when read, the
// very text PlanAppend writes. The jobs the plan preempts or shrinks
// (they hold GPUs when it plans, and are few) get their reasons written
// in Plan.Reasons, as PlanAppend writes them.

// Waits keeps what the reasons of a round's waiting jobs are worked out
// from, for this round and the last; the zero Waits is ready. A policy
// calls Next at the start of every round, then Record in a round whose
// waiting jobs' reasons it leaves to Reason (engine.Plan.Explain).
type Waits struct {
	cur, old waitsRound
	given    map[string]int
	reasons  map[string]engine.Reason
	buf      []byte
	texts    []queueText // by slot: the last reason worked out
}

// waitsRound is a recorded round.
type waitsRound struct {
	round int        // Snapshot.Round + 1; 0 none
	ents  []waitsEnt // by slot
	free  Free       // GPUs the plan leaves free
	mem   *freeMem   // free's counts: each round its own (a pointer: Next swaps the rounds, not their memory)
	figs  [2]int     // the round's figures, for terms
	terms WaitsTerms // nil: none
}

// waitsEnt is a job the recorded round left waiting (st nil: none in the
// slot) and its figure.
type waitsEnt struct {
	st  *engine.Status
	key float64
}

// WaitsTerms appends a job's standing in the policy's own terms (the
// terms of PlanAppend) from its figure key and the round's figures.
type WaitsTerms func(b []byte, st *engine.Status, key float64, figs [2]int) []byte

// Next starts the round of Snapshot.Round round: the round recorded last
// becomes the old one when it is round-1's, and none is recorded for this
// one yet.
func (w *Waits) Next(round int) {
	w.old, w.cur = w.cur, w.old
	if w.old.round != round { // not the last round's (round-1, plus one)
		w.old.round = 0
	}
	w.cur.round = 0
}

// Record records the round of s, whose plan is plan, as PlanAppend with
// a nil order explains it: key(st) is the figure terms states for a job
// the plan does not run on all the GPUs it holds, figs the round's. It
// writes in plan.Reasons the reasons of the jobs the plan preempts or
// shrinks (PlanAppend's), keeping those the policy wrote already; the
// waiting jobs' are Reason's. It reports false, and records nothing, for
// a plan that declines jobs (PlanAppend explains those).
func (w *Waits) Record(s *engine.Snapshot, plan *engine.Plan, key func(st *engine.Status) float64, figs [2]int, terms WaitsTerms) bool {
	if len(plan.Decline) > 0 {
		return false
	}
	given := reuse(&w.given, len(plan.Run))
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	c := &w.cur
	if c.mem == nil {
		c.mem = new(freeMem)
	}
	c.round, c.free, c.figs, c.terms = s.Round+1, c.mem.plan(s, plan, 0), figs, terms
	clear(c.ents) // let ended jobs go
	for _, st := range s.Jobs {
		id := st.Job.ID
		if _, ok := plan.Reasons[id]; ok {
			continue // the policy's own
		}
		g, planned := given[id]
		switch {
		case planned && len(st.GPUs) <= g:
			continue // runs on at least what it holds: no reason
		case planned || len(st.GPUs) > 0:
			w.writeHeld(plan, st, g, planned, key(st), c, len(s.Jobs)-len(plan.Run))
			continue
		}
		if st.Slot < 0 {
			continue // not an engine's job: PlanAppend would explain it, the engine asks for none
		}
		if st.Slot >= len(c.ents) {
			c.ents = append(c.ents, make([]waitsEnt, st.Slot+1-len(c.ents))...)
		}
		c.ents[st.Slot] = waitsEnt{st: st, key: key(st)}
	}
	return true
}

// writeHeld writes in plan.Reasons the reason PlanAppend writes (nil
// order) for job st, which holds GPUs the plan gives it g of (planned:
// fewer; else none).
func (w *Waits) writeHeld(plan *engine.Plan, st *engine.Status, g int, planned bool, key float64, c *waitsRound, room int) {
	buf := w.buf[:0]
	buf = appendLoss(buf, st, g, planned)
	buf = w.withTerms(buf, st, key, c)
	buf = standing(buf, st, place{}, false, !planned, c.free)
	if plan.Reasons == nil {
		plan.Reasons = reuse(&w.reasons, room)
	}
	plan.Reasons[st.Job.ID] = engine.Reason{Text: sameText(buf, st)}
	w.buf = buf
}

// withTerms appends the round's terms of the job.
func (w *Waits) withTerms(buf []byte, st *engine.Status, key float64, c *waitsRound) []byte {
	if c.terms == nil {
		return buf
	}
	return withTerms(buf, st, func(b []byte, st *engine.Status) []byte { return c.terms(b, st, key, c.figs) })
}

// Reason is the reason of job st, one that the plan of round `round`
// (Snapshot.Round) left waiting, as recorded: engine.Explainer's Reason
// for a policy that hands its rounds' reasons to w. It is the zero
// Reason for a round w does not hold or a job it did not leave waiting.
func (w *Waits) Reason(st *engine.Status, round int) engine.Reason {
	var c *waitsRound
	switch {
	case round+1 == w.cur.round:
		c = &w.cur
	case round+1 == w.old.round:
		c = &w.old
	default:
		return engine.Reason{}
	}
	if st.Slot < 0 || st.Slot >= len(c.ents) || c.ents[st.Slot].st != st {
		return engine.Reason{}
	}
	buf := w.withTerms(append(w.buf[:0], "waits"...), st, c.ents[st.Slot].key, c)
	buf = standing(buf, st, place{}, false, true, c.free)
	w.buf = buf
	if st.Slot >= len(w.texts) {
		w.texts = append(w.texts, make([]queueText, st.Slot+1-len(w.texts))...)
	}
	t := &w.texts[st.Slot]
	if t.st != st || t.text != string(buf) {
		*t = queueText{st: st, text: string(buf)}
	}
	return engine.Reason{Text: t.text}
}
