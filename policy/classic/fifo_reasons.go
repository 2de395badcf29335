package classic

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// FIFO's reasons worked out when read (issue 19, engine.Explainer), as
// Tiresias' (tiresias_reasons.go).
//
// Without backfill, a round planned from the roster starts a prefix of
// the waiting jobs (in submission order), so a waiting job's reason ("waits;
// first come, first served; 12 running and 3 waiting job(s) ahead; needs
// 4 GPUs, 2 free") follows from its index in the roster's waiting jobs and
// three figures of the round: the jobs running, the jobs it starts and the
// GPUs it leaves free. The round writes the reasons of the first waiting
// jobs it leaves (those explain.KeptPredictStarts may give a predicted
// start, explain.PredictAhead of them) and leaves the others to FIFO's
// Reason. For the round before, the roster logs the changes to the waiting
// jobs' order (roster.Roster.Log) and Reason undoes them; before the
// roster is built afresh, the reasons of the round before are worked out
// and kept by slot. With backfill the jobs started are not a prefix, and
// every reason is written as before.

// fifoFigs are the figures of a round that left reasons to Reason.
type fifoFigs struct {
	running, k int // jobs running before the round, jobs it starts (a prefix)
	free       int // GPUs it leaves free
	from       int // index of the first waiting job left to Reason
}

// fifoLazy is such a round (explain.Round).
type fifoLazy = explain.Round[fifoFigs]

// fifoText is a waiting job's last reason worked out, by slot, with the
// figures it was written from.
type fifoText struct {
	st   *engine.Status
	r    engine.Reason
	figs [3]int
}

// fifoReasons is FIFO's state for Reason.
type fifoReasons struct {
	lazy   explain.Rounds[fifoFigs]
	texts  []fifoText // by slot
	buf    []byte
	before []*engine.Status
}

// newRound rotates the figures at the start of round Snapshot.Round
// round (as Tiresias' newRound) and starts logging the waiting jobs'
// changes while the last round's reasons may be asked for.
func (f *FIFO) newRound(round int) {
	f.kept.Log(f.why.lazy.Next(round))
	if f.kept.BeforeRebuild == nil {
		f.kept.BeforeRebuild = f.keepPrev
	}
}

// explainLazily records the figures of round s, whose plan starts the
// first k waiting jobs of the roster, running jobs running before it and
// leaving free GPUs free, and leaves the reasons of the waiting jobs from
// index from on to Reason.
func (f *FIFO) explainLazily(s *engine.Snapshot, running, k, free, from int) {
	c := &f.why.lazy.Cur
	c.Take(s.Round, f.kept.Logged())
	c.Figs = fifoFigs{running: running, k: k, free: free, from: from}
}

// Reason implements engine.Explainer: the reason of a job that the plan
// of round `round` (planned from the roster) left waiting.
func (f *FIFO) Reason(st *engine.Status, round int) engine.Reason {
	lazy, r, done := f.why.lazy.Read(st, round)
	if done {
		return r
	}
	i, ok := f.kept.UndoIndex(st, f.kept.Index(st), lazy.Base())
	if !ok {
		return engine.Reason{}
	}
	return f.waitReason(st, i, lazy)
}

// waitReason is the reason of job st, at index i of the waiting jobs of
// lazy's round: the one explain.KeptAppend writes.
func (f *FIFO) waitReason(st *engine.Status, i int, lazy *fifoLazy) engine.Reason {
	z := &f.why
	g := &lazy.Figs
	figs := [3]int{g.running + g.k, i - g.k, g.free}
	if st.Slot >= len(z.texts) {
		z.texts = append(z.texts, make([]fifoText, st.Slot+1-len(z.texts))...)
	}
	t := &z.texts[st.Slot]
	if t.st != st || t.figs != figs {
		// Planned from the roster: one site, where the reason counts the
		// free GPUs over the cluster (roster.Roster.Begin).
		z.buf = explain.AppendLeftOut(z.buf[:0], st, fifoTerms, figs[0], figs[1], explain.Whole(figs[2]))
		text := t.r.Text
		if t.st != st || string(z.buf) != text {
			text = string(z.buf)
		}
		*t = fifoText{st: st, r: engine.Reason{Text: text, Position: figs[1] + 1}, figs: figs}
	}
	return t.r
}

// keepPrev works out, before the roster is built afresh, the reasons the
// last round left to Reason, and keeps them by slot.
func (f *FIFO) keepPrev() {
	z := &f.why
	o := &z.lazy.Old
	if !o.Live() {
		return
	}
	z.before = f.kept.Before(o.Base(), z.before)
	o.Keep(func(keep func(*engine.Status, engine.Reason)) {
		for i := o.Figs.from; i < len(z.before); i++ {
			keep(z.before[i], f.waitReason(z.before[i], i, o))
		}
	})
	clear(z.before)
}
