package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/store"
)

// TestRecovery stops a server without stopping its jobs and starts another
// on the same data directory: a job still running is re-adopted (not
// restarted), one that finished in between is recorded finished once, one
// killed in between is retried from its checkpoint, and a queued one runs.
// A third start changes nothing.
func TestRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.StopJobsOnExit = false
	s1 := startServer(t, cfg)
	adopt := submit(t, s1.admin, countSpec(2, 60, 25*time.Millisecond))
	// quick must be seen running, then end while the server is down: a
	// second of work leaves room for a loaded machine.
	quick := submit(t, s1.admin, countSpec(1, 20, 50*time.Millisecond))
	killed := submit(t, s1.admin, countSpec(1, 40, 25*time.Millisecond))
	queued := submit(t, s1.admin, countSpec(2, 5, 10*time.Millisecond))
	running := func(j *api.Job) bool { return j.State == api.StateRunning && j.Progress > 0 }
	waitJob(t, s1.admin, adopt.ID, 10*time.Second, "running", running)
	waitJob(t, s1.admin, quick.ID, 10*time.Second, "running", running)
	jk := waitJob(t, s1.admin, killed.ID, 10*time.Second, "past step 5", func(j *api.Job) bool { return j.Progress >= 5.0/40 })
	s1.close(t)

	if err := killGroup(jk.Attempts[0].PID); err != nil {
		t.Fatal(err)
	}
	exit := filepath.Join(dir, "jobs", quick.ID, "attempt-1.exit")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(exit); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the quick job did not finish while the server was down")
		}
	}

	s2 := startServer(t, cfg)
	done := inState(api.StateFinished, api.StateFailed)
	ja := waitJob(t, s2.admin, adopt.ID, 20*time.Second, "finished", done)
	jq := waitJob(t, s2.admin, quick.ID, 20*time.Second, "finished", done)
	jk = waitJob(t, s2.admin, killed.ID, 20*time.Second, "finished", done)
	jw := waitJob(t, s2.admin, queued.ID, 20*time.Second, "finished", done)
	for _, j := range []*api.Job{ja, jq, jk, jw} {
		if j.State != api.StateFinished {
			t.Errorf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	if len(ja.Attempts) != 1 || ja.Restarts != 0 || !hasEvent(t, s2.admin, ja.ID, "adopted") {
		t.Errorf("running job was not re-adopted: attempts %+v", ja.Attempts)
	}
	if len(jq.Attempts) != 1 || jq.Attempts[0].Outcome != "finished" {
		t.Errorf("job finished while down: attempts %+v", jq.Attempts)
	}
	if len(jk.Attempts) != 2 || jk.Failures != 1 || jk.Attempts[0].Outcome != "lost" {
		t.Errorf("job killed while down: failures %d attempts %+v", jk.Failures, jk.Attempts)
	}
	if out := logs(t, s2.admin, jk.ID); !strings.Contains(out, "(attempt 2, restarts 1") || strings.Contains(out, "resuming at step 0 of 40 (attempt 2") {
		t.Errorf("the killed job did not resume from its checkpoint:\n%s", out)
	}
	before := map[string]int{}
	for _, j := range []*api.Job{ja, jq, jk, jw} {
		before[j.ID] = countEvents(t, s2.admin, j.ID, "finished")
		if before[j.ID] != 1 {
			t.Errorf("job %s has %d finished events", j.ID, before[j.ID])
		}
	}
	s2.close(t)

	s3 := startServer(t, cfg)
	jobs, err := s3.admin.Jobs(context.Background(), "")
	if err != nil || len(jobs) != 4 {
		t.Fatalf("after a third start: %d jobs (%v)", len(jobs), err)
	}
	for _, j := range jobs {
		if j.State != api.StateFinished || countEvents(t, s3.admin, j.ID, "finished") != 1 {
			t.Errorf("job %s after a third start: %s, %d finished events", j.ID, j.State, countEvents(t, s3.admin, j.ID, "finished"))
		}
	}
}

func countEvents(t *testing.T, c *api.Client, id, kind string) int {
	t.Helper()
	evs, err := c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// eventMessages are the messages of job id's events of kind.
func eventMessages(t *testing.T, c *api.Client, id, kind string) []string {
	t.Helper()
	evs, err := c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e.Message)
		}
	}
	return out
}

func hasEvent(t *testing.T, c *api.Client, id, kind string) bool {
	return countEvents(t, c, id, kind) > 0
}

