package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/store"
)

// roundGapFactor bounds the share of time rounds take: a kicked round
// waits, after the last one, at least this many times as long as that
// one took. With a long queue a round costs milliseconds (the policy
// orders and explains every waiting job), and a burst of submissions
// would otherwise keep the scheduler busy all the time.
const roundGapFactor = 8

// scheduleLoop runs a round when kicked (submission, completion,
// cancellation), at most one per Config.MinRoundGap or roundGapFactor
// times the last round's duration, whichever is longer, and every
// Config.Round.
func (s *Server) scheduleLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Round)
	defer t.Stop()
	var last time.Time
	var took time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			gap := max(s.cfg.MinRoundGap, roundGapFactor*took)
			if wait := gap - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		case <-t.C:
		}
		last = time.Now()
		took = s.round()
	}
}

// monitorLoop reads the jobs' report files and writes progress reports to
// the store now and then.
func (s *Server) monitorLoop(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var purged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.readReportFiles()
		s.capLogs()
		s.checkTimeLimits()
		if time.Since(purged) > time.Minute {
			purged = time.Now()
			s.purgeOld()
		}
		s.lock()
		if !s.closed && (len(s.dirty) > 0 || s.polState != nil) && time.Since(s.lastSave) > 2*time.Second {
			_ = s.commit()
		}
		s.mu.Unlock()
	}
}

// notePolicyWarnings records each warning raised in a round: a count
// (fallbacks in tide_policy_fallbacks_total), and for a fallback to a
// simpler rule an event "policy-fallback" on every job the round planned
// (a fallback shapes all their plans) and a log line. A warning about one
// job (an assignment the engine dropped, engine.WarnDropped) goes to that
// job alone, as an event and a log line when its reason is new for the job:
// the policy likely repeats the mistake every round.
func (s *Server) notePolicyWarnings(ws []engine.RoundWarning) {
	for _, w := range ws {
		s.metrics.warnings[w.Kind]++
		if w.Job != "" {
			if s.dropped[w.Job] == w.Reason {
				continue
			}
			s.dropped[w.Job] = w.Reason
			s.addEvent(&store.Event{Job: w.Job, Kind: "policy-" + w.Kind, Message: w.Reason})
			s.log.Warn("policy "+w.Kind, "policy", w.Policy, "job", w.Job, "reason", w.Reason)
			continue
		}
		for _, st := range s.eng.Active() {
			s.addEvent(&store.Event{Job: st.Job.ID, Kind: "policy-" + w.Kind, Message: w.Reason})
		}
		s.log.Warn("policy "+w.Kind, "policy", w.Policy, "reason", w.Reason)
	}
}

