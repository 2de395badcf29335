package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/store"
)

// What a Slurm user expects: dependencies, holds, time limits, paging,
// accounting and retention.

// blocked says why a waiting job may not start yet ("" when it may): it
// is held, or a job it starts after has not finished. Under mu (the
// engine's round calls it through quotaPolicy).
func (s *Server) blocked(id string) string {
	lj := s.jobs[id]
	if lj == nil {
		return ""
	}
	if lj.rec.Held {
		return heldWaiting(id)
	}
	if s.parts[lj] {
		return s.partsWait(lj.j)
	}
	for _, dep := range lj.rec.Spec.After {
		d := s.jobs[dep]
		if d == nil {
			return "waiting for job " + dep + " (unknown)"
		}
		if d.rec.State != api.StateFinished {
			return "waiting for job " + dep + " (" + d.rec.State + ") to finish"
		}
	}
	return ""
}

// gated reports whether a waiting job may be blocked (held, or with
// dependencies), dropping the held jobs released or ended since. Under mu
// (the engine's round calls it through quotaPolicy).
func (s *Server) gated() bool {
	for lj := range s.held {
		if !lj.rec.Held || api.Terminal(lj.rec.State) {
			delete(s.held, lj)
		}
	}
	for lj := range s.parts {
		if api.Terminal(lj.rec.State) {
			delete(s.parts, lj)
		}
	}
	return len(s.held) > 0 || len(s.deps) > 0 || len(s.parts) > 0
}

// partStopped says why a running job may not run under the server's
// policy: a part of a GPU re-adopted under an elastic policy ("" for any
// other). Under mu (the engine's round calls it through quotaPolicy).
func (s *Server) partStopped(id string) string {
	if lj := s.jobs[id]; lj != nil && s.parts[lj] {
		return s.partsWait(lj.j)
	}
	return ""
}

// partsWait is why part-GPU job j waits under an elastic policy, which
// chooses counts of whole GPUs: the engine refuses a plan that gives a
// part a whole GPU's shape, and such a plan failed every round, every
// job then waiting (the simulator refuses such a trace). A submission or
// requeue of such a job is refused (checkRunnable); one accepted under
// another policy before a restart waits (one re-adopted running is
// preempted), hidden from the policy, until the server runs a policy
// that is not elastic.
func (s *Server) partsWait(j *job.Job) string {
	return fmt.Sprintf("policy %s is elastic: it runs jobs on whole GPUs, and this job asks for part of each GPU (%s); "+
		"it waits until tide serve runs a policy that is not elastic (tide policies lists them)", s.wholeOnly, partField(j))
}

// heldWaiting is why held job id waits.
func heldWaiting(id string) string { return "held: 'tide release " + id + "' lets it start" }

// checkDeps fails the waiting jobs one of whose dependencies ended without
// finishing: they can never start. Under mu, before a round.
func (s *Server) checkDeps() {
	for lj := range s.deps {
		r := lj.rec
		if api.Terminal(r.State) || r.FirstStart > 0 {
			delete(s.deps, lj)
			continue
		}
		for _, dep := range r.Spec.After {
			d := s.jobs[dep]
			if d != nil && api.Terminal(d.rec.State) && d.rec.State != api.StateFinished {
				s.fail(lj, fmt.Sprintf("dependency %s was %s, so this job can never start (it starts after its dependencies finish)", dep, d.rec.State))
				delete(s.deps, lj)
				break
			}
		}
	}
}

// checkAfter checks a submission's dependencies: jobs p may see, not
// already ended without finishing. Under mu.
func (s *Server) checkAfter(after []string, p *principal) []api.FieldError {
	var errs []api.FieldError
	for _, id := range after {
		d := s.jobs[id]
		switch {
		case d == nil || !(p.admin || d.rec.Tenant == p.tenant):
			errs = append(errs, api.FieldError{Field: "after", Message: "no job " + strconv.Quote(id)})
		case api.Terminal(d.rec.State) && d.rec.State != api.StateFinished:
			errs = append(errs, api.FieldError{Field: "after", Message: fmt.Sprintf("job %s is already %s: this job could never start", id, d.rec.State)})
		}
	}
	return errs
}

