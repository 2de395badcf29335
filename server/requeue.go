package server

import (
	"fmt"
	"net/http"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/store"
)

// Requeue, as Slurm's scontrol requeue: a job that ended (finished,
// failed, cancelled, declined) or is running goes back in the queue as a
// new run of the same job, with the same ID. A running job's process is
// stopped first (SIGTERM, the grace period, SIGKILL); the new run's first
// attempt waits until it is gone. The run queues from the time of the
// requeue, behind the jobs already waiting; its attempts go on numbering
// after the previous run's, its failures (and so its retry limit) and its
// time limit count from 0, its progress starts at 0. Its files stay: the
// log goes on, and the checkpoint directory is the previous run's (the
// job resumes from it, as after a preemption). The scheduler keeps the
// job's accounting (attained service, GPU-hours).

// handleRequeue is POST /v1/jobs/{id}/requeue with an optional body
// api.RequeueRequest.
func (s *Server) handleRequeue(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.RequeueRequest
	if r.ContentLength != 0 && !readBody(w, r, &req) {
		return
	}
	lj := s.lockVisible(w, r, p)
	if lj == nil {
		return
	}
	code, msg := s.requeue(lj, p.tenant, req.Hold)
	v := s.view(lj, true) // before commit lets mu go (and a round start it)
	var err error
	if code == http.StatusOK {
		err = s.commit()
	}
	s.mu.Unlock()
	switch {
	case code != http.StatusOK:
		writeError(w, code, msg, nil)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
	default:
		s.kickRound()
		writeJSON(w, http.StatusOK, v)
	}
}

// requeue puts lj back in the queue (see above), held when hold; it
// returns 200, or the status and message of a refusal, in which case
// nothing changed. Under mu; the caller commits.
func (s *Server) requeue(lj *liveJob, by string, hold bool) (int, string) {
	r := lj.rec
	if r.State == api.StatePending || r.State == api.StatePreempted {
		return http.StatusConflict, fmt.Sprintf("job %s is already waiting in the queue (%s)", r.ID, r.State)
	}
	if r.FirstStart == 0 {
		for _, dep := range r.Spec.After {
			if d := s.jobs[dep]; d != nil && api.Terminal(d.rec.State) && d.rec.State != api.StateFinished {
				return http.StatusConflict, fmt.Sprintf("job %s starts after job %s, which is %s: requeue %s first", r.ID, dep, d.rec.State, dep)
			}
		}
	}
	if errs := s.checkRunnable(&r.Spec); len(errs) > 0 {
		return http.StatusConflict, fmt.Sprintf("job %s cannot run here any more: %s: %s", r.ID, errs[0].Field, errs[0].Message)
	}
	if r.Tenant != by && s.tenantByName(r.Tenant) == nil {
		// Also with --single-user, where tenantUser looks no one up: the
		// run would belong to no one, and to whoever is later created
		// under the name.
		return http.StatusConflict, fmt.Sprintf("job %s cannot run here any more: tenant %s no longer exists", r.ID, r.Tenant)
	}
	if _, err := s.tenantUser(r.Tenant); err != nil {
		return http.StatusConflict, fmt.Sprintf("job %s cannot run here any more: %v", r.ID, err)
	}
	if msg := s.queuedLimit(r.Tenant); msg != "" {
		return http.StatusTooManyRequests, msg
	}
	was := r.State
	if lj.att != nil {
		s.stopAttempt(lj.att, "requeue")
		lj.att = nil
	}
	if lj.j != nil {
		s.syncEngine(lj)
		if st := s.eng.Job(r.ID); st != nil {
			if !st.State.Terminal() {
				_ = s.eng.Fail(r.ID)
			}
			if err := s.eng.Forget(r.ID); err != nil {
				s.log.Error("requeue: engine forget", "job", r.ID, "err", err)
			}
		}
		lj.j = nil
	}
	now := s.clk.Now()
	r.Requeues++
	r.Requeued, r.RunFrom = now, len(r.Attempts)
	r.State, r.Ended, r.Reason, r.Held, r.Purged = api.StatePending, 0, "", hold, 0
	r.Failures, r.Progress, r.Message = 0, 0, ""
	s.touch(lj)
	s.metrics.counters["requeued"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "requeued", Message: fmt.Sprintf("by %s: was %s; run %d", by, was, r.Requeues+1)})
	s.log.Info("job requeued", "job", r.ID, "was", was, "by", by)
	j, err := s.specJob(&r.Spec, r.ID, now)
	var st *engine.Status
	if err == nil {
		st, err = s.eng.Submit(j)
	}
	if err != nil {
		// checkRunnable should have caught it.
		s.fail(lj, "requeued, then refused by the scheduler: "+err.Error())
		return http.StatusOK, ""
	}
	lj.j = j
	restoreUsage(st, &r.Engine)
	s.restorePerf(lj)
	if len(r.Spec.After) > 0 && r.FirstStart == 0 {
		s.deps[lj] = true
	}
	if hold {
		s.held[lj] = true
	}
	return http.StatusOK, ""
}

// restoreUsage gives a job's engine status back the scheduler's counters
// recorded for it (its attained service, starts, ...), so that policies
// see the same history after a restart or a requeue.
func restoreUsage(st *engine.Status, e *store.EngineStats) {
	st.Attained, st.Executed, st.Waited = e.Attained, e.Executed, e.Waited
	st.Starts, st.Preemptions, st.Resizes, st.Memo = e.Starts, e.Preemptions, e.Resizes, e.Memo
}

// queuedSince is when a job (its current run) joined the queue: its
// submission, or its last requeue.
func queuedSince(r *store.Job) float64 { return max(r.Submitted, r.Requeued) }
