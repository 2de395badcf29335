package classic

import (
	"slices"
	"strings"

	"github.com/tide-sched/tide/engine"
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
// FIFO keeps them in end order (fifoQueue), each computed once per launch
// as the full pass's cache computes it, at the first round in which some
// job waits while it runs. A round costs the jobs that changed, the jobs
// it starts and the waiting jobs (their reasons), not the running ones.

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
	at       roster.Slots[fifoAt]
	why      explain.Scratch
}

// fifoAt is where a running job is in fifoQueue.
type fifoAt struct {
	end float64 // its end, in ends, when priced
	in  int     // 1 + index in unpriced; -1 when in ends; 0 in neither
}

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
		q.price(endOf)
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
		q.insert(st, e.at)
		*at = fifoAt{end: e.at, in: -1}
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

// price computes the end of every unpriced running job (endOf caches it,
// as the full pass would at this round) and files it.
func (q *fifoQueue) price(endOf func(*engine.Status, engine.Assignment) float64) {
	for _, st := range q.unpriced {
		j := st.Job
		t := endOf(st, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
		q.insert(st, t)
		*q.at.Get(st) = fifoAt{end: t, in: -1}
	}
	clear(q.unpriced)
	q.unpriced = q.unpriced[:0]
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
