package gavel

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// The reasons of the rounds between re-plans, worked out when read
// (issue 19, engine.Explainer).
//
// A round between re-plans that Gavel plans from what changed (keepKept)
// leaves every waiting job it does not start with the reason the full
// pass writes without an order: "waits; allocation 0.50 of v100; jobs
// furthest below their allocation run first; between rounds the last
// round's plan stands; needs 4 GPUs, 2 free". It follows from the job's
// allocation, which changes only at a re-plan, and the GPUs the round
// leaves free. So the round keeps that figure and hands the reasons to
// the engine as Gavel itself (engine.Plan.Explain), which writes one when
// it is read. For the round before (which the engine may ask about
// during the next), the allocations stand until a re-plan: before one,
// the reasons of the round before are worked out for every waiting job
// and kept by slot (explain.Round.Keep).

// gavelFigs are the figures of a round between re-plans planned from what
// changed.
type gavelFigs struct{ free explain.Free }

// gavelText is a waiting job's last reason worked out, by slot, with the
// GPUs free and the re-plan it was written for.
type gavelText struct {
	st     *engine.Status
	text   string
	free   explain.Free // a new value at each round on several sites: the text is worked out again
	replan int
}

// gavelReasons is Gavel's state for Reason.
type gavelReasons struct {
	lazy   explain.Rounds[gavelFigs]
	texts  []gavelText
	buf    []byte
	replan int // re-plans so far: the allocations change only at one
}

// Reason implements engine.Explainer: the reason of a job that the plan
// of round `round` (one between re-plans planned from what changed) left
// waiting.
func (g *Gavel) Reason(st *engine.Status, round int) engine.Reason {
	lazy, r, done := g.reasons.lazy.Read(st, round)
	if done {
		return r
	}
	return g.waitReason(st, lazy.Figs.free)
}

// waitReason is the reason explain.KeptAppend writes, without an order,
// for waiting job st between re-plans, free GPUs left free.
func (g *Gavel) waitReason(st *engine.Status, free explain.Free) engine.Reason {
	z := &g.reasons
	if st.Slot >= len(z.texts) {
		z.texts = append(z.texts, make([]gavelText, st.Slot+1-len(z.texts))...)
	}
	t := &z.texts[st.Slot]
	if t.st != st || t.free != free || t.replan != z.replan {
		note := g.note
		g.setNote(noteBetween)
		z.buf = explain.AppendWaits(z.buf[:0], st, g.terms, free)
		g.note = note
		text := t.text
		if t.st != st || string(z.buf) != text {
			text = string(z.buf)
		}
		*t = gavelText{st: st, text: text, free: free, replan: z.replan}
	}
	return engine.Reason{Text: t.text}
}

// explainLazily leaves the reasons of the waiting jobs that plan out of
// round s does not start to Reason.
func (g *Gavel) explainLazily(s *engine.Snapshot, out *engine.Plan, held int) {
	c := &g.reasons.lazy.Cur
	c.Take(s.Round, 0)
	c.Figs.free = explain.PlanFree(s, out, held) // out packs no jobs (keepKept)
	out.Explain = g
}

// replanning works out, before a re-plan changes the allocations, the
// reasons the last round left to Reason (of jobs among s's that hold no
// GPUs), and keeps them.
func (g *Gavel) replanning(s *engine.Snapshot) {
	z := &g.reasons
	if o := &z.lazy.Old; o.Live() {
		o.Keep(func(keep func(*engine.Status, engine.Reason)) {
			for _, st := range s.ActiveJobs() {
				if len(st.GPUs) == 0 {
					keep(st, g.waitReason(st, o.Figs.free))
				}
			}
		})
	}
	z.replan++
}
