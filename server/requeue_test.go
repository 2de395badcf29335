package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/store"
)

// TestRequeue: a finished job requeued runs again as attempt 2 of the same
// job; a running one is stopped (its process gone) before its new run
// starts; a failed one requeued held waits for release, its failures
// counted from 0; a waiting job cannot be requeued, nor another tenant's;
// and a requeue survives a restart.
func TestRequeue(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	ts := startServer(t, cfg)
	ctx := context.Background()
	done := func(j *api.Job) bool { return api.Terminal(j.State) && j.Attempts[len(j.Attempts)-1].Ended != nil }

	// A finished job runs again.
	fin := submit(t, ts.admin, &api.JobSpec{GPUs: 1, Command: []string{"sh", "-c", "echo run attempt=$TIDE_ATTEMPT"}})
	waitJob(t, ts.admin, fin.ID, 20*time.Second, "finished", inState(api.StateFinished))
	j, err := ts.admin.Requeue(ctx, fin.ID, false)
	if err != nil || j.State != api.StatePending || j.Requeues != 1 || j.Ended != nil {
		t.Fatalf("requeue a finished job: %v, %+v", err, j)
	}
	j = waitJob(t, ts.admin, fin.ID, 20*time.Second, "finished again", func(j *api.Job) bool { return j.State == api.StateFinished && len(j.Attempts) == 2 })
	if j.Attempts[1].N != 2 || j.Attempts[1].Outcome != "finished" || j.Requeues != 1 {
		t.Errorf("second run: %+v", j)
	}
	if out := logs(t, ts.admin, fin.ID); strings.Count(out, "\nrun attempt=") != 2 || !strings.Contains(out, "run attempt=2") {
		t.Errorf("log of a job run twice:\n%s", out)
	}
	if !hasEvent(t, ts.admin, fin.ID, "requeued") {
		t.Errorf("no requeued event")
	}

	// A running job is stopped, then runs again.
	run := submit(t, ts.admin, &api.JobSpec{GPUs: 1, Command: []string{"sleep", "60"}})
	j = waitJob(t, ts.admin, run.ID, 20*time.Second, "running", func(j *api.Job) bool {
		return j.State == api.StateRunning && len(j.Attempts) == 1 && j.Attempts[0].PID > 0
	})
	pid := j.Attempts[0].PID
	if _, err := ts.admin.Requeue(ctx, run.ID, false); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, ts.admin, run.ID, 30*time.Second, "running its second run", func(j *api.Job) bool {
		return j.State == api.StateRunning && len(j.Attempts) == 2 && j.Attempts[1].PID > 0
	})
	if alive(pid) {
		t.Errorf("the first run's process %d is still alive", pid)
	}
	if a := j.Attempts[0]; a.Outcome != "requeued" || a.Ended == nil || j.Attempts[1].Started.Before(*a.Ended) {
		t.Errorf("attempts of a requeued running job: %+v", j.Attempts)
	}
	if _, err := ts.admin.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}

	// A waiting job cannot be requeued.
	held := submit(t, ts.admin, &api.JobSpec{GPUs: 1, Hold: true, Command: []string{"true"}})
	if _, err := ts.admin.Requeue(ctx, held.ID, false); !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "already waiting") {
		t.Errorf("requeue a waiting job: %v", err)
	}
	// Nor another tenant's.
	tn, err := ts.admin.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(ts.url, tn.Token).Requeue(ctx, fin.ID, false); !isStatus(err, http.StatusNotFound) {
		t.Errorf("requeue another tenant's job: %v", err)
	}

	// A failed job, requeued held: it waits, its failures start again.
	zero := 0
	bad := submit(t, ts.admin, &api.JobSpec{GPUs: 1, MaxRetries: &zero, Command: []string{"sh", "-c", "exit 3"}})
	waitJob(t, ts.admin, bad.ID, 20*time.Second, "failed", done)
	j, err = ts.admin.Requeue(ctx, bad.ID, true)
	if err != nil || j.State != api.StatePending || !j.Held || j.Failures != 0 || j.Reason != "" {
		t.Fatalf("requeue --hold of a failed job: %v %+v", err, j)
	}

	// The requeue survives a restart.
	ts.close(t)
	ts = startServer(t, cfg)
	j, err = ts.admin.Job(ctx, bad.ID)
	if err != nil || j.State != api.StatePending || !j.Held || j.Requeues != 1 {
		t.Fatalf("requeued held job after a restart: %v %+v", err, j)
	}
	if _, err := ts.admin.Release(ctx, bad.ID); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, ts.admin, bad.ID, 20*time.Second, "failed again", func(j *api.Job) bool { return done(j) && len(j.Attempts) == 2 })
	if j.State != api.StateFailed || j.Failures != 1 || !strings.Contains(j.Reason, "attempt 2") {
		t.Errorf("second run of a failing job: %s, %d failures, %q", j.State, j.Failures, j.Reason)
	}
}

// TestRanForCountsTheCurrentRun: a job's time limit counts the attempts of
// its current run only.
func TestRanForCountsTheCurrentRun(t *testing.T) {
	r := &store.Job{Attempts: []store.Attempt{{Started: 10, Ended: 20}, {Started: 30, Ended: 35}, {Started: 40}}}
	for _, tc := range []struct {
		from int
		want float64
	}{{0, 10 + 5 + 10}, {1, 5 + 10}, {2, 10}, {3, 0}} {
		r.RunFrom = tc.from
		if got := ranFor(r, 50); got != tc.want {
			t.Errorf("RunFrom %d: ran %g s, want %g", tc.from, got, tc.want)
		}
	}
}
