package classic

import (
	"math"
	"slices"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/internal/minheap"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// FIFO's rounds with a queue, planned from what changed (issue 19).
//
// FIFO's order is the running jobs, then the waiting ones by submission:
// it moves only when jobs arrive, start, stop or leave, all of which
// Snapshot.Changed lists, and the roster keeps the waiting jobs in that
// order. So every round the roster can take (roster.Roster.Begin) is
// planned from it: when every job fits, all waiting jobs start; otherwise
// they start in order while they fit (without backfill the first that does
// not fit stops the rest), the running jobs keep their GPUs, and each job
// left waiting gets the reason the full pass writes (explain.KeptAppend).
// The predicted starts (without backfill) need every running job's end:
// FIFO keeps them in end order (fifoQueue), each computed per launch as
// the full pass's cache computes it, at the first round in which some job
// waits while it runs, and again when due (refreshAt: the ends due kept
// in a heap). A round costs the jobs that changed, the jobs it starts, the
// waiting jobs (their reasons) and the ends due, not the running jobs.

// fifoQueue keeps the running jobs' predicted ends in end order.
type fifoQueue struct {
	// seen says which round ends and unpriced describe.
	seen roster.Follower
	// ends are the running jobs whose end the cache (FIFO.ends) holds,
	// by end, then in the engine's order (submission, then ID); endSt
	// are their jobs.
	ends     []explain.End
	endSt    []*engine.Status
	unpriced []*engine.Status // running jobs whose end is not computed yet
	// due are the priced ends by when they are due to be priced again
	// (fifoEnd.due), earliest first; an entry whose job no longer holds
	// that end is passed over.
	due []fifoDue
	at  roster.Slots[fifoAt]
	why explain.Scratch
}

// fifoAt is where a running job is in fifoQueue.
type fifoAt struct {
	end, due float64 // its end, in ends, and when it is due, when priced
	in       int     // 1 + index in unpriced; -1 when in ends; 0 in neither
}

// fifoDue is an entry of fifoQueue.due: job st's end, priced in its
// launch starts, is due at t.
type fifoDue struct {
	t      float64
	st     *engine.Status
	starts int
}

func dueFirst(a, b fifoDue) bool { return a.t < b.t }

// keptRound plans a round the roster took (Begin reported true) from
// what changed.
func (f *FIFO) keptRound(s *engine.Snapshot) engine.Plan {
	f.kept.Kept++
	waiting := f.kept.Waiting()
	if !f.Backfill {
		f.queue.follow(f, s)
	}
	if f.kept.Fits(s) {
		// Every active job fits: the waiting ones start in submission
		// order, and no job waits, so none needs a reason or a start.
		f.run = startAll(f.run, waiting)
		// The last round's reasons are asked for (Reason) as its waiting
		// jobs start.
		return engine.Plan{Run: f.run, Keep: true, Explain: f.explainer()}
	}
	free := s.Available("", s.Cluster.GPUTypes()[0]) - f.kept.Held()
	run := f.run[:0]
	for _, st := range waiting {
		if j := st.Job; j.GPUs <= free {
			free -= j.GPUs
			run = append(run, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
		} else if !f.Backfill {
			break
		}
	}
	f.run = run
	plan := engine.Plan{Run: run, Keep: true}
	q := &f.queue
	head := waiting
	if !f.Backfill {
		// The jobs started are the first len(run): the reasons of those
		// left waiting after the first explain.PredictAhead of them are
		// Reason's to work out when read (fifo_reasons.go).
		head = head[:min(len(head), len(run)+explain.PredictAhead)]
		f.explainLazily(s, f.kept.Running(), len(run), s.Available("", "")-f.kept.Held()-sumGPUs(run), len(head))
		plan.Explain = f
	}
	if f.Backfill && explain.Lazy(s) {
		// The jobs started are not a prefix: the waiting jobs' reasons
		// are worked out from a copy of the queue (explain.Queue).
		if given, ok := f.lazy.Given(head, run); ok && f.lazy.Record(s, &plan,
			&explain.Order{Jobs: head, Given: given, Terms: fifoKeyTerms, Ahead: f.kept.Running(), Held: f.kept.Held()}) {
			plan.Explain = &f.lazy
			return plan
		}
	}
	q.why.KeptAppend(s, &plan, head, true, f.kept.Running(), f.kept.Held(), fifoTerms)
	if !f.Backfill && s.Model != nil {
		endOf := f.endOf(s, f.kept.Running()+len(waiting))
		q.price(f)
		q.refresh(f, s.Now)
		q.why.KeptPredictStarts(s, &plan, head, free, q.ends, endOf)
	}
	return plan
}

// explainer is f when its rounds may leave reasons to Reason (without
// backfill), else nil.
func (f *FIFO) explainer() engine.Explainer {
	if f.Backfill {
		return nil
	}
	return f
}

// sumGPUs is the GPUs run asks for.
func sumGPUs(run []engine.Assignment) int {
	n := 0
	for _, a := range run {
		n += a.GPUs
	}
	return n
}

// fifoTerms is FIFO's standing of a job (explain's terms): its only term
// is the submission order, which the position and the jobs ahead already
// give; a submission time would read as seconds since 1970 live.
func fifoTerms(b []byte, _ *engine.Status) []byte { return append(b, "first come, first served"...) }

// fifoKeyTerms is fifoTerms as explain.Order's Terms.
func fifoKeyTerms(b []byte, st *engine.Status, _ float64, _ [2]int) []byte { return fifoTerms(b, st) }

// follow brings q up to round s (which the roster took), from what changed
// when q holds the round before, else from every active job.
func (q *fifoQueue) follow(f *FIFO, s *engine.Snapshot) {
	if !q.seen.Next(s) {
		q.rebuild(f, s)
	} else {
		for _, st := range s.Changed {
			q.forget(st)
			if !st.State.Terminal() && len(st.GPUs) > 0 {
				if !q.note(f, st) {
					q.rebuild(f, s)
					break
				}
			}
		}
	}
}

// invalidate says q no longer follows the rounds (a round planned in full).
func (q *fifoQueue) invalidate() { q.seen.Stop() }

// rebuild makes q from the active jobs of s.
func (q *fifoQueue) rebuild(f *FIFO, s *engine.Snapshot) {
	q.ends, q.endSt = q.ends[:0], q.endSt[:0]
	clear(q.due)
	q.due = q.due[:0]
	clear(q.unpriced)
	q.unpriced = q.unpriced[:0]
	q.at.Clear()
	for _, st := range s.ActiveJobs() {
		if len(st.GPUs) > 0 && !q.note(f, st) {
			return // slots not one engine's: the next round rebuilds again
		}
	}
}

// note files running job st: by its end when the cache holds one for its
// launch (what FIFO.endOf would return), else among the unpriced. False
// when st's slot holds another job.
func (q *fifoQueue) note(f *FIFO, st *engine.Status) bool {
	at, _ := q.at.Add(st)
	if at == nil {
		return false
	}
	if e, ok := f.ends[st.Job.ID]; ok && e.gpus == st.Job.GPUs && e.starts == st.Starts && e.running {
		q.file(st, at, e)
		return true
	}
	q.unpriced = append(q.unpriced, st)
	*at = fifoAt{in: len(q.unpriced)}
	return true
}

// forget takes st out of q, wherever it is.
func (q *fifoQueue) forget(st *engine.Status) {
	at := q.at.Get(st)
	if at == nil {
		return
	}
	switch {
	case at.in < 0:
		if i, ok := q.search(at.end, st); ok {
			q.ends = slices.Delete(q.ends, i, i+1)
			q.endSt = slices.Delete(q.endSt, i, i+1)
		}
	case at.in > 0:
		i, last := at.in-1, len(q.unpriced)-1
		if i != last {
			moved := q.unpriced[last]
			q.unpriced[i] = moved
			q.at.Get(moved).in = i + 1
		}
		q.unpriced[last] = nil
		q.unpriced = q.unpriced[:last]
	}
	q.at.Drop(st)
}

// price computes the end of every unpriced running job (f.end caches it,
// as the full pass would at this round) and files it.
func (q *fifoQueue) price(f *FIFO) {
	for _, st := range q.unpriced {
		q.file(st, q.at.Get(st), f.end(st, asked(st)))
	}
	clear(q.unpriced)
	q.unpriced = q.unpriced[:0]
}

// refresh prices again, as the full pass would at this round, every end
// due by now (refreshAt) and files it anew.
func (q *fifoQueue) refresh(f *FIFO, now float64) {
	for len(q.due) > 0 && q.due[0].t <= now {
		d := minheap.Pop(&q.due, dueFirst)
		st := d.st
		at := q.at.Get(st)
		if at == nil || at.in >= 0 || at.due != d.t || st.Starts != d.starts {
			continue // the job left, stopped or was priced since
		}
		if i, ok := q.search(at.end, st); ok {
			q.ends = slices.Delete(q.ends, i, i+1)
			q.endSt = slices.Delete(q.endSt, i, i+1)
		}
		q.file(st, at, f.end(st, asked(st)))
	}
}

// file files running job st's end e (f.end's) in ends and, when it may
// come due, in due; at is st's entry.
func (q *fifoQueue) file(st *engine.Status, at *fifoAt, e fifoEnd) {
	q.insert(st, e.at)
	*at = fifoAt{end: e.at, due: e.due, in: -1}
	if !math.IsInf(e.due, 1) {
		minheap.Push(&q.due, fifoDue{t: e.due, st: st, starts: st.Starts}, dueFirst)
	}
}

// asked is st's assignment to the GPUs it asks for.
func asked(st *engine.Status) engine.Assignment {
	j := st.Job
	return engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType}
}

// insert files st's end t in ends.
func (q *fifoQueue) insert(st *engine.Status, t float64) {
	i, _ := q.search(t, st)
	q.ends = slices.Insert(q.ends, i, explain.End{T: t, GPUs: st.Job.GPUs})
	q.endSt = slices.Insert(q.endSt, i, st)
}

// search finds (t, st) in ends: by end, then submission, then ID. It
// returns where it is or would go.
func (q *fifoQueue) search(t float64, st *engine.Status) (int, bool) {
	lo, hi := 0, len(q.ends)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if endBefore(q.ends[m].T, q.endSt[m], t, st) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(q.ends) && q.endSt[lo] == st
}

// endBefore reports whether end a of job x comes before end b of job y:
// the earlier end first, then the engine's order of the jobs.
func endBefore(a float64, x *engine.Status, b float64, y *engine.Status) bool {
	if a != b {
		return a < b
	}
	if x.Job.Submit != y.Job.Submit {
		return x.Job.Submit < y.Job.Submit
	}
	return strings.Compare(x.Job.ID, y.Job.ID) < 0
}
