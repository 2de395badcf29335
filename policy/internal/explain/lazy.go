package explain

import "github.com/tide-sched/tide/engine"

// What a policy keeps of the rounds whose waiting jobs' reasons it works
// out when read (engine.Explainer, Plan.Explain; Tiresias, FIFO,
// fifo-perf): the figures of this round and of the last, which the engine
// may still ask about during this one.

// Round is a round whose waiting jobs' reasons are worked out when read,
// with its figures F.
type Round[F any] struct {
	round  int // Snapshot.Round + 1; 0 none
	base   int // the length of the policy's log of changes when taken
	cached bool
	kept   []keptReason // by slot, when cached
	Figs   F
}

// keptReason is a job's reason in Round.kept.
type keptReason struct {
	st *engine.Status
	r  engine.Reason
}

// Rounds are the figures of this round (Cur) and the last (Old).
type Rounds[F any] struct{ Cur, Old Round[F] }

// Next starts the round of Snapshot.Round round: the current figures
// become the old ones if they are the last round's (else there are none).
// It reports whether the policy must log the changes to what its reasons
// read from (the old round's reasons may be asked for and are not kept).
func (p *Rounds[F]) Next(round int) bool {
	p.Old, p.Cur = p.Cur, p.Old
	if p.Old.round != round { // not the last round's (round-1, plus one)
		p.Old.round = 0
	}
	p.Cur.round, p.Cur.cached = 0, false
	p.Old.base = 0
	return p.Old.round > 0 && !p.Old.cached
}

// At is the round of Snapshot.Round round, nil when neither is.
func (p *Rounds[F]) At(round int) *Round[F] {
	switch {
	case round+1 == p.Cur.round:
		return &p.Cur
	case round+1 == p.Old.round:
		return &p.Old
	}
	return nil
}

// Take makes the round that of Snapshot.Round round (its figures are
// the caller's to set), the policy's log holding base changes.
func (l *Round[F]) Take(round, base int) {
	l.round, l.base, l.cached = round+1, base, false
}

// Live reports whether the round holds figures whose reasons are not kept
// (Keep).
func (l *Round[F]) Live() bool { return l.round > 0 && !l.cached }

// Base is the length of the policy's log of changes when the round was
// taken: the changes from there on are undone to read the round.
func (l *Round[F]) Base() int { return l.base }

// Cached reports whether the round's reasons were kept (KeptFor).
func (l *Round[F]) Cached() bool { return l.cached }

// KeptFor is st's kept reason, the zero Reason when none was kept.
func (l *Round[F]) KeptFor(st *engine.Status) engine.Reason {
	if st.Slot >= 0 && st.Slot < len(l.kept) && l.kept[st.Slot].st == st {
		return l.kept[st.Slot].r
	}
	return engine.Reason{}
}

// Keep keeps every reason the round left to the policy, before what they
// are read from changes for good (the order is built afresh): each calls
// keep(st, r) for st's reason r. The round's reasons are then KeptFor.
func (l *Round[F]) Keep(each func(keep func(st *engine.Status, r engine.Reason))) {
	clear(l.kept)
	each(func(st *engine.Status, r engine.Reason) {
		if st.Slot >= len(l.kept) {
			l.kept = append(l.kept, make([]keptReason, st.Slot+1-len(l.kept))...)
		}
		l.kept[st.Slot] = keptReason{st: st, r: r}
	})
	l.cached = true
}

// Read starts an Explainer's Reason(st, round): the round of Snapshot.Round
// round, or done with st's reason when that is known already (kept before
// the order was built afresh; the zero Reason for a round not held, which
// the engine does not ask for).
func (p *Rounds[F]) Read(st *engine.Status, round int) (l *Round[F], r engine.Reason, done bool) {
	l = p.At(round)
	switch {
	case l == nil:
		return nil, engine.Reason{}, true
	case l.cached:
		return nil, l.KeptFor(st), true
	}
	return l, engine.Reason{}, false
}