// round runs one scheduling round and applies its changes; it returns
// how long the scheduling took (0 when there was nothing to schedule).
func (s *Server) round() (took time.Duration) {
	s.lock()
	defer s.mu.Unlock()
	if s.closed || len(s.eng.Active()) == 0 {
		return 0
	}
	t0 := time.Now()
	s.checkDeps()
	s.setQuotas()
	changes, err := s.eng.Schedule()
	took = time.Since(t0)
	s.metrics.observeRound(took.Seconds())
	s.notePolicyWarnings(s.eng.DrainWarnings())
	if err != nil {
		s.log.Error("scheduling round failed", "err", err)
		return
	}
	s.notePolicyState()
	var launches []*attempt
	for _, ch := range changes {
		lj := s.jobs[ch.Status.Job.ID]
		if lj == nil {
			s.log.Error("round changed an unknown job", "job", ch.Status.Job.ID)
			continue
		}
		r := lj.rec
		switch ch.Kind {
		case engine.Preempt:
			if lj.att != nil {
				s.stopAttempt(lj.att, "preempt")
				lj.att = nil
			}
			r.State = api.StatePreempted
			r.Preemptions++
			s.metrics.counters["preempted"]++
			s.addEvent(&store.Event{Job: r.ID, Kind: "preempted", Message: withReason("GPUs "+s.devString(ch.From), ch.Status)})
			s.log.Info("job preempted", "job", r.ID)
		case engine.Resize:
			if lj.att != nil {
				s.stopAttempt(lj.att, "resize")
				lj.att = nil
			}
			r.Restarts++
			s.metrics.counters["resized"]++
			s.addEvent(&store.Event{Job: r.ID, Kind: "resized", Message: withReason("GPUs "+s.devString(ch.From)+" -> "+s.devString(ch.To), ch.Status)})
			launches = append(launches, s.newAttempt(lj, ch.To, 0))
		case engine.Decline:
			// The engine has ended the job: a waiting job holds no
			// attempt, so there is nothing to stop.
			why := fmt.Sprintf("declined at admission by %s: it cannot meet its deadline", s.policyName)
			if t := api.DeclineReason(ch.Status.Reason().Text); t != "" {
				why += "; " + t
			}
			r.State, r.Ended, r.Reason = api.StateDeclined, s.clk.Now(), why
			s.metrics.counters["declined"]++
			s.addEvent(&store.Event{Job: r.ID, Kind: "declined", Message: why})
			s.log.Info("job declined", "job", r.ID)
		case engine.Start, engine.Restart:
			if lj.att != nil { // cannot happen: a waiting job holds no attempt
				s.stopAttempt(lj.att, "replaced")
			}
			if ch.Kind == engine.Restart {
				r.Restarts++
				s.metrics.counters["restarted"]++
			} else {
				s.metrics.counters["started"]++
			}
			s.addEvent(&store.Event{Job: r.ID, Kind: string(ch.Kind), Attempt: len(r.Attempts) + 1, Message: "GPUs " + s.devString(ch.To)})
			launches = append(launches, s.newAttempt(lj, ch.To, 0))
		}
		s.touch(lj)
	}
	_ = s.commit()
	for _, a := range launches {
		s.running.Add(1)
		go s.run(a)
	}
	return took
}

func (s *Server) devString(gpus []cluster.GPUID) string {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = s.devices[g]
	}
	return fmt.Sprint(out)
}

// newAttempt records a planned launch of lj on gpus and makes it the job's
// current attempt; it will wait for the GPUs' previous processes. Under mu.
func (s *Server) newAttempt(lj *liveJob, gpus []cluster.GPUID, delay time.Duration) *attempt {
	r := lj.rec
	a := &attempt{lj: lj, n: len(r.Attempts) + 1, gpus: append([]cluster.GPUID(nil), gpus...), delay: delay,
		done: make(chan struct{}), wake: make(chan struct{}), frac: lj.j != nil && lj.j.Fractional()}
	if st := s.eng.Job(r.ID); st != nil {
		a.partner = st.PackedWith // set before claim: a packed attempt runs beside its partner
	}
	ids := make([]int, len(gpus))
	for i, g := range gpus {
		a.devs = append(a.devs, s.devices[g])
		ids[i] = int(g)
		s.claim(a, g)
	}
	// Never two processes of one job: wait for the previous attempt too,
	// wherever it runs (a job preempted, then restarted on other GPUs
	// before its old process has exited; a resize onto other GPUs).
	if prev := lj.last; prev != nil && !contains(a.waitFor, prev) {
		a.waitFor = append(a.waitFor, prev)
	}
	lj.last = a
	r.Attempts = append(r.Attempts, store.Attempt{N: a.n, GPUs: ids, Devices: a.devs, Phase: store.PhaseWaiting, Created: s.clk.Now()})
	r.State = api.StateRunning
	lj.att = a
	s.touch(lj)
	return a
}

