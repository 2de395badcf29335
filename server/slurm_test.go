package server

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
)

// TestDependencies: a job after another starts once it finished; a job
// after one that failed fails without running, saying why; unknown or
// already failed dependencies are refused at submission.
func TestDependencies(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	zero := 0
	order := filepath.Join(t.TempDir(), "order")
	first := submit(t, ts.admin, &api.JobSpec{GPUs: 1, Command: []string{"sh", "-c", "sleep 0.5; echo first > " + order}})
	then := submit(t, ts.admin, &api.JobSpec{GPUs: 1, After: []string{first.ID}, Command: []string{"test", "-e", order}})
	if j, _ := ts.admin.Job(ctx, then.ID); j.State != api.StatePending || !strings.Contains(j.Waiting, first.ID) {
		t.Errorf("dependent job: %s, waiting %q", j.State, j.Waiting)
	}
	jt := waitJob(t, ts.admin, then.ID, 20*time.Second, "over", inState(api.StateFinished, api.StateFailed))
	jf, _ := ts.admin.Job(ctx, first.ID)
	if jt.State != api.StateFinished || jt.Started.Before(*jf.Ended) {
		t.Errorf("dependent job %s started %v, its dependency ended %v", jt.State, jt.Started, jf.Ended)
	}
	bad := submit(t, ts.admin, &api.JobSpec{GPUs: 1, MaxRetries: &zero, Command: []string{"sh", "-c", "sleep 0.3; exit 3"}})
	never := submit(t, ts.admin, &api.JobSpec{GPUs: 1, After: []string{bad.ID}, Command: []string{"touch", "ran"}})
	jn := waitJob(t, ts.admin, never.ID, 20*time.Second, "failed", inState(api.StateFailed, api.StateFinished))
	if jn.State != api.StateFailed || !strings.Contains(jn.Reason, "dependency "+bad.ID+" was failed") || len(jn.Attempts) != 0 {
		t.Errorf("job after a failed one: %s %q, %d attempts", jn.State, jn.Reason, len(jn.Attempts))
	}
	for _, after := range [][]string{{"j999999"}, {bad.ID}, {"x1"}} {
		if _, err := ts.admin.Submit(ctx, &api.JobSpec{GPUs: 1, After: after, Command: []string{"true"}}); !isStatus(err, 400) || !strings.Contains(err.Error(), "after") {
			t.Errorf("after %v: %v", after, err)
		}
	}
}

// TestHoldTimeLimitArray: a held job waits until released (a running one
// cannot be held); a job past its time limit is stopped and fails; an
// array task sees its index.
func TestHoldTimeLimitArray(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	held := submit(t, ts.admin, &api.JobSpec{GPUs: 1, Hold: true, Command: []string{"true"}})
	waitRounds(t, ts, 3)
	if j, _ := ts.admin.Job(ctx, held.ID); j.State != api.StatePending || !j.Held || !strings.Contains(j.Waiting, "held") {
		t.Fatalf("held job: %s held %v waiting %q", j.State, j.Held, j.Waiting)
	}
	if j, _ := ts.admin.Job(ctx, held.ID); !strings.Contains(j.Reason, "held") {
		t.Errorf("held job's reason after a round: %q", j.Reason)
	}
	// The answer to the release came before the next round: its reason
	// was the round's, "held: 'tide release ...' lets it start".
	if j, err := ts.admin.Release(ctx, held.ID); err != nil {
		t.Fatal(err)
	} else if j.Held || strings.Contains(j.Reason, "held") || j.Waiting != "" {
		t.Errorf("the released job: held %v, reason %q, waiting %q", j.Held, j.Reason, j.Waiting)
	}
	waitJob(t, ts.admin, held.ID, 20*time.Second, "finished once released", inState(api.StateFinished))
	if _, err := ts.admin.Release(ctx, held.ID); !isStatus(err, http.StatusConflict) {
		t.Errorf("releasing a finished job: %v", err)
	}

	slow := submit(t, ts.admin, &api.JobSpec{GPUs: 1, TimeLimitS: 0.5, Command: []string{"sleep", "30"}})
	waitJob(t, ts.admin, slow.ID, 10*time.Second, "running", inState(api.StateRunning))
	if _, err := ts.admin.Hold(ctx, slow.ID); !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "running") {
		t.Errorf("holding a running job: %v", err)
	}
	js := waitJob(t, ts.admin, slow.ID, 20*time.Second, "stopped", func(j *api.Job) bool {
		return api.Terminal(j.State) && j.Attempts[0].Ended != nil
	})
	if js.State != api.StateFailed || !strings.Contains(js.Reason, "time limit") || js.Attempts[0].Outcome != "timeout" {
		t.Errorf("job over its time limit: %s %q %+v", js.State, js.Reason, js.Attempts)
	}

	seven := 7
	arr := submit(t, ts.admin, &api.JobSpec{GPUs: 1, ArrayIndex: &seven, Command: []string{"sh", "-c", "echo index=$TIDE_ARRAY_INDEX"}})
	waitJob(t, ts.admin, arr.ID, 20*time.Second, "finished", inState(api.StateFinished))
	if out := logs(t, ts.admin, arr.ID); !strings.Contains(out, "index=7\n") {
		t.Errorf("array task output:\n%s", out)
	}
}

