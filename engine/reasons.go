package engine

import "fmt"

// Reasons that cost what changed (issue 19).
//
// A plan's reasons used to be a map holding every waiting job's reason,
// which the engine copied to every such job each round: a round in which
// one job ends and one arrives still wrote a reason for each of the
// thousands that wait, because the figures in them (the jobs ahead, the
// GPUs free) move for most of them. Now a job's reason is read through
// Status.Reason, and a plan may leave its waiting jobs' reasons to
// an Explainer (Plan.Explain) that works each one out when it is read:
// the engine stores only the entries of Plan.Reasons (the jobs the plan
// stops, declines or singles out), and a round costs the jobs it lists.
//
// What a reader sees is exact: Status.Reason returns what the round's
// plan says of the job at that round, the very reason a plan listing
// every job would have given. The engine keeps that true when a job
// changes outside a round (it ends, is adopted, its node goes down): it
// asks the Explainer first and keeps the answer. A job keeps its reason
// after it ends. Status.WaitReason is the last non-zero reason a round
// left the job waiting with (what the simulator records per job); when
// the next round no longer leaves a lazily explained job to the same
// Explainer (it starts, the plan names it, or the plan has no Explainer),
// the engine asks that Explainer, during the next round, for the reason
// of the round before, which the Explainer must still answer then.

// Explainer works out, when asked, the reasons of the jobs a plan
// leaves waiting (Plan.Explain).
type Explainer interface {
	// Reason returns the reason that the plan made for the snapshot of
	// round `round` (Snapshot.Round) gives st, one of the jobs that plan
	// leaves to it (Plan.Explain): never the zero Reason. The engine asks
	// for round r from the end of that round until the policy is next
	// asked to plan, and, during the round after (after Schedule
	// returns, until the engine's Schedule returns), for jobs that round
	// starts, names in Plan.Reasons or Plan.Decline, or leaves to no
	// Explainer. The Explainer must not change st or anything else.
	Reason(st *Status, round int) Reason
}

// explained is the round whose reasons the jobs read: at counts the
// rounds that stored reasons (a job's reasonAt says which stored its
// reason); x is that round's Explainer (nil when the round gave none),
// round its snapshot's Round.
type explained struct {
	x     Explainer
	round int
	at    int
}

// reasonFinal is the reasonAt of a job whose reason is kept for good
// (it ended).
const reasonFinal = -1

// Reason returns the policy's explanation of its latest decision about
// the job: the reason the last round's plan gave it (the zero Reason when
// it gave none), or, once the job has ended, the one it had when it
// ended. It is exact whenever it is read: a reason a plan left to an
// Explainer is worked out now (reasons.go). Do not read it while the
// engine's Schedule runs (policies read no reasons).
func (st *Status) Reason() Reason {
	x := st.expl
	switch {
	case x == nil || st.reasonAt == reasonFinal || st.reasonAt == x.at:
		return st.reason
	case x.x != nil && len(st.GPUs) == 0 && !st.State.Terminal():
		return x.x.Reason(st, x.round)
	}
	return Reason{} // the last round gave it none
}

// WaitReason returns the last non-zero reason a round left the job
// waiting (holding no GPUs, not ended) with, the zero Reason when none
// did: what an executor records as the reason a job waited.
func (st *Status) WaitReason() Reason {
	if st.expl != nil && st.expl.covers(st) {
		return st.expl.x.Reason(st, st.expl.round)
	}
	return st.said
}

// covers reports whether st's reason is x's Explainer's to give.
func (x *explained) covers(st *Status) bool {
	return x.x != nil && st.reasonAt != reasonFinal && st.reasonAt != x.at && len(st.GPUs) == 0 && !st.State.Terminal()
}

// freezeReason stores st's reason of the last round as it reads now (as
// the last round's Explainer gives it, when it is the Explainer's), before
// st changes outside a round: what it reads then no longer depends on its
// GPUs or state.
func (e *Engine) freezeReason(st *Status) {
	x := &e.expl
	if st.reasonAt == reasonFinal || st.reasonAt == x.at {
		return // stored already
	}
	if x.covers(st) {
		r := x.x.Reason(st, x.round)
		st.reason, st.said = r, r
	} else {
		st.reason = Reason{}
	}
	st.reasonAt = x.at
}

// keepSaid records, before the current round's reasons replace the last
// round's, the reason the last round's Explainer gave st when it is the
// Explainer's to give (it is then non-zero and st was left waiting).
func (e *Engine) keepSaid(st *Status) {
	if x := &e.expl; x.covers(st) {
		st.said = x.x.Reason(st, x.round)
	}
}

