package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestServeExactlyOnce reproduces issue 15's crash path: a job whose env
// sets a PATH without /bin finishes while tide serve is dead (SIGKILL).
// tide's wrapper must still record its exit code, and the restarted server
// must record the job finished, once, without running it again. The
// submission carries an idempotency key: repeating it, before and after
// the crash, returns the same job.
func TestServeExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, countjob := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serve(t, bin, dir)
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	args := []string{"submit", "--json", "--idempotency-key", "run-42", "--env", "PATH=/nonexistent", "--gpus", "1",
		"--", countjob, "-steps", "30", "-step-time", "40ms"}
	submitID := func() string {
		var j api.Job
		if err := json.Unmarshal([]byte(cli(t, s, admin, args...)), &j); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	id := submitID()
	if again := submitID(); again != id {
		t.Fatalf("a retried submission created job %s besides %s", again, id)
	}
	waitFor(t, "the job to run", 20*time.Second, func() bool {
		j := cliJob(t, s, admin, id)
		return len(j.Attempts) == 1 && j.Attempts[0].PID > 0
	})
	s.stop(t, syscall.SIGKILL)
	jobDir := filepath.Join(dir, "jobs", id)
	waitFor(t, "the job to finish while the server is down", 20*time.Second, func() bool {
		return readFile(filepath.Join(jobDir, "attempt-1.exit")) == "0\n"
	})
	if m, _ := filepath.Glob(filepath.Join(jobDir, "*.tmp")); len(m) > 0 {
		t.Errorf("files left behind: %v", m)
	}

	s = serve(t, bin, dir)
	j := cliJob(t, s, admin, id)
	waitFor(t, "the job to end", 20*time.Second, func() bool { j = cliJob(t, s, admin, id); return api.Terminal(j.State) })
	if j.State != api.StateFinished || len(j.Attempts) != 1 || j.Attempts[0].Outcome != "finished" || j.Restarts != 0 {
		t.Errorf("job %s: %s (%s), restarts %d, attempts %+v", id, j.State, j.Reason, j.Restarts, j.Attempts)
	}
	evs, err := api.NewClient(s.url, admin).Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, e := range evs {
		if e.Kind == "finished" {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("job finished %d times: %+v", finished, evs)
	}
	if log := cli(t, s, admin, "logs", id); strings.Count(log, "=== tide: job "+id+" attempt") != 1 {
		t.Errorf("the job ran more than once:\n%s", log)
	}
	if again := submitID(); again != id {
		t.Errorf("after the restart, the retried submission created job %s besides %s", again, id)
	}
	var list api.JobList
	if err := json.Unmarshal([]byte(cli(t, s, admin, "jobs", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 1 {
		t.Errorf("%d jobs, want 1", len(list.Jobs))
	}
	// The key is bound to its spec.
	other := append([]string(nil), args...)
	other[len(other)-1] = "50ms"
	full := append([]string{other[0], "--server", s.url, "--token", admin}, other[1:]...)
	if code, _, errs := tide(t, full...); code == 0 || !strings.Contains(errs, "another spec") {
		t.Errorf("same key, other spec: exit %d: %s", code, errs)
	}
	if code, _, errs := tide(t, "submit", "--server", s.url, "--token", admin, "--idempotency-key", "two words", "--", "true"); code != 2 || !strings.Contains(errs, "--idempotency-key") {
		t.Errorf("bad key: exit %d: %s", code, errs)
	}
}