// TestListUsageRetention: GET /v1/jobs pages and refuses unknown states
// and parameters; GET /v1/usage counts GPU-hours; the retention rule
// removes an old job's files and keeps its record.
func TestListUsageRetention(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Retention = time.Millisecond
	ts := startServer(t, cfg)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, submit(t, ts.admin, &api.JobSpec{GPUs: 2, Command: []string{"sleep", "0.2"}}).ID)
	}
	page, err := ts.admin.ListJobs(ctx, url.Values{"limit": {"2"}})
	if err != nil || len(page.Jobs) != 2 || page.Jobs[0].ID != ids[0] || page.Next != ids[1] {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = ts.admin.ListJobs(ctx, url.Values{"limit": {"2"}, "after": {page.Next}})
	if err != nil || len(page.Jobs) != 2 || page.Jobs[0].ID != ids[2] || page.Next != ids[3] {
		t.Fatalf("second page: %+v %v", page, err)
	}
	page, err = ts.admin.ListJobs(ctx, url.Values{"limit": {"2"}, "after": {page.Next}})
	if err != nil || len(page.Jobs) != 1 || page.Next != "" {
		t.Fatalf("last page: %+v %v", page, err)
	}
	for q, field := range map[string]string{"state=runing": "state", "limit=0": "limit", "after=42": "after", "color=red": "color", "tenant=nobody": "tenant"} {
		code, e, _ := do(t, "GET", ts.url+"/v1/jobs?"+q, ts.token, "")
		if code != 400 || len(e.Fields) == 0 || e.Fields[0].Field != field {
			t.Errorf("GET /v1/jobs?%s: %d %+v", q, code, e)
		}
	}
	for _, id := range ids {
		waitJob(t, ts.admin, id, 20*time.Second, "finished", inState(api.StateFinished))
	}
	u, err := ts.admin.Usage(ctx, time.Time{}, time.Time{})
	if err != nil || len(u.Jobs) != 5 {
		t.Fatalf("usage: %+v %v", u, err)
	}
	for _, j := range u.Jobs {
		// Usage must be the GPUs x time of the job's recorded attempts.
		// A floor taken from the 0.2 s sleep fails under load: the server
		// records the start when it sees the process, which a busy machine
		// delays (0.026 s of a 0.2 s sleep was seen).
		job, err := ts.admin.Job(ctx, j.Job)
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for _, a := range job.Attempts {
			if a.Started != nil && a.Ended != nil {
				want += float64(len(a.GPUs)) * a.Ended.Sub(*a.Started).Hours()
			}
		}
		if j.GPUHours <= 0 || j.GPUHours > 2*30.0/3600 || math.Abs(j.GPUHours-want) > 1e-9+1e-6*want {
			t.Errorf("job %s: %g GPU-hours, its attempts held %g", j.Job, j.GPUHours, want)
		}
	}
	if code, e, _ := do(t, "GET", ts.url+"/v1/usage?from=yesterday", ts.token, ""); code != 400 || e.Fields[0].Field != "from" {
		t.Errorf("bad from: %d %+v", code, e)
	}
	ts.purgeOld()
	if _, err := os.Stat(ts.logFile(ids[0])); !os.IsNotExist(err) {
		t.Errorf("the log of a job past retention is still there: %v", err)
	}
	if !hasEvent(t, ts.admin, ids[0], "purged") {
		t.Errorf("no purged event")
	}
	if j, err := ts.admin.Job(ctx, ids[0]); err != nil || j.State != api.StateFinished {
		t.Errorf("the purged job's record: %+v %v", j, err)
	}
}

// TestCancelDuringLaunch: a job cancelled while its first attempt is being
// launched (the process starts, then is stopped) is not shown started
// after it ended: its "started" used to be set by that launch, after the
// cancellation, so that a cancelled job that had never started appeared
// to start after its end (TestRandomOperations, seed 19 with
// TIDE_RANDOM_OPS_STEPS=90).
func TestCancelDuringLaunch(t *testing.T) {
	launching, cancelled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	startProc = func(l *localexec.Launch) (*localexec.Proc, error) {
		once.Do(func() {
			close(launching)
			<-cancelled
		})
		return localexec.Start(l)
	}
	defer func() { startProc = localexec.Start }()
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	j := submit(t, ts.admin, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1})
	<-launching
	if _, err := ts.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	close(cancelled)
	got := waitJob(t, ts.admin, j.ID, 10*time.Second, "its attempt ended", func(j *api.Job) bool {
		return len(j.Attempts) == 1 && j.Attempts[0].Ended != nil
	})
	if got.State != api.StateCancelled || got.Started != nil || got.Attempts[0].PID == 0 || got.Attempts[0].Outcome != "cancelled" {
		t.Errorf("%s, started %v (ended %v), attempt %+v; want cancelled, never started, its attempt launched and cancelled",
			got.State, got.Started, got.Ended, got.Attempts[0])
	}
}
