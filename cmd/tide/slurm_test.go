package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestServeSlurm: tide submit --array and --wait (exiting with the job's
// code), tide jobs --limit paging and its validated --state, tide usage as
// a table and CSV, tide hold/release, tide requeue.
func TestServeSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serve(t, bin, dir)
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	base := []string{"--server", s.url, "--token", admin}
	run := func(args ...string) (int, string, string) {
		return tide(t, append(append([]string{args[0]}, base...), args[1:]...)...)
	}
	if code, out, errs := run("submit", "--array", "0-2", "--name", "arr", "--wait", "--cmd", `echo task=$TIDE_ARRAY_INDEX`); code != 0 || !strings.Contains(out, "3 array tasks submitted") {
		t.Fatalf("array: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run("submit", "--wait", "--max-retries", "0", "--cmd", "exit 7"); code != 7 || !strings.Contains(errs, "failed") {
		t.Errorf("submit --wait of a job exiting 7: exit %d %s", code, errs)
	}
	code, out, errs := run("jobs", "--limit", "2")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errs, "--after j000002") {
		t.Errorf("jobs --limit 2: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := run("jobs", "--limit", "2", "--after", "j000002"); code != 0 || !strings.Contains(out, "j000003") || !strings.Contains(out, "j000004") {
		t.Errorf("second page:\n%s", out)
	}
	if code, _, errs := run("jobs", "--state", "runing"); code != 1 || !strings.Contains(errs, `unknown state "runing"`) {
		t.Errorf("jobs --state runing: exit %d %s", code, errs)
	}
	if code, out, _ := run("usage", "--csv", "--by", "job"); code != 0 || !strings.HasPrefix(out, "job,name,tenant,state,gpu_hours\n") || !strings.Contains(out, "arr[1]") {
		t.Errorf("usage --csv:\n%s", out)
	}
	if code, out, _ := run("usage"); code != 0 || !strings.Contains(out, "admin") || !strings.Contains(out, "GPU_HOURS") {
		t.Errorf("usage:\n%s", out)
	}
	code, out, _ = run("submit", "--hold", "--cmd", "true")
	id := strings.Fields(out)[0]
	if code != 0 || !strings.Contains(cli(t, s, admin, "jobs", "--state", "pending"), "(held)") {
		t.Errorf("held job not shown held")
	}
	if code, _, errs := run("requeue", id); code != 1 || !strings.Contains(errs, "already waiting") {
		t.Errorf("requeue of a waiting job: exit %d %s", code, errs)
	}
	if out := cli(t, s, admin, "release", id); !strings.Contains(out, id+" released") {
		t.Errorf("release: %s", out)
	}
	waitFor(t, "the released job to finish", 30*time.Second, func() bool { return cliJob(t, s, admin, id).State == api.StateFinished })
	if out := cli(t, s, admin, "requeue", id); !strings.Contains(out, id+" requeued (pending, run 2)") {
		t.Errorf("requeue: %s", out)
	}
	waitFor(t, "the requeued job to finish again", 30*time.Second, func() bool {
		j := cliJob(t, s, admin, id)
		return j.State == api.StateFinished && len(j.Attempts) == 2
	})
	if out := cli(t, s, admin, "job", id); !strings.Contains(out, "1 (run 2;") {
		t.Errorf("tide job of a requeued job:\n%s", out)
	}
}
