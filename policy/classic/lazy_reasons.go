package classic

import "github.com/tide-sched/tide/engine"

// What Tiresias and FIFO keep of the rounds whose waiting jobs' reasons
// they work out when read (engine.Explainer, tiresias_reasons.go and
// fifo_reasons.go): the figures of this round and of the last, which the
// engine may still ask about during this one.

// lazyRound is a round whose waiting jobs' reasons are worked out when
// read, with its figures F.
type lazyRound[F any] struct {
	round  int // Snapshot.Round + 1; 0 none
	base   int // the length of the log of changes to the order when taken
	cached bool
	kept   []keptReason // by slot, when cached: worked out before the order was built afresh
	figs   F
}

// keptReason is a job's reason in lazyRound.kept.
type keptReason struct {
	st *engine.Status
	r  engine.Reason
}

// lazyRounds are the figures of this round (cur) and the last (old).
type lazyRounds[F any] struct{ cur, old lazyRound[F] }

// next starts the round of Snapshot.Round round: the current figures
// become the old ones if they are the last round's (else there are none),
// and the log starts afresh. It reports whether the changes to the order
// must be logged (the old round's reasons may be asked for and are not
// kept).
func (p *lazyRounds[F]) next(round int) bool {
	p.old, p.cur = p.cur, p.old
	if p.old.round != round { // not the last round's (round-1, plus one)
		p.old.round = 0
	}
	p.cur.round, p.cur.cached = 0, false
	p.old.base = 0
	return p.old.round > 0 && !p.old.cached
}

// at is the round of Snapshot.Round round, nil when neither is.
func (p *lazyRounds[F]) at(round int) *lazyRound[F] {
	switch {
	case round+1 == p.cur.round:
		return &p.cur
	case round+1 == p.old.round:
		return &p.old
	}
	return nil
}

// take makes figs the current round's, that of Snapshot.Round round, the
// log's length being base.
func (l *lazyRound[F]) take(round, base int) {
	l.round, l.base, l.cached = round+1, base, false
}

// keptFor is st's kept reason, the zero Reason when none was kept.
func (l *lazyRound[F]) keptFor(st *engine.Status) engine.Reason {
	if st.Slot >= 0 && st.Slot < len(l.kept) && l.kept[st.Slot].st == st {
		return l.kept[st.Slot].r
	}
	return engine.Reason{}
}

// keep keeps r as st's reason (before the order is built afresh).
func (l *lazyRound[F]) keep(st *engine.Status, r engine.Reason) {
	if st.Slot >= len(l.kept) {
		l.kept = append(l.kept, make([]keptReason, st.Slot+1-len(l.kept))...)
	}
	l.kept[st.Slot] = keptReason{st: st, r: r}
}

// startKeeping forgets the reasons kept before; done marks them complete.
func (l *lazyRound[F]) startKeeping() { clear(l.kept) }

func (l *lazyRound[F]) done() { l.cached = true }