// checkTimeLimits stops and fails the running jobs past their
// time_limit_s.
func (s *Server) checkTimeLimits() {
	s.lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.clk.Now()
	changed := false
	for _, lj := range s.order {
		r := lj.rec
		if r.Spec.TimeLimitS <= 0 || lj.att == nil || lj.att.proc == nil || api.Terminal(r.State) {
			continue
		}
		ran := ranFor(r, now)
		if ran <= r.Spec.TimeLimitS {
			continue
		}
		if lj.j != nil {
			_ = s.eng.Fail(r.ID)
		}
		s.stopAttempt(lj.att, "time-limit")
		lj.att = nil
		why := fmt.Sprintf("time limit of %s reached (ran %s)", fmtSeconds(r.Spec.TimeLimitS), fmtSeconds(ran))
		r.State, r.Ended, r.Reason = api.StateFailed, now, why
		s.touch(lj)
		s.metrics.counters["failed"]++
		s.addEvent(&store.Event{Job: r.ID, Kind: "time-limit", Message: why})
		s.log.Info("job over its time limit", "job", r.ID, "limit_s", r.Spec.TimeLimitS)
		changed = true
	}
	if changed {
		_ = s.commit()
		s.kickRound()
	}
}

// ranFor is how long the attempts of a job's current run (since its
// last requeue) have run in all, seconds, at now.
func ranFor(r *store.Job, now float64) float64 {
	total := 0.0
	for _, a := range r.Attempts[min(r.RunFrom, len(r.Attempts)):] {
		switch {
		case a.Started == 0:
		case a.Ended > 0:
			total += a.Ended - a.Started
		default:
			total += now - a.Started
		}
	}
	return total
}

func fmtSeconds(sec float64) string {
	return (time.Duration(sec * float64(time.Second))).Round(100 * time.Millisecond).String()
}

// handleHold holds a waiting job, handleRelease releases it.
func (s *Server) handleHold(w http.ResponseWriter, r *http.Request, p *principal) {
	s.setHeld(w, r, p, true)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, p *principal) {
	s.setHeld(w, r, p, false)
}

func (s *Server) setHeld(w http.ResponseWriter, r *http.Request, p *principal, held bool) {
	lj := s.lockVisible(w, r, p)
	if lj == nil {
		return
	}
	msg, err := s.holdLocked(lj, held, p.tenant)
	if msg != "" {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, msg, nil)
		return
	}
	v := s.view(lj, true)
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.kickRound()
	writeJSON(w, http.StatusOK, v)
}

// holdLocked holds (held) or releases a job for tenant by and commits
// the change. It returns why it refused (a conflict, nothing changed) or
// the commit's error. Under mu; the caller kicks a round on success.
func (s *Server) holdLocked(lj *liveJob, held bool, by string) (refused string, err error) {
	rec := lj.rec
	switch {
	case api.Terminal(rec.State):
		return fmt.Sprintf("job %s is already %s", rec.ID, rec.State), nil
	case held && lj.att != nil:
		return fmt.Sprintf("job %s is running: only a waiting job can be held (cancel it, or let it run)", rec.ID), nil
	case !held && !rec.Held:
		return fmt.Sprintf("job %s is not held", rec.ID), nil
	}
	kind := "released"
	if held {
		kind = "held"
	}
	rec.Held = held
	if held {
		s.held[lj] = true
	}
	s.touch(lj)
	s.addEvent(&store.Event{Job: rec.ID, Kind: kind, Message: "by " + by})
	return "", s.commit()
}

// listQuery is GET /v1/jobs' query, validated.
type listQuery struct {
	states map[string]bool
	tenant string
	limit  int
	after  string
}

var jobStates = []string{api.StatePending, api.StateRunning, api.StatePreempted, api.StateFinished, api.StateFailed, api.StateCancelled, api.StateDeclined}

