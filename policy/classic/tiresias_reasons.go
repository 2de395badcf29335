package classic

import (
	"sort"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// Tiresias' reasons worked out when read (issue 19, engine.Explainer).
//
// A waiting job's reason in a round planned from the kept order ("waits;
// queue 2 of 4, attained 0.50 GPU-h; 12 running and 3 waiting job(s)
// ahead; needs 4 GPUs, 2 free") follows from its rank in the order and
// three figures of the round: the jobs the greedy pass takes at the head
// of the order (the prefix), the ranks of those it takes after it (the
// fill) and the GPUs it leaves free. One job ending and one arriving moves
// the figures of most waiting jobs, so writing every waiting job's reason
// each round cost every waiting job; instead the round keeps its figures
// (lazyFigs) and hands the waiting jobs' reasons to the engine as
// Tiresias itself (engine.Plan.Explain), which works a reason out from
// the job's rank when it is read: O(log n), the same text, to the byte
// (TestTiresiasFastMatchesFull compares every job's reason round by round
// with the full pass's).
//
// The engine may ask, during the next round, for the reason of the round
// before (engine.Explainer): by then the order has changed under it (jobs
// ended, moved, arrived). Tiresias keeps the figures of the last two such
// rounds (cur, old) and logs each change to the order since old's (a job
// taken out at a rank, put in at a rank), and finds a job's rank back then
// by undoing the log from its rank now. When the order is built afresh (a
// full round, or too many moves), old's reasons are worked out first for
// every job they cover and kept by slot (explain.Round.Keep).

// tiresiasFigs are the figures of a round planned from the kept order in
// which some job did not fit.
type tiresiasFigs struct {
	p, left int   // the prefix's jobs, the GPUs left free
	fill    []int // the ranks taken after the prefix, ascending
}

// lazyFigs is such a round (explain.Round).
type lazyFigs = explain.Round[tiresiasFigs]

// orderOp is a change to the order: a job (slot+1) taken out at a rank or
// put in at a rank (its rank just after).
type orderOp struct {
	x      int32
	rank   int32
	insert bool
}

// newRound starts the state of the round of Snapshot.Round round: the last
// round's figures become old ones (the engine may ask for them until this
// round ends), older ones go.
func (f *tiresiasFast) newRound(round int) {
	f.logging = f.lazy.Next(round)
	f.log = f.log[:0]
}

// logOut and logIn record a change to the order while old figures may
// still be asked for.
func (f *tiresiasFast) logOut(x int32) {
	if f.logging {
		f.log = append(f.log, orderOp{x: x, rank: int32(f.rank(x))})
	}
}

func (f *tiresiasFast) logIn(x int32) {
	if f.logging {
		f.log = append(f.log, orderOp{x: x, rank: int32(f.rank(x)), insert: true})
	}
}

// rankAt is job x's rank in the order as it was when lazy's figures were
// taken, false when it was not in it.
func (f *tiresiasFast) rankAt(x int32, lazy *lazyFigs) (int, bool) {
	r := -1
	if f.nd(x).in {
		r = f.rank(x)
	}
	for i := len(f.log) - 1; i >= lazy.Base(); i-- {
		op := f.log[i]
		switch {
		case op.x == x && op.insert:
			r = -1 // not in before
		case op.x == x:
			r = int(op.rank)
		case r < 0:
		case op.insert && int(op.rank) < r:
			r--
		case !op.insert && int(op.rank) <= r:
			r++
		}
	}
	return r, r >= 0
}

// taken reports whether the greedy pass of the figures' round took the
// job at rank r, and how many jobs it took ahead of it.
func (g *tiresiasFigs) taken(r int) (bool, int) {
	if r < g.p {
		return true, r
	}
	k := sort.SearchInts(g.fill, r)
	return k < len(g.fill) && g.fill[k] == r, g.p + k
}

// Reason implements engine.Explainer: the reason of a job that the plan
// of round `round` (one planned from the kept order) left waiting.
func (t *Tiresias) Reason(st *engine.Status, round int) engine.Reason {
	f := &t.fast
	lazy, known, done := f.lazy.Read(st, round)
	if done {
		return known
	}
	j := f.job(st)
	if j == nil {
		return engine.Reason{}
	}
	r, ok := f.rankAt(int32(st.Slot+1), lazy)
	if !ok {
		return engine.Reason{}
	}
	return t.waitReason(j, r, lazy)
}

// waitReason is the reason of waiting job j at rank r of lazy's round,
// its text kept while its figures and standing do not change.
func (t *Tiresias) waitReason(j *fastJob, r int, lazy *lazyFigs) engine.Reason {
	st := j.st
	_, ahead := lazy.Figs.taken(r)
	figs := [3]int{ahead, r - ahead, lazy.Figs.left}
	base := t.memoOf(st)[memoBaseServ]
	if j.text == "" || j.textFigs != figs || j.textAtt != st.Attained || j.textBase != base {
		if t.terms == nil {
			t.terms = t.appendTerms
		}
		// One site (fastUsable): the free GPUs are counted over the cluster.
		t.fast.rbuf = explain.AppendLeftOut(t.fast.rbuf[:0], st, t.terms, ahead, r-ahead, explain.Whole(lazy.Figs.left))
		if string(t.fast.rbuf) != j.text {
			j.text = string(t.fast.rbuf)
		}
		j.textFigs, j.textAtt, j.textBase = figs, st.Attained, base
	}
	return engine.Reason{Text: j.text, Position: r - ahead + 1}
}

// keepPrev works out, before the order is built afresh, the reasons old's
// round left to Tiresias: those of the jobs in the order that held no GPUs
// then and that its greedy pass did not take.
func (t *Tiresias) keepPrev() {
	f := &t.fast
	o := &f.lazy.Old
	if !o.Live() {
		return
	}
	o.Keep(func(keep func(*engine.Status, engine.Reason)) {
		var walk func(i int32)
		walk = func(i int32) {
			if i == 0 {
				return
			}
			n := f.nd(i)
			walk(n.l)
			if !n.run {
				if r, ok := f.rankAt(i, o); ok {
					if took, _ := o.Figs.taken(r); !took {
						j := &f.jobs[i-1]
						keep(j.st, t.waitReason(j, r, o))
					}
				}
			}
			walk(n.r)
		}
		walk(f.root)
	})
	f.logging = false
}
