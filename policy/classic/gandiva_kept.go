package classic

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// Gandiva's oversubscribed rounds, planned from what changed where its
// turns allow (issue 19).
//
// Gandiva's order puts the running jobs still inside their quantum first,
// then the waiting ones (longest suspended first), then the running ones
// whose quantum is spent. A running job leaves the first group when its
// quantum ends, at a time its last start gives: so the policy keeps the
// first group's jobs in a heap by last start, and the GPUs they hold, and
// moves a job out when its time comes. The greedy pass then starts the
// waiting jobs that fit beside the first group; when they also leave room
// for every job of the last group, no job is preempted and the round is
// "as before, plus these" (engine.Plan.Keep), its reasons the full pass's
// (explain.KeptAppend). Otherwise the waiting jobs take the GPUs of jobs
// whose slice is over, and the round is planned in full.

// gandivaTurns keeps the running jobs still inside their quantum.
type gandivaTurns struct {
	seen  roster.Follower // the round the state is that of
	fresh quantumHeap     // the running jobs inside their quantum, by last start (stale entries skipped)
	at    roster.Slots[turnAt]
	n     int // jobs inside their quantum
	held  int // the GPUs they hold
	order []*engine.Status
}

// turnAt is a running job's entry.
type turnAt struct {
	fresh bool // inside its quantum: counted in n and held
	held  int
	gen   int // bumped when it leaves fresh: older heap entries are stale
}

type quantumEntry struct {
	lastStart float64
	st        *engine.Status
	gen       int
}

// quantumHeap is a min-heap by last start, typed so that pushing and
// popping box nothing (container/heap's any would allocate each time).
type quantumHeap []quantumEntry

func (h *quantumHeap) push(e quantumEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !(a[i].lastStart < a[p].lastStart) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *quantumHeap) pop() quantumEntry {
	a := *h
	e := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = quantumEntry{}
	a = a[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && a[l].lastStart < a[m].lastStart {
			m = l
		}
		if r := l + 1; r < n && a[r].lastStart < a[m].lastStart {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return e
}

// follow brings q up to round s (which the roster took), from what changed
// when q holds the round before, else from every active job; then moves
// out the jobs whose quantum has ended by s.Now.
func (q *gandivaTurns) follow(g *Gandiva, s *engine.Snapshot) {
	if !q.seen.Next(s) {
		q.rebuild(g, s)
	} else {
		for _, st := range s.Changed {
			q.leave(st)
			if st.State.Terminal() {
				q.at.Drop(st)
			} else if !q.enter(g, s, st) {
				q.rebuild(g, s)
				break
			}
		}
	}
	for len(q.fresh) > 0 && s.Now-q.fresh[0].lastStart >= g.Quantum {
		e := q.fresh.pop()
		if at := q.at.Get(e.st); at != nil && at.gen == e.gen {
			q.leave(e.st)
		}
	}
}

// invalidate says q no longer follows the rounds (a round planned in full).
func (q *gandivaTurns) invalidate() { q.seen.Stop() }

// rebuild makes q from the active jobs of s.
func (q *gandivaTurns) rebuild(g *Gandiva, s *engine.Snapshot) {
	clear(q.fresh)
	q.fresh = q.fresh[:0]
	q.at.Clear()
	q.n, q.held = 0, 0
	for _, st := range s.ActiveJobs() {
		if !q.enter(g, s, st) {
			return // slots not one engine's: the next round rebuilds again
		}
	}
}

// enter files st: inside its quantum when it runs and its slice has not
// ended by s.Now. False when st's slot holds another job.
func (q *gandivaTurns) enter(g *Gandiva, s *engine.Snapshot, st *engine.Status) bool {
	at, _ := q.at.Add(st)
	if at == nil {
		return false
	}
	if len(st.GPUs) > 0 && s.Now-st.LastStart < g.Quantum {
		at.fresh, at.held = true, len(st.GPUs)
		q.n++
		q.held += at.held
		q.fresh.push(quantumEntry{lastStart: st.LastStart, st: st, gen: at.gen})
	}
	return true
}

// leave takes st out of the jobs inside their quantum.
func (q *gandivaTurns) leave(st *engine.Status) {
	if at := q.at.Get(st); at != nil && at.fresh {
		at.fresh = false
		at.gen++
		q.n--
		q.held -= at.held
	}
}

// keptTurns plans an oversubscribed round from what changed when no
// running job loses its GPUs (see above); false when it must be planned
// in full.
func (g *Gandiva) keptTurns(s *engine.Snapshot) (engine.Plan, bool) {
	q := &g.fresh
	avail := s.Available("", s.Cluster.GPUTypes()[0])
	q.order = alloc.SortByKey(g.kept.Waiting(), lastStop)
	left := avail - q.held
	started := 0
	run := g.run[:0]
	for _, st := range q.order {
		if j := st.Job; j.GPUs <= left {
			left -= j.GPUs
			started += j.GPUs
			run = append(run, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
		}
	}
	g.run = run
	if started > avail-g.kept.Held() {
		return engine.Plan{}, false // a job whose slice is over is preempted
	}
	plan := engine.Plan{Run: run, Keep: true}
	if explain.Lazy(s) {
		// The waiting jobs' reasons are worked out when read.
		if given, ok := g.lazy.Given(q.order, run); ok && g.lazy.Record(s, &plan,
			&explain.Order{Jobs: q.order, Given: given, Terms: g.keyTermsOnce(), Ahead: q.n, Held: g.kept.Held()}) {
			plan.Explain = &g.lazy
			return plan, true
		}
	}
	if g.terms == nil {
		g.terms = g.appendTerms
	}
	g.why.KeptAppend(s, &plan, q.order, true, q.n, g.kept.Held(), g.terms)
	return plan, true
}