// endReason keeps st's reason for good: st ends now (outside a round, or
// declined by the round's plan).
func (e *Engine) endReason(st *Status) {
	if !e.inRound {
		e.freezeReason(st)
	}
	if st.reasonAt != e.expl.at && st.reasonAt != reasonFinal {
		st.reason = Reason{} // the last round gave it none
	}
	st.reasonAt = reasonFinal
}

// materialize stores every lazily explained reason as it is now and
// drops the Explainer: its policy can no longer answer for it.
func (e *Engine) materialize() {
	x := &e.expl
	if x.x == nil {
		return
	}
	for _, st := range e.active {
		e.freezeReason(st)
	}
	x.x = nil
}

// setReasons records a plan's reasons (planned are the jobs its Run lists,
// in order; a Keep plan's stopped jobs are in scratch.stops): the entries
// of Plan.Reasons, and Plan.Explain for the jobs left to it. It touches
// only the jobs the plan names, unless the last round left reasons to an
// Explainer and this one does not (then every job the Explainer had).
func (e *Engine) setReasons(plan Plan, planned []*Status) {
	x := &e.expl
	sc := &e.scratch
	// The last round's lazily explained jobs that this round takes from
	// its Explainer keep their wait reasons (WaitReason) first.
	if x.x != nil {
		if plan.Explain == nil {
			for _, st := range e.active {
				e.keepSaid(st)
			}
		} else {
			for _, st := range planned {
				e.keepSaid(st)
			}
			for id := range plan.Reasons {
				if st := e.jobs[id]; st != nil {
					e.keepSaid(st)
				}
			}
			for _, id := range plan.Decline {
				if st := e.jobs[id]; st != nil {
					e.keepSaid(st)
				}
			}
		}
	}
	x.at++
	at := x.at
	reasoned := sc.reasoned[:0]
	for id, r := range plan.Reasons {
		st := e.jobs[id]
		if st == nil || st.State.Terminal() {
			continue // ended jobs keep their last reason
		}
		st.reason, st.reasonAt = r, at
		if r != (Reason{}) {
			reasoned = append(reasoned, st)
		}
	}
	if len(reasoned) < len(sc.reasoned) {
		clear(sc.reasoned[len(reasoned):]) // let ended jobs go
	}
	sc.reasoned = reasoned
	x.x, x.round = plan.Explain, sc.snap.Round
	if x.x != nil && plan.Keep {
		// The jobs stopped: no Explainer's (planned ones that stay
		// waiting are marked in apply, unplaced).
		for _, st := range sc.stops {
			e.unplaced(st)
		}
	}
}

// unplaced notes that job st, which the plan runs, may end the round
// without GPUs: then it is not the Explainer's (no entry: no reason).
func (e *Engine) unplaced(st *Status) {
	if st.reasonAt != e.expl.at {
		st.reason, st.reasonAt = Reason{}, e.expl.at
	}
}

// notPlaced gives job st, which the plan runs on a but the placer did not
// place, the reason it waits: what the plan asked, that the placer found
// no room for it (a job never spans sites or GPU types, and a placer may
// honour more than GPU counts: node shapes, live pods' CPU and memory),
// and what the policy said of it, if anything. Without it the job read as
// if it ran ("runs ...") or had no reason at all.
func (e *Engine) notPlaced(st *Status, a Assignment) {
	said := ""
	if st.reasonAt == e.expl.at {
		said = st.reason.Text
	}
	var b []byte
	b = fmt.Appendf(b, "planned on %d", a.GPUs)
	if a.GPUType != "" {
		b = append(b, ' ')
		b = append(b, a.GPUType...)
	}
	b = append(b, " GPU"...)
	if a.GPUs != 1 {
		b = append(b, 's')
	}
	if a.Site != "" {
		b = append(b, " on site "...)
		b = append(b, a.Site...)
	}
	b = fmt.Appendf(b, ", but the placer (%s) found no room for it this round; it waits", e.cfg.Placer.Name())
	if said != "" {
		b = append(b, " (the policy: "...)
		b = append(b, said...)
		b = append(b, ')')
	}
	st.reason, st.reasonAt = Reason{Text: string(b)}, e.expl.at
	e.scratch.reasoned = append(e.scratch.reasoned, st)
}

// noteWaits records, at the end of a round, the wait reasons of the jobs
// whose reason the plan listed and that it leaves waiting.
func (e *Engine) noteWaits() {
	for _, st := range e.scratch.reasoned {
		if len(st.GPUs) == 0 && !st.State.Terminal() && st.reasonAt == e.expl.at {
			st.said = st.reason
		}
	}
}

// SetReason makes r the reason Reason returns, for good: for statuses
// made outside an engine (tests, views rebuilt from records). An engine
// sets its own jobs' reasons from plans.
func (st *Status) SetReason(r Reason) { st.reason, st.reasonAt = r, reasonFinal }