// TestShutdownStopsJobs: with StopJobsOnExit, closing the server stops
// running jobs (they checkpoint); the next start restarts them from their
// checkpoints.
func TestShutdownStopsJobs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	s1 := startServer(t, cfg)
	j := submit(t, s1.admin, countSpec(2, 40, 20*time.Millisecond))
	j = waitJob(t, s1.admin, j.ID, 10*time.Second, "past step 10", func(j *api.Job) bool { return j.Progress >= 0.25 })
	pid := j.Attempts[0].PID
	s1.close(t)
	if alive(pid) {
		t.Fatalf("process %d survived the shutdown", pid)
	}
	s2 := startServer(t, cfg)
	j = waitJob(t, s2.admin, j.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished || len(j.Attempts) != 2 || j.Attempts[0].Outcome != "interrupted" || j.Failures != 0 {
		t.Fatalf("state %s failures %d attempts %+v", j.State, j.Failures, j.Attempts)
	}
	if line := lineWith(logs(t, s2.admin, j.ID), "(attempt 2,"); line == "" || strings.Contains(line, "at step 0 of") {
		t.Errorf("the job did not resume from its checkpoint: %q", line)
	}
}

// TestRecoverUnrecordedLaunch: a server that dies after launching a job's
// process but before recording its pid leaves an attempt without one. The
// next server finds the process by the pid file its wrapper wrote (checked
// against the process's TIDE_JOB_ID and TIDE_ATTEMPT) and re-adopts it.
func TestRecoverUnrecordedLaunch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.StopJobsOnExit = false
	s1 := startServer(t, cfg)
	// 5 s of work: the process must outlive the restart below, which takes
	// seconds on a loaded 2-core machine, or there is nothing to re-adopt.
	j := submit(t, s1.admin, countSpec(1, 200, 25*time.Millisecond))
	j = waitJob(t, s1.admin, j.ID, 10*time.Second, "running", func(j *api.Job) bool { return j.Progress > 0 })
	pid := j.Attempts[0].PID
	s1.close(t)

	// What the store holds when the crash comes between the launch and
	// its record.
	db, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *store.Tx) error {
		r, err := tx.Job(j.ID)
		if err != nil {
			return err
		}
		a := r.Last()
		a.PID, a.StartTicks, a.Started, a.Phase = 0, 0, 0, store.PhaseWaiting
		return tx.PutJob(r)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	cfg.StopJobsOnExit = true
	s2 := startServer(t, cfg)
	j = waitJob(t, s2.admin, j.ID, 40*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished || len(j.Attempts) != 1 || j.Attempts[0].PID != pid || j.Restarts != 0 || !hasEvent(t, s2.admin, j.ID, "adopted") {
		t.Errorf("the unrecorded process %d was not re-adopted: %s, restarts %d, attempts %+v", pid, j.State, j.Restarts, j.Attempts)
	}
}

// TestRecoverStoppedAttempts: attempts being stopped when the server went
// away (jobs left running) are accounted for by the next start, not only
// each job's last one. A cancelled job's attempt whose process ended while
// the server was down used to stay "stopping" for ever (and its GPU-hours
// grew in /v1/usage); a requeued job's old attempt, still running behind
// the new run's first attempt, was forgotten: its GPUs looked free, and the
// job was launched again beside its old process (TestRandomOperations,
// seeds 46 and 14 with TIDE_RANDOM_OPS_STEPS=90).
func TestRecoverStoppedAttempts(t *testing.T) {
	ctx := context.Background()
	stubborn := func(secs string) *api.JobSpec { // ignores SIGTERM
		return &api.JobSpec{Command: []string{"sh", "-c", "trap '' TERM; sleep " + secs}, GPUs: 1}
	}
	launched := func(j *api.Job) bool {
		return j.State == api.StateRunning && len(j.Attempts) > 0 && j.Attempts[len(j.Attempts)-1].PID > 0
	}
	waitGone := func(pid int) {
		for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive", pid)
			}
		}
	}

	t.Run("cancelled", func(t *testing.T) {
		cfg := testConfig(t, t.TempDir())
		cfg.StopJobsOnExit, cfg.Grace = false, 200*time.Millisecond
		s1 := startServer(t, cfg)
		j := submit(t, s1.admin, stubborn("30"))
		j = waitJob(t, s1.admin, j.ID, 10*time.Second, "launched", launched)
		if _, err := s1.admin.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		s1.close(t) // before the grace period ends: the attempt is still stopping
		waitGone(j.Attempts[0].PID)
		s2 := startServer(t, cfg)
		got, err := s2.admin.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.Attempts[0]; got.State != api.StateCancelled || a.Ended == nil || a.Outcome != "cancelled" {
			t.Errorf("after the restart: %s, attempt %+v; want cancelled, the attempt ended, cancelled", got.State, a)
		}
	})

	t.Run("requeued", func(t *testing.T) {
		cfg := testConfig(t, t.TempDir())
		cfg.StopJobsOnExit, cfg.Grace = false, time.Minute
		cfg.GPUs = cfg.GPUs[:1]
		s1 := startServer(t, cfg)
		// Its first attempt runs until killed, the others end at once.
		j := submit(t, s1.admin, &api.JobSpec{Command: []string{"sh", "-c", `trap '' TERM; [ "$TIDE_ATTEMPT" != 1 ] || sleep 30`}, GPUs: 1})
		j = waitJob(t, s1.admin, j.ID, 10*time.Second, "launched", launched)
		old := j.Attempts[0].PID
		// The old process ignores the SIGTERM: the new run's first attempt
		// waits for it.
		if _, err := s1.admin.Requeue(ctx, j.ID, false); err != nil {
			t.Fatal(err)
		}
		waitJob(t, s1.admin, j.ID, 10*time.Second, "restarted", func(j *api.Job) bool { return len(j.Attempts) == 2 })
		s1.close(t)
		s2 := startServer(t, cfg)
		waitJob(t, s2.admin, j.ID, 10*time.Second, "given a new attempt", func(j *api.Job) bool { return len(j.Attempts) >= 3 })
		if err := killGroup(old); err != nil { // sooner than the grace period
			t.Fatalf("the first attempt's process %d: %v", old, err)
		}
		got := waitJob(t, s2.admin, j.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
		first, last := got.Attempts[0], got.Attempts[len(got.Attempts)-1]
		if got.State != api.StateFinished || first.Ended == nil || last.Started == nil || last.Started.Before(*first.Ended) {
			t.Errorf("%s; attempt 1 (pid %d) ended %v, attempt %d started %v: the job ran beside its old process (attempts %+v)",
				got.State, old, first.Ended, last.N, last.Started, got.Attempts)
		}
	})
}

