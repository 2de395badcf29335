package server

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestNoRetry: a job that exits with api.ExitNoRetry, or that a Python
// import error ends, fails after its first attempt whatever its retry
// limit; an ordinary failure, even one printing an import error before
// more output, is retried.
func TestNoRetry(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	three := 3
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	cases := []struct {
		name     string
		cmd      []string
		attempts int
		reason   string
	}{
		{"exit 78", sh("echo configuring; exit " + strconv.Itoa(api.ExitNoRetry)), 1, "EX_CONFIG"},
		{"module not found", sh("echo 'Traceback (most recent call last):'; echo \"ModuleNotFoundError: No module named 'torch'\" >&2; exit 1"), 1, "No module named 'torch'"},
		{"import error", sh("echo 'ImportError: cannot import name x' >&2; exit 1"), 1, "Python import error"},
		{"ordinary failure", sh("echo oops; exit 1"), 4, "retry limit 3"},
		{"import error, then more", sh("echo 'ImportError: optional' >&2; echo fallback failed; exit 2"), 4, "retry limit 3"},
		{"import error, exit 0", sh("echo 'ImportError: optional' >&2"), 1, ""},
	}
	if py, err := exec.LookPath("python3"); err == nil {
		cases = append(cases, struct {
			name     string
			cmd      []string
			attempts int
			reason   string
		}{"python3", []string{py, "-c", "import tide_no_such_module"}, 1, "No module named 'tide_no_such_module'"})
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = submit(t, ts.admin, &api.JobSpec{Name: c.name, GPUs: 1, MaxRetries: &three, Command: c.cmd}).ID
	}
	for i, c := range cases {
		j := waitJob(t, ts.admin, ids[i], 60*time.Second, "over", func(j *api.Job) bool {
			return api.Terminal(j.State) && j.Attempts[len(j.Attempts)-1].Ended != nil
		})
		want := api.StateFailed
		if c.reason == "" {
			want = api.StateFinished
		}
		if j.State != want || len(j.Attempts) != c.attempts || !strings.Contains(j.Reason, c.reason) {
			t.Errorf("%s: %s after %d attempts (want %s after %d), reason %q (want %q)", c.name, j.State, len(j.Attempts), want, c.attempts, j.Reason, c.reason)
		}
	}
}