func contains(as []*attempt, a *attempt) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// stopAttempt asks an attempt to end; the signal goes out once the next
// commit has recorded why. Under mu.
func (s *Server) stopAttempt(a *attempt, why string) {
	if a.stop != "" {
		return
	}
	a.stop = why
	rec := &a.lj.rec.Attempts[a.n-1]
	if rec.Phase != store.PhaseEnded {
		rec.Phase, rec.Stop = store.PhaseStopping, why
	}
	s.touch(a.lj)
	s.after = append(s.after, func() {
		if a.proc != nil {
			go a.proc.Stop(s.cfg.Grace)
		} else if !a.woken {
			a.woken = true
			close(a.wake)
		}
	})
}

// startProc is localexec.Start, replaced by tests that act during a
// launch.
var startProc = localexec.Start

// run waits for an attempt's GPUs (and its retry delay), launches it and
// waits for it to end.
func (s *Server) run(a *attempt) {
	for _, w := range a.waitFor {
		<-w.done
	}
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		select {
		case <-t.C:
		case <-a.wake:
		}
		t.Stop()
	}
	s.lock()
	if a.stop != "" || s.closed {
		if a.stop == "" {
			a.stop = "shutdown"
		}
		s.ended(a, -1, false, "never launched")
		_ = s.commit()
		s.mu.Unlock()
		close(a.done)
		s.running.Done()
		return
	}
	l, err := s.launchSpec(a)
	s.inLaunch++ // Close waits for the launch to be recorded
	s.mu.Unlock()
	// Launch outside mu: fork and exec take a while.
	var proc *localexec.Proc
	if err == nil {
		l.MPSPipeDir, err = s.acquireMPS(a)
	}
	if err == nil {
		proc, err = startProc(l)
	}
	s.lock()
	if s.inLaunch--; s.inLaunch == 0 {
		s.idle.Broadcast()
	}
	if err != nil {
		s.log.Error("job launch failed", "job", a.lj.rec.ID, "attempt", a.n, "err", err)
		s.appendLog(a.lj.rec.ID, fmt.Sprintf("=== tide: attempt %d could not start: %v\n", a.n, err))
		s.ended(a, -1, false, err.Error())
		if s.db != nil {
			_ = s.commit()
		}
		s.mu.Unlock()
		close(a.done)
		s.running.Done()
		return
	}
	a.proc = proc
	if s.db == nil {
		// The server closed during the launch, leaving jobs running: the
		// next one finds this attempt by its pid file.
		s.mu.Unlock()
		s.watch(a)
		return
	}
	if a.stop != "" {
		// Stopped while launching.
		s.after = append(s.after, func() { go proc.Stop(s.cfg.Grace) })
	}
	r := a.lj.rec
	now := s.clk.Now()
	ra := &r.Attempts[a.n-1]
	ra.PID, ra.StartTicks, ra.Started, ra.MPS = proc.PID(), proc.StartTicks(), now, a.mpsHeld
	if a.stop == "" {
		ra.Phase = store.PhaseRunning
	}
	if r.FirstStart == 0 && a.stop == "" {
		// An attempt stopped while it launched (its job cancelled or
		// requeued meanwhile) does not start the job: it may be over.
		r.FirstStart = now
	}
	s.touch(a.lj)
	s.addEvent(&store.Event{Job: r.ID, Kind: "launched", Attempt: a.n, Message: fmt.Sprintf("pid %d on GPUs %v", proc.PID(), a.devs)})
	s.log.Info("job launched", "job", r.ID, "attempt", a.n, "pid", proc.PID(), "gpus", a.devs)
	_ = s.commit()
	s.mu.Unlock()
	s.watch(a)
}

// watch waits for a launched attempt's process to end and handles it.
func (s *Server) watch(a *attempt) {
	defer s.running.Done()
	code, known := a.proc.Exit()
	a.noRetry = s.noRetry(a.lj.rec.ID, code, known) // reads the log: outside mu
	s.lock()
	if s.db != nil {
		s.ended(a, code, known, "")
		_ = s.commit()
	}
	s.mu.Unlock()
	close(a.done)
}