// TestRecoverStrayParts: two parts of a GPU, cancelled just before the
// server stopped and still running (they ignore SIGTERM), are leftovers
// the next server stops. A whole-GPU job given that GPU must wait for
// both. The server kept only the first leftover as the GPU's holder: the
// whole-GPU job started as soon as that one ended, beside the second one.
func TestRecoverStrayParts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.StopJobsOnExit, cfg.Grace = false, time.Minute // the leftovers end when told to, not killed
	cfg.GPUs = cfg.GPUs[:1]
	part := func(name string) *api.JobSpec {
		gate := filepath.Join(dir, name+".go")
		return &api.JobSpec{Name: name, GPUs: 1, GPUShare: 0.5, Command: []string{"sh", "-c",
			"trap '' TERM; touch " + filepath.Join(dir, name+".ran") + "; while [ ! -e " + gate + " ]; do sleep 0.02; done"}}
	}
	release := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name+".go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s1 := startServer(t, cfg)
	first := submit(t, s1.admin, part("first"))
	second := submit(t, s1.admin, part("second"))
	for _, j := range []*api.Job{first, second} {
		waitJob(t, s1.admin, j.ID, 20*time.Second, "launched", func(v *api.Job) bool {
			_, err := os.Stat(filepath.Join(dir, v.Spec.Name+".ran"))
			return v.State == api.StateRunning && err == nil
		})
		if _, err := s1.admin.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	s1.close(t)

	s2 := startServer(t, cfg)
	whole := submit(t, s2.admin, &api.JobSpec{Command: []string{"sh", "-c", "while [ ! -e " + filepath.Join(dir, "whole.go") + " ]; do sleep 0.02; done"}, GPUs: 1})
	release("first")
	waitJob(t, s2.admin, first.ID, 20*time.Second, "its leftover gone", func(v *api.Job) bool { return v.Attempts[0].Ended != nil })
	waitRounds(t, s2, 3)
	if v, err := s2.admin.Job(ctx, whole.ID); err != nil || len(v.Attempts) > 0 && v.Attempts[0].Started != nil {
		t.Errorf("a whole-GPU job launched beside a leftover part still running: %+v, %v", v, err)
	}
	release("second")
	release("whole")
	got := waitFinished(t, s2.admin, whole.ID, 20*time.Second)
	sv, err := s2.admin.Job(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended, started := sv.Attempts[0].Ended, got.Attempts[0].Started; ended == nil || started.Before(*ended) {
		t.Errorf("the whole-GPU job started at %v, the leftover part %s ended at %v", started, second.ID, ended)
	}
}