// parseList reads GET /v1/jobs' query: state (comma-separated states),
// tenant, limit (1 to 10000), after (a job ID: the page after it). Unknown
// parameters and values are errors.
func (s *Server) parseList(r *http.Request, p *principal) (*listQuery, []api.FieldError) {
	q := &listQuery{}
	var errs []api.FieldError
	for k, vs := range r.URL.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "state":
			q.states = map[string]bool{}
			for _, st := range strings.Split(v, ",") {
				if !slices.Contains(jobStates, st) {
					errs = append(errs, api.FieldError{Field: "state", Message: fmt.Sprintf("unknown state %q: want %s (comma-separated)", st, strings.Join(jobStates, ", "))})
					continue
				}
				q.states[st] = true
			}
		case "tenant":
			switch {
			case !p.admin && v != p.tenant:
				errs = append(errs, api.FieldError{Field: "tenant", Message: "only the admin may list another tenant's jobs"})
			case p.admin && s.tenantByName(v) == nil && !s.hasTenantJobs(v):
				errs = append(errs, api.FieldError{Field: "tenant", Message: fmt.Sprintf("no tenant %q", v)})
			}
			q.tenant = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 10000 {
				errs = append(errs, api.FieldError{Field: "limit", Message: fmt.Sprintf("want 1 to 10000, got %q", v)})
			}
			q.limit = n
		case "after":
			if !api.JobID(v) {
				errs = append(errs, api.FieldError{Field: "after", Message: fmt.Sprintf("want a job ID such as j000042, got %q", v)})
			}
			q.after = v
		default:
			errs = append(errs, api.FieldError{Field: k, Message: "unknown parameter: want state, tenant, limit or after"})
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return q, errs
}

// hasTenantJobs reports whether any job belongs to tenant (a deleted
// tenant's finished jobs stay listable).
func (s *Server) hasTenantJobs(tenant string) bool {
	s.lock()
	defer s.mu.Unlock()
	for _, lj := range s.order {
		if lj.rec.Tenant == tenant {
			return true
		}
	}
	return false
}

// Usage is GET /v1/usage: GPU-hours per job over [from, to).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request, p *principal) {
	now := s.clk.Now()
	from, to := 0.0, now
	var errs []api.FieldError
	for k, vs := range r.URL.Query() {
		v := vs[len(vs)-1]
		t, err := time.Parse(time.RFC3339, v)
		switch {
		case k != "from" && k != "to":
			errs = append(errs, api.FieldError{Field: k, Message: "unknown parameter: want from and to"})
		case err != nil:
			errs = append(errs, api.FieldError{Field: k, Message: fmt.Sprintf("want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", v)})
		case k == "from":
			from = job.Unix(t)
		default:
			to = job.Unix(t)
		}
	}
	if len(errs) == 0 && to <= from {
		errs = append(errs, api.FieldError{Field: "to", Message: "must be after from"})
	}
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid usage query", errs)
		return
	}
	out := api.Usage{From: time.Unix(0, int64(from*1e9)).UTC(), To: time.Unix(0, int64(to*1e9)).UTC(), Jobs: []api.JobUsage{}}
	s.lock()
	for _, lj := range s.order {
		rec := lj.rec
		if !p.admin && rec.Tenant != p.tenant {
			continue
		}
		gs := 0.0
		for _, a := range rec.Attempts {
			if a.Started == 0 {
				continue
			}
			end := a.Ended
			if end == 0 {
				end = now
			}
			if ov := min(end, to) - max(a.Started, from); ov > 0 {
				gs += ov * float64(len(a.Devices))
			}
		}
		if gs > 0 {
			out.Jobs = append(out.Jobs, api.JobUsage{Job: rec.ID, Name: rec.Spec.Name, Tenant: rec.Tenant, State: rec.State, GPUHours: gs / 3600})
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// purgeOld removes the files (log, checkpoint, report, working directory
// in the job's directory) of jobs that ended more than Config.Retention
// ago; the records stay. Runs now and then from monitorLoop.
func (s *Server) purgeOld() {
	if s.cfg.Retention <= 0 {
		return
	}
	s.lock()
	now := s.clk.Now()
	cut := now - s.cfg.Retention.Seconds()
	var ids []*liveJob
	for _, lj := range s.order {
		r := lj.rec
		if api.Terminal(r.State) && r.Ended > 0 && r.Ended < cut && r.Purged == 0 && (lj.last == nil || isClosed(lj.last.done)) {
			ids = append(ids, lj)
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	var done []*liveJob
	for _, lj := range ids {
		dir := s.jobDir(lj.rec.ID)
		if filepath.Dir(dir) != s.jobsDir {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("retention: removing a job's files", "job", lj.rec.ID, "err", err)
			continue
		}
		done = append(done, lj)
	}
	s.lock()
	for _, lj := range done {
		lj.rec.Purged = now
		s.touch(lj)
		s.addEvent(&store.Event{Job: lj.rec.ID, Kind: "purged", Message: fmt.Sprintf("log and checkpoint removed: ended over %s ago (--retention)", s.cfg.Retention)})
	}
	if !s.closed {
		_ = s.commit()
	}
	s.mu.Unlock()
	s.log.Info("retention: purged finished jobs' files", "jobs", len(done))
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