// launchSpec builds the launch of attempt a, with a fresh report token.
// Under mu.
func (s *Server) launchSpec(a *attempt) (*localexec.Launch, error) {
	r := a.lj.rec
	tok, err := store.NewToken()
	if err != nil {
		return nil, err
	}
	r.ReportTokenHash = store.HashToken(tok)
	u, err := s.tenantUser(r.Tenant)
	if err != nil {
		return nil, err
	}
	dir, err := s.prepareJobDirs(r.ID, u)
	if err != nil {
		return nil, err
	}
	if r.Spec.Workdir != "" {
		dir = r.Spec.Workdir
	}
	env := r.Spec.Env
	if r.Spec.ArrayIndex != nil {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env["TIDE_ARRAY_INDEX"] = strconv.Itoa(*r.Spec.ArrayIndex)
	}
	l := &localexec.Launch{JobID: r.ID, Attempt: a.n, Command: r.Spec.Command, Dir: dir, Env: env, User: u,
		Devices: a.devs, CheckpointDir: s.checkpointDir(r.ID), LogFile: s.logFile(r.ID),
		PIDFile: s.pidFile(r.ID, a.n), ExitFile: s.exitFile(r.ID, a.n),
		ReportToken: tok, ReportFile: s.reportFile(r.ID), Batch: s.batchFor(a.lj, len(a.devs))}
	l.Share, l.GPUMemGiB = s.shareLimits(a)
	ra := &r.Attempts[a.n-1]
	ra.BatchSize, ra.LocalBsz, ra.AccumSteps = l.Batch.Global, l.Batch.LocalBsz, l.Batch.AccumSteps
	if s.report != "" {
		l.ReportURL = s.report + "/v1/jobs/" + r.ID + "/report"
	}
	return l, nil
}

func (s *Server) appendLog(id, line string) {
	if err := os.MkdirAll(s.jobDir(id), 0o711); err != nil {
		return
	}
	f, err := os.OpenFile(s.logFile(id), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = io.WriteString(f, line)
}

// ended handles the end of attempt a: exit code (known) or launch error
// (msg). Under mu.
func (s *Server) ended(a *attempt, code int, known bool, msg string) {
	for _, g := range a.gpus {
		s.unclaim(a, g)
	}
	s.releaseMPS(a)
	lj := a.lj
	r := lj.rec
	ra := &r.Attempts[a.n-1]
	if ra.Phase == store.PhaseEnded {
		return
	}
	now := s.clk.Now()
	ra.Phase, ra.Ended = store.PhaseEnded, now
	if known {
		ra.ExitCode = &code
	}
	s.touch(lj)
	if a.stop != "" {
		ra.Outcome = outcomeOf(a.stop)
		s.addEvent(&store.Event{Job: r.ID, Kind: "stopped", Attempt: a.n, Message: fmt.Sprintf("%s; exit code %s", a.stop, codeString(code, known))})
		if a.stop == "shutdown" && !api.Terminal(r.State) {
			r.State = api.StatePreempted
		}
		return
	}
	if lj.att == a {
		lj.att = nil
	}
	if api.Terminal(r.State) {
		ra.Outcome = r.State
		return
	}
	if known && code == 0 {
		ra.Outcome = "finished"
		s.finish(lj, "exit code 0")
		s.kickRound()
		return
	}
	ra.Outcome = "failed"
	what := "exit code " + codeString(code, known)
	if !known {
		ra.Outcome = "lost"
	}
	if msg != "" {
		what = msg
	}
	r.Failures++
	s.metrics.counters["attempt_failures"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "attempt-" + ra.Outcome, Attempt: a.n, Message: what})
	s.log.Warn("job attempt failed", "job", r.ID, "attempt", a.n, "reason", what, "failures", r.Failures)
	if a.noRetry != "" {
		s.fail(lj, fmt.Sprintf("%s (attempt %d): %s: not retried", what, a.n, a.noRetry))
		s.kickRound()
		return
	}
	if r.Failures > s.maxRetries(r) {
		s.fail(lj, fmt.Sprintf("%s (attempt %d); %d failures, retry limit %d", what, a.n, r.Failures, s.maxRetries(r)))
		s.kickRound()
		return
	}
	// Retry in place: the engine still holds the job on its GPUs.
	st := s.eng.Job(r.ID)
	if st == nil || len(st.GPUs) == 0 {
		s.log.Error("failed job holds no GPUs: cannot retry it", "job", r.ID)
		return
	}
	delay := s.cfg.RetryBackoff << min(r.Failures-1, 10)
	delay = min(delay, time.Minute)
	r.Restarts++
	s.metrics.counters["restarted"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "retry", Attempt: a.n + 1, Message: fmt.Sprintf("after %s (failure %d of at most %d retries)", delay, r.Failures, s.maxRetries(r))})
	na := s.newAttempt(lj, st.GPUs, delay)
	s.running.Add(1)
	s.after = append(s.after, func() { go s.run(na) })
}

