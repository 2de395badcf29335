package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
)

// countjob is the example CPU job, built once by TestMain.
var countjob string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tide-server-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	countjob = filepath.Join(dir, "countjob")
	if d := os.Getenv("TIDE_TEST_BINDIR"); d != "" {
		// A machine without Go (a GPU machine running the test binary
		// built elsewhere) takes countjob from there, as cmd/tide's tests
		// take their binaries.
		countjob = filepath.Join(d, "countjob")
	} else if out, err := exec.Command("go", "build", "-o", countjob, "../examples/countjob").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building examples/countjob: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testServer is a server on a loopback port with an admin client.
type testServer struct {
	*Server
	dir   string
	url   string
	admin *api.Client
	token string
}

func testConfig(t testing.TB, dir string) Config {
	gpus, err := localexec.Discover("fake:4:t4")
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{DataDir: dir, GPUs: gpus, Policy: "fifo", Round: 200 * time.Millisecond, Grace: 2 * time.Second,
		MaxRetries: 2, RetryBackoff: 50 * time.Millisecond, StopJobsOnExit: true, SingleUser: true, Logger: logger}
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Start(ln)
	ts := &testServer{Server: s, dir: cfg.DataDir, url: "http://" + ln.Addr().String()}
	tok, err := os.ReadFile(filepath.Join(cfg.DataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	ts.token = strings.TrimSpace(string(tok))
	ts.admin = api.NewClient(ts.url, ts.token)
	t.Cleanup(func() { ts.close(t) })
	return ts
}

func (ts *testServer) close(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts.Close(ctx); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Errorf("close: %v", err)
	}
}

// countSpec is a countjob run.
func countSpec(gpus, steps int, stepTime time.Duration, extra ...string) *api.JobSpec {
	cmd := append([]string{countjob, "-steps", fmt.Sprint(steps), "-step-time", stepTime.String()}, extra...)
	return &api.JobSpec{Name: "count", Command: cmd, GPUs: gpus, EstimateS: float64(steps) * stepTime.Seconds()}
}

// waitJob polls a job until cond holds, failing after timeout.
func waitJob(t testing.TB, c *api.Client, id string, timeout time.Duration, what string, cond func(*api.Job) bool) *api.Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := c.Job(context.Background(), id)
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s after %s: state %s, progress %.2f, attempts %+v, reason %q", id, what, timeout, j.State, j.Progress, j.Attempts, j.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRounds waits until ts has run n more scheduling rounds, each begun
// after the call, with every job submitted before it in the engine: what a
// test waits for before checking that something did not happen. Sleeping
// for n rounds' time instead counted on the load: on a loaded machine no
// round may have run yet.
func waitRounds(t testing.TB, ts *testServer, n int) {
	t.Helper()
	rounds := func() int {
		ts.lock() // brings the jobs submitted so far into the engine
		defer ts.mu.Unlock()
		return ts.eng.Rounds()
	}
	from := rounds()
	for deadline := time.Now().Add(time.Minute); rounds() < from+n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds of %d after a minute", rounds()-from, n)
		}
	}
}

// waitFinished waits until job id ends and fails the test, with the job's
// log, unless it finished.
func waitFinished(t testing.TB, c *api.Client, id string, timeout time.Duration) *api.Job {
	t.Helper()
	j := waitJob(t, c, id, timeout, "ended", func(j *api.Job) bool { return api.Terminal(j.State) })
	if j.State != api.StateFinished {
		t.Fatalf("job %s: %s (%s):\n%s", id, j.State, j.Reason, logs(t, c, id))
	}
	return j
}

func inState(states ...string) func(*api.Job) bool {
	return func(j *api.Job) bool {
		for _, s := range states {
			if j.State == s {
				return true
			}
		}
		return false
	}
}

func submit(t testing.TB, c *api.Client, spec *api.JobSpec) *api.Job {
	t.Helper()
	j, err := c.Submit(context.Background(), spec)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j
}

func logs(t testing.TB, c *api.Client, id string) string {
	t.Helper()
	data, _, _, err := c.Logs(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func scrape(t testing.TB, ts *testServer) string {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

func alive(pid int) bool { return localexec.Alive(pid, 0) }

func isStatus(err error, code int) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Status == code
}
