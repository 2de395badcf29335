package fair

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// Reasons worked out when read for AlloX and Gandiva_fair (issue 19,
// engine.ExplainsWhenRead).
//
// Both explain a round as explain.PlanAppend does without an order: a
// waiting job "waits", then its tenant's figures in the policy's terms,
// then the GPUs it needs against those the plan leaves free. The figures
// (a tenant's attained GPU-h; its received and entitled GPU-h) move every
// second, so writing the reasons made a new string for every waiting job
// every round. A waitReasons keeps instead, for this round and the last
// (the engine may ask for the last round's during this one), the jobs the
// round left waiting, the figures of each and the GPUs free: a reason is
// worked out when read, with the very code the full pass writes it with.
// The jobs a round preempts or shrinks (they hold GPUs when it plans, and
// are few) keep written reasons in Plan.Reasons.

// waitFigs are the figures of a waiting job that its policy's terms state.
type waitFigs [3]float64

// waitReasons is what the reasons of a round's waiting jobs are worked out
// from (the zero value is ready): a policy calls Next at the start of every
// round, Give for each job its plan runs, and Record once the plan is
// made, when the round's snapshot lets it leave reasons to be read
// (explain.Lazy).
type waitReasons struct {
	cur, old waitRound
	// terms appends a job's figures in its policy's terms (the text the
	// full pass's terms append); set by the policy once.
	terms func(b []byte, st *engine.Status, f waitFigs) []byte
	// epoch tells this round's Give marks from older ones.
	epoch int
	given []waitGiven // by slot
	buf   []byte
	texts []waitText // by slot: the last reason worked out
	// reasons is the map Record writes the held jobs' reasons in (the
	// engine keeps none of a plan's maps).
	reasons map[string]engine.Reason
	// figs and fig make the full pass's terms from the policy's figures
	// of the round: fig holds the job's while withTerms calls figs.
	figs func(b []byte, st *engine.Status) []byte
	fig  waitFigs
}

// waitRound is a recorded round.
type waitRound struct {
	round int // Snapshot.Round + 1; 0 none
	free  explain.Free
	jobs  []*engine.Status // the jobs it leaves waiting
	figs  []waitFigs       // theirs
	at    []int32          // by slot: index in jobs
}

// waitGiven marks a job the plan of round epoch runs on gpus GPUs.
type waitGiven struct {
	epoch, gpus int
}

// waitText is a reason worked out, kept while its text stays the same.
type waitText struct {
	st   *engine.Status
	text string
}

// Next starts the round of Snapshot.Round round: the round recorded last
// becomes the old one when it is round-1's, and none is recorded for this
// one yet; no job is given GPUs yet.
func (w *waitReasons) Next(round int) {
	w.old, w.cur = w.cur, w.old
	if w.old.round != round { // not the last round's (round-1, plus one)
		w.old.round = 0
	}
	w.cur.round = 0
	w.epoch++
}

// Give notes that this round's plan runs st on gpus GPUs.
func (w *waitReasons) Give(st *engine.Status, gpus int) {
	if st.Slot >= len(w.given) {
		w.given = append(w.given, make([]waitGiven, st.Slot+1-len(w.given))...)
	}
	w.given[st.Slot] = waitGiven{w.epoch, gpus}
}

// givenTo is the GPUs this round's plan gives st, and whether it runs st.
func (w *waitReasons) givenTo(st *engine.Status) (int, bool) {
	if st.Slot < len(w.given) && w.given[st.Slot].epoch == w.epoch {
		return w.given[st.Slot].gpus, true
	}
	return 0, false
}

// Record records the round of s, whose plan is plan (every job it runs
// given, Give): each job of s that the plan leaves waiting with its
// figures (figs), the GPUs the plan leaves free; and writes in
// plan.Reasons, with terms (the full pass's), the reasons of the jobs that
// hold GPUs the plan takes (explain.AppendHeld). It sets plan.Explain.
// The plan declines no job.
func (w *waitReasons) Record(s *engine.Snapshot, plan *engine.Plan, figs func(st *engine.Status) waitFigs, terms func(b []byte, st *engine.Status) []byte) {
	c := &w.cur
	c.round, c.free = s.Round+1, explain.PlanFree(s, plan, 0)
	clear(c.jobs) // let ended jobs go
	c.jobs, c.figs = c.jobs[:0], c.figs[:0]
	for _, st := range s.Jobs {
		g, runs := w.givenTo(st)
		switch {
		case len(st.GPUs) > 0 && (!runs || g < len(st.GPUs)):
			w.buf = explain.AppendHeld(w.buf[:0], st, g, terms, c.free)
			if plan.Reasons == nil {
				if w.reasons == nil {
					w.reasons = map[string]engine.Reason{}
				}
				empty(w.reasons)
				plan.Reasons = w.reasons
			}
			plan.Reasons[st.Job.ID] = engine.Reason{Text: string(w.buf)}
		case runs || len(st.GPUs) > 0:
		default:
			if st.Slot >= len(c.at) {
				c.at = append(c.at, make([]int32, st.Slot+1-len(c.at))...)
			}
			c.at[st.Slot] = int32(len(c.jobs))
			c.jobs = append(c.jobs, st)
			c.figs = append(c.figs, figs(st))
		}
	}
	plan.Explain = w
}

// Reason implements engine.Explainer: the reason of job st, one that the
// plan of round `round` (Snapshot.Round) left waiting, as recorded; the
// zero Reason for a round w does not hold or a job it did not leave
// waiting.
func (w *waitReasons) Reason(st *engine.Status, round int) engine.Reason {
	var c *waitRound
	switch {
	case round+1 == w.cur.round:
		c = &w.cur
	case round+1 == w.old.round:
		c = &w.old
	default:
		return engine.Reason{}
	}
	if st.Slot < 0 || st.Slot >= len(c.at) {
		return engine.Reason{}
	}
	i := c.at[st.Slot]
	if int(i) >= len(c.jobs) || c.jobs[i] != st {
		return engine.Reason{}
	}
	if w.figs == nil {
		w.figs = w.appendFigs
	}
	w.fig = c.figs[i]
	w.buf = explain.AppendWaits(w.buf[:0], st, w.figs, c.free)
	if st.Slot >= len(w.texts) {
		w.texts = append(w.texts, make([]waitText, st.Slot+1-len(w.texts))...)
	}
	t := &w.texts[st.Slot]
	if t.st != st || t.text != string(w.buf) {
		*t = waitText{st: st, text: string(w.buf)}
	}
	return engine.Reason{Text: t.text}
}

// appendFigs is w.terms with the figures Reason is working from.
func (w *waitReasons) appendFigs(b []byte, st *engine.Status) []byte { return w.terms(b, st, w.fig) }