func codeString(code int, known bool) string {
	if !known {
		return "unknown"
	}
	return fmt.Sprint(code)
}

func outcomeOf(stop string) string {
	switch stop {
	case "preempt":
		return "preempted"
	case "resize":
		return "resized"
	case "cancel":
		return "cancelled"
	case "time-limit":
		return "timeout"
	case "requeue":
		return "requeued"
	case "":
		return "interrupted"
	}
	return "interrupted"
}

// finish records a job finished. Under mu.
func (s *Server) finish(lj *liveJob, why string) {
	r := lj.rec
	if api.Terminal(r.State) {
		return
	}
	if lj.j != nil {
		if err := s.eng.Finish(r.ID); err != nil {
			s.log.Error("engine finish", "job", r.ID, "err", err)
		}
	}
	r.State, r.Ended, r.Progress = api.StateFinished, s.clk.Now(), 1
	s.forgetEnded(r.ID)
	s.touch(lj)
	s.metrics.counters["finished"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "finished", Message: why})
	s.log.Info("job finished", "job", r.ID)
}

// fail records a job failed. Under mu.
func (s *Server) fail(lj *liveJob, why string) {
	r := lj.rec
	if api.Terminal(r.State) {
		return
	}
	if lj.j != nil {
		if err := s.eng.Fail(r.ID); err != nil {
			s.log.Error("engine fail", "job", r.ID, "err", err)
		}
	}
	r.State, r.Ended, r.Reason = api.StateFailed, s.clk.Now(), why
	s.forgetEnded(r.ID)
	s.touch(lj)
	s.metrics.counters["failed"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "failed", Message: why})
	s.log.Warn("job failed", "job", r.ID, "reason", why)
}

// cancel cancels a job. Under mu.
func (s *Server) cancelJob(lj *liveJob, by string) error {
	r := lj.rec
	if api.Terminal(r.State) {
		return fmt.Errorf("job %s is already %s", r.ID, r.State)
	}
	if lj.j != nil {
		if err := s.eng.Fail(r.ID); err != nil {
			return fmt.Errorf("job %s: %w", r.ID, err)
		}
	}
	if lj.att != nil {
		s.stopAttempt(lj.att, "cancel")
		lj.att = nil
	}
	r.State, r.Ended, r.Reason = api.StateCancelled, s.clk.Now(), "cancelled by "+by
	s.forgetEnded(r.ID)
	s.touch(lj)
	s.metrics.counters["cancelled"]++
	s.addEvent(&store.Event{Job: r.ID, Kind: "cancelled", Message: r.Reason})
	s.log.Info("job cancelled", "job", r.ID, "by", by)
	return s.commit()
}

// applyReport takes a job's progress report. Under mu.
func (s *Server) applyReport(lj *liveJob, rep *api.Report) {
	r := lj.rec
	if api.Terminal(r.State) || lj.j == nil {
		return
	}
	id := r.ID
	if f, ok := rep.Fraction(); ok {
		r.Progress = f
		if st := s.eng.Job(id); st != nil {
			_ = s.eng.Report(id, f*st.Work)
		}
	}
	if rep.Throughput > 0 {
		r.Throughput = rep.Throughput
	}
	if rep.Message != "" {
		r.Message = rep.Message
	}
	r.ReportedAt = s.clk.Now()
	s.touch(lj)
	s.learn(lj, rep)
}

// readReportFiles reads the lines jobs appended to their report files.
func (s *Server) readReportFiles() {
	type item struct {
		lj  *liveJob
		off int64
	}
	var items []item
	s.lock()
	for _, lj := range s.order {
		if lj.att != nil && lj.att.proc != nil {
			items = append(items, item{lj, lj.reportOff})
		}
	}
	s.mu.Unlock()
	for _, it := range items {
		reps, off := readReports(s.reportFile(it.lj.rec.ID), it.off)
		if off == it.off {
			continue
		}
		s.lock()
		it.lj.reportOff = off
		for _, rep := range reps {
			s.applyReport(it.lj, rep)
		}
		s.mu.Unlock()
	}
}

// readReports reads the complete lines of a report file from off (at most
// 1 MiB), skipping lines that are not valid reports.
func readReports(path string, off int64) ([]*api.Report, int64) {
	f, err := os.Open(path)
	if err != nil {
		return nil, off
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < off {
		off = 0 // truncated or replaced: start over
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off
	}
	br := bufio.NewReader(io.LimitReader(f, api.MaxBodyBytes))
	var out []*api.Report
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break // an incomplete last line is read next time
		}
		off += int64(len(line))
		var rep api.Report
		if json.Unmarshal(line, &rep) != nil || len(rep.Validate()) > 0 {
			continue
		}
		out = append(out, &rep)
	}
	return out, off
}

// capLogs truncates the logs of running jobs that outgrew their limit
// (Config.MaxLogBytes, or the tenant's limits.max_log_bytes) back to it,
// followed by a marker line: output beyond the limit is dropped (the
// job's descriptor appends, so it keeps writing at the new end, and is cut
// again at the next check).
func (s *Server) capLogs() {
	type item struct {
		id    string
		limit int64
	}
	var items []item
	s.lock()
	for _, lj := range s.order {
		if lj.att != nil && lj.att.proc != nil {
			items = append(items, item{lj.rec.ID, s.logLimit(lj.rec.Tenant)})
		}
	}
	s.mu.Unlock()
	for _, it := range items {
		capLog(s.logFile(it.id), it.limit)
	}
}

// logLimit is the log size limit of tenant's jobs.
func (s *Server) logLimit(tenant string) int64 {
	if t := s.tenantByName(tenant); t != nil && t.Limits.MaxLogBytes > 0 {
		return t.Limits.MaxLogBytes
	}
	return s.cfg.MaxLogBytes
}

// logMarker ends a log cut at limit bytes.
func logMarker(limit int64) string {
	return fmt.Sprintf("\n=== tide: output truncated: the log reached its limit of %d bytes (limits.max_log_bytes); the rest is dropped\n", limit)
}

// capLog cuts the log at path to limit bytes and the marker, if it is
// longer.
func capLog(path string, limit int64) {
	fi, err := os.Stat(path)
	marker := logMarker(limit)
	if err != nil || fi.Size() <= limit+int64(len(marker)) {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if err := f.Truncate(limit); err != nil {
		return
	}
	_, _ = f.WriteAt([]byte(marker), limit)
}

// withReason appends the policy's reason for its decision about st (the
// engine's Status.Reason, "preempted; ..." or "shrunk 4->2 GPUs; ...") to
// an event's message.
func withReason(msg string, st *engine.Status) string {
	if st == nil {
		return msg
	}
	if r := st.Reason(); r.Text != "" {
		return msg + ": " + api.WallReason(r.Text)
	}
	return msg
}
