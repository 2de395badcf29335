package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" && os.Getenv("TIDE_TEST_BINDIR") == "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds tide and the example CPU job once per test run.
func binaries(t *testing.T) (tideBin, countjob string) {
	t.Helper()
	buildOnce.Do(func() {
		// A machine without Go (the GPU machine the real-GPU tests run
		// on) takes the binaries built elsewhere from TIDE_TEST_BINDIR.
		if d := os.Getenv("TIDE_TEST_BINDIR"); d != "" {
			binDir = d
			return
		}
		binDir, buildErr = os.MkdirTemp("", "tide-bin")
		if buildErr != nil {
			return
		}
		for pkg, out := range map[string]string{".": "tide", "../../examples/countjob": "countjob"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, out), pkg)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "tide"), filepath.Join(binDir, "countjob")
}

// served is a tide serve subprocess.
type served struct {
	cmd    *exec.Cmd
	url    string
	stderr *os.File
	done   chan struct{}
}

// serve starts tide serve on 4 fake GPUs on a free port and waits until it
// listens.
func serve(t *testing.T, bin, dir string, extra ...string) *served {
	t.Helper()
	return serveGPUs(t, bin, dir, append([]string{"--gpus", "fake:4:t4"}, extra...)...)
}

// serveGPUs is serve with no --gpus of its own.
func serveGPUs(t *testing.T, bin, dir string, extra ...string) *served {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--round", "200ms", "--grace", "2s", "--retry-backoff", "50ms", "--log-format", "json", "--single-user"}, extra...)
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(filepath.Join(dir, "..", "serve-"+filepath.Base(dir)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, stderr: logf, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				urls <- u
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t, syscall.SIGKILL) })
	select {
	case s.url = <-urls:
	case <-s.done:
		t.Fatalf("tide serve exited: %s", readFile(logf.Name()))
	case <-time.After(30 * time.Second):
		t.Fatal("tide serve did not start listening")
	}
	return s
}

func (s *served) stop(t *testing.T, sig syscall.Signal) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Errorf("tide serve did not exit after %s", sig)
	}
	s.stderr.Close()
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// cli runs a client command in-process against s with the given token.
func cli(t *testing.T, s *served, token string, args ...string) string {
	t.Helper()
	full := append([]string{args[0], "--server", s.url, "--token", token}, args[1:]...)
	code, out, errs := tide(t, full...)
	if code != 0 {
		t.Fatalf("tide %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func cliJob(t *testing.T, s *served, token, id string) *api.Job {
	t.Helper()
	var j api.Job
	if err := json.Unmarshal([]byte(cli(t, s, token, "job", "--json", id)), &j); err != nil {
		t.Fatal(err)
	}
	return &j
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestServeCrash is the acceptance test: tide serve runs as a real
// process with real jobs, is killed with SIGKILL while they run, and is
// started again. Every job must be accounted for: the one whose process
// survived is re-adopted (not restarted), the one that exited 0 while the
// server was down is finished without running again, the one killed from
// outside while the server was down restarts from its checkpoint, the one
// killed from outside while the server ran was retried, the queued one
// runs, and each finishes exactly once.
func TestServeCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, countjob := binaries(t)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	s := serve(t, bin, dir)
	tokBytes, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(tokBytes))
	out := cli(t, s, admin, "tenant", "add", "alice")
	alice := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])

	release, finish := filepath.Join(root, "release"), filepath.Join(root, "finish")
	submit := func(token string, args ...string) string {
		var j api.Job
		if err := json.Unmarshal([]byte(cli(t, s, token, append([]string{"submit", "--json"}, args...)...)), &j); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	// adopted: runs until the test releases it.
	adopted := submit(alice, "--name", "adopted", "--gpus", "1", "--cmd", "while [ ! -e "+release+" ]; do sleep 0.02; done; echo released")
	// doneDown: finishes while the server is down.
	doneDown := submit(admin, "--name", "done-while-down", "--gpus", "1", "--cmd", "while [ ! -e "+finish+" ]; do sleep 0.02; done; echo finished")
	downKill := submit(alice, "--name", "killed-while-down", "--gpus", "1", "--", countjob, "-steps", "80", "-step-time", "25ms", "-checkpoint-every", "2")
	upKill := submit(admin, "--name", "killed-while-up", "--gpus", "1", "--", countjob, "-steps", "40", "-step-time", "25ms", "-checkpoint-every", "2")
	queued := submit(alice, "--name", "queued", "--gpus", "4", "--", countjob, "-steps", "5", "-step-time", "10ms")
	ids := []string{adopted, doneDown, downKill, upKill, queued}

	progress := func(id string, p float64) func() bool {
		return func() bool { j := cliJob(t, s, admin, id); return j.State == api.StateRunning && j.Progress >= p }
	}
	waitFor(t, "the job to kill to run", 10*time.Second, progress(upKill, 0.15))
	j := cliJob(t, s, admin, upKill)
	if err := syscall.Kill(-j.Attempts[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed job's retry to run", 10*time.Second, func() bool {
		j := cliJob(t, s, admin, upKill)
		return len(j.Attempts) == 2 && j.Attempts[1].PID > 0 && j.Progress > 0.2
	})
	waitFor(t, "the other jobs to run", 10*time.Second, func() bool {
		return progress(downKill, 0.1)() && cliJob(t, s, admin, adopted).Attempts[0].PID > 0 && cliJob(t, s, admin, doneDown).Attempts[0].PID > 0
	})
	before := map[string]*api.Job{}
	for _, id := range ids {
		before[id] = cliJob(t, s, admin, id)
	}

	s.stop(t, syscall.SIGKILL)
	pid := before[downKill].Attempts[0].PID
	if !localexec.Alive(pid, 0) {
		t.Fatalf("job %s's process %d died with the server", downKill, pid)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{adopted, upKill, doneDown} {
		if p := before[id].Attempts[len(before[id].Attempts)-1].PID; !localexec.Alive(p, 0) {
			t.Fatalf("job %s's process %d died with the server", id, p)
		}
	}
	if err := os.WriteFile(finish, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to finish while the server is down", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "jobs", doneDown, "attempt-1.exit"))
		return err == nil
	})

	s = serve(t, bin, dir)
	client := api.NewClient(s.url, admin)
	waitFor(t, "re-adoption", 10*time.Second, func() bool {
		evs, err := client.Events(context.Background(), adopted)
		return err == nil && evs[len(evs)-1].Kind == "adopted"
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every job to end", 30*time.Second, func() bool {
		for _, id := range ids {
			if !api.Terminal(cliJob(t, s, admin, id).State) {
				return false
			}
		}
		return true
	})
	var list api.JobList
	if err := json.Unmarshal([]byte(cli(t, s, admin, "jobs", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != len(ids) {
		t.Fatalf("%d jobs after the crash, want %d", len(list.Jobs), len(ids))
	}
	got := map[string]*api.Job{}
	for _, id := range ids {
		got[id] = cliJob(t, s, admin, id)
		if got[id].State != api.StateFinished {
			t.Errorf("job %s (%s): %s %s", id, got[id].Name, got[id].State, got[id].Reason)
		}
		evs, err := client.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Kind == "finished" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("job %s finished %d times", id, n)
		}
	}
	if a := got[adopted]; len(a.Attempts) != 1 || a.Attempts[0].PID != before[adopted].Attempts[0].PID || a.Restarts != 0 {
		t.Errorf("the surviving job was not re-adopted: %+v", a.Attempts)
	}
	if !strings.Contains(cli(t, s, alice, "logs", adopted), "released") {
		t.Errorf("the adopted job's output is missing")
	}
	if d := got[doneDown]; len(d.Attempts) != 1 || d.Attempts[0].Outcome != "finished" || d.Restarts != 0 ||
		strings.Count(cli(t, s, admin, "logs", doneDown), "\nfinished\n") != 1 {
		t.Errorf("job that finished while the server was down: restarts %d attempts %+v", d.Restarts, d.Attempts)
	}
	if d := got[downKill]; len(d.Attempts) != 2 || d.Failures != 1 || d.Attempts[0].Outcome != "lost" {
		t.Errorf("job killed while the server was down: failures %d attempts %+v", d.Failures, d.Attempts)
	}
	if u := got[upKill]; len(u.Attempts) != 2 || u.Failures != 1 || u.Attempts[0].Outcome != "failed" || u.Attempts[1].Outcome != "finished" {
		t.Errorf("job killed while the server ran: failures %d attempts %+v", u.Failures, u.Attempts)
	}
	for _, id := range []string{downKill, upKill} {
		logs := cli(t, s, admin, "logs", id)
		if line := lineWith(logs, "(attempt 2, restarts 1"); line == "" || strings.Contains(line, "at step 0 of") {
			t.Errorf("job %s did not resume from its checkpoint:\n%s\n%s", id, logs, readFile(filepath.Join(dir, "jobs", id, "output.log")))
		}
	}
	// Alice sees her three jobs, not the admin's.
	var mine api.JobList
	if err := json.Unmarshal([]byte(cli(t, s, alice, "jobs", "--json")), &mine); err != nil {
		t.Fatal(err)
	}
	if len(mine.Jobs) != 3 {
		t.Errorf("alice sees %d jobs, want 3", len(mine.Jobs))
	}
	for _, j := range mine.Jobs {
		if j.Tenant != "alice" {
			t.Errorf("alice sees job %s of %s", j.ID, j.Tenant)
		}
	}
	if table := cli(t, s, admin, "jobs"); !strings.Contains(table, "killed-while-down") || !strings.Contains(table, "finished") {
		t.Errorf("jobs table:\n%s", table)
	}
	if !strings.Contains(cli(t, s, admin, "cluster"), "0 of 4 GPUs allocated") {
		t.Errorf("cluster after the run:\n%s", cli(t, s, admin, "cluster"))
	}
	s.stop(t, syscall.SIGTERM)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tide serve exited %d after SIGTERM: %s", code, readFile(s.stderr.Name()))
	}
	// Structured logs: one JSON object a line, saying what happened to
	// which job.
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(s.stderr.Name())), "\n") {
		var rec struct{ Level, Msg, Job string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" || rec.Msg == "" {
			t.Fatalf("log line %q is not a JSON record with level and msg (%v)", line, err)
		}
		seen[rec.Msg+" "+rec.Job] = true
	}
	for _, want := range []string{"job submitted " + queued, "job launched " + upKill, "job attempt failed " + upKill,
		"job re-adopted " + adopted, "job finished " + doneDown, "tide serve started ", "shutting down "} {
		if !seen[want] {
			t.Errorf("the logs lack %q", want)
		}
	}
}

// TestClientErrors: the client commands say what is wrong.
func TestClientErrors(t *testing.T) {
	t.Setenv("TIDE_TOKEN", "")
	t.Setenv("TIDE_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	if code, _, errs := tide(t, "jobs"); code == 0 || !strings.Contains(errs, "config") {
		t.Errorf("missing explicit config: exit %d %s", code, errs)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("server: 127.0.0.1:1\n"), 0o644)
	t.Setenv("TIDE_CONFIG", cfg)
	if code, _, errs := tide(t, "jobs"); code != 2 || !strings.Contains(errs, "no API token") {
		t.Errorf("no token: exit %d %s", code, errs)
	}
	os.WriteFile(cfg, []byte("server: 127.0.0.1:1\ntoken: x\n"), 0o644)
	if code, _, errs := tide(t, "jobs"); code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("unreachable server: exit %d %s", code, errs)
	}
	os.WriteFile(cfg, []byte("server: 127.0.0.1:1\ntokn: x\n"), 0o644)
	if code, _, errs := tide(t, "jobs"); code == 0 || !strings.Contains(errs, "tokn") {
		t.Errorf("bad config key: exit %d %s", code, errs)
	}
	if code, _, errs := tide(t, "submit", "--token", "x", "--gpus", "1"); code != 2 || !strings.Contains(errs, "no command") {
		t.Errorf("submit without a command: exit %d %s", code, errs)
	}
	job := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(job, []byte("command: [echo, hi]\ngpus: 1\ncolour: red\n"), 0o644)
	if code, _, errs := tide(t, "submit", "--token", "x", job); code != 1 || !strings.Contains(errs, "colour") {
		t.Errorf("job file with an unknown field: exit %d %s", code, errs)
	}
	if code, _, errs := tide(t, "serve", "--gpus", "tpu:4"); code != 2 || !strings.Contains(errs, "fake:N") {
		t.Errorf("serve --gpus tpu:4: exit %d %s", code, errs)
	}
}

// TestSubmitFile: a YAML job file reaches the server with the flags'
// overrides, the working directory defaulted to the current one.
func TestSubmitFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serve(t, bin, dir, "--admin-token-file", writeToken(t, "tide_test_admin_token_0123456789"))
	job := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(job, []byte("name: from-yaml\ncommand: [sh, -c, 'echo $GREETING from $TIDE_JOB_ID']\ngpus: 1\nenv:\n  GREETING: hello\nmax_retries: 0\n"), 0o644)
	out := cli(t, s, "tide_test_admin_token_0123456789", "submit", "--json", "--name", "overridden", job)
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if j.Name != "overridden" || j.Spec.Workdir != wd || *j.Spec.MaxRetries != 0 || j.Spec.Env["GREETING"] != "hello" {
		t.Errorf("submitted %+v", j.Spec)
	}
	waitFor(t, "the job to finish", 10*time.Second, func() bool { return cliJob(t, s, "tide_test_admin_token_0123456789", j.ID).State == api.StateFinished })
	if logs := cli(t, s, "tide_test_admin_token_0123456789", "logs", "-f", j.ID); !strings.Contains(logs, "hello from "+j.ID) {
		t.Errorf("logs:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.token")); err == nil {
		t.Error("an admin token was generated although one was given")
	}
	// The server and token from the environment, then from a config file.
	t.Setenv("TIDE_SERVER", s.url)
	t.Setenv("TIDE_TOKEN", "tide_test_admin_token_0123456789")
	if code, out, errs := tide(t, "jobs"); code != 0 || !strings.Contains(out, j.ID) {
		t.Errorf("tide jobs with TIDE_SERVER and TIDE_TOKEN: exit %d\n%s%s", code, out, errs)
	}
	t.Setenv("TIDE_SERVER", "")
	t.Setenv("TIDE_TOKEN", "")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("server: "+s.url+"\ntoken_file: "+writeToken(t, "tide_test_admin_token_0123456789")+"\n"), 0o644)
	t.Setenv("TIDE_CONFIG", cfg)
	if code, out, errs := tide(t, "job", j.ID); code != 0 || !strings.Contains(out, "finished") || !strings.Contains(out, "Attempts:") {
		t.Errorf("tide job with a config file: exit %d\n%s%s", code, out, errs)
	}
}

// TestSubmitDeadline: a deadline given as a duration, in a job file or
// with --deadline, reaches the server as the time that far from the
// submission, and `tide job` shows it with where the job stands.
func TestSubmitDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	const tok = "tide_test_admin_token_0123456789"
	s := serve(t, bin, filepath.Join(t.TempDir(), "data"), "--admin-token-file", writeToken(t, tok), "--policy", "edf")
	job := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(job, []byte("command: [sh, -c, 'exit 0']\ngpus: 1\nestimate_s: 60\ndeadline: 90m\n"), 0o644)
	for _, c := range []struct {
		args []string
		in   time.Duration
	}{
		{[]string{job}, 90 * time.Minute},
		{[]string{"--deadline", "+2h", job}, 2 * time.Hour},
	} {
		before := time.Now().Truncate(time.Second)
		var j api.Job
		if err := json.Unmarshal([]byte(cli(t, s, tok, append([]string{"submit", "--json"}, c.args...)...)), &j); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		d, err := time.Parse(time.RFC3339, j.Spec.Deadline)
		if err != nil || d.Before(before.Add(c.in)) || d.After(after.Add(c.in)) {
			t.Errorf("%v: deadline %q %v, want %v from the submission (%s to %s)", c.args, j.Spec.Deadline, err, c.in,
				before.Add(c.in).Format(time.RFC3339), after.Add(c.in).Format(time.RFC3339))
		}
		waitFor(t, "the job to finish", 10*time.Second, func() bool { return cliJob(t, s, tok, j.ID).State == api.StateFinished })
		if out := cli(t, s, tok, "job", j.ID); !regexp.MustCompile(`(?m)^Deadline: +` + regexp.QuoteMeta(stamp(&d)+" (met)") + `$`).MatchString(out) {
			t.Errorf("tide job %s does not show the deadline met:\n%s", j.ID, out)
		}
	}
	for _, bad := range []string{"tomorrow", "-10m"} {
		code, _, errs := tide(t, "submit", "--server", s.url, "--token", tok, "--deadline", bad, "--", "true")
		if code != 2 || !strings.Contains(errs, "deadline") || !strings.Contains(errs, "RFC 3339") {
			t.Errorf("--deadline %s: exit %d, %s", bad, code, errs)
		}
	}
}

// TestServeDiscoversGPUs: without --gpus, tide serve asks nvidia-smi (a
// fake one on PATH here) and schedules the GPUs it lists; without
// nvidia-smi it says so and how to run without GPUs.
func TestServeDiscoversGPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	fake := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = --query-gpu=index,name,memory.total ] || exit 64\n" +
		"printf '0, Tesla T4, 15360\\n1, NVIDIA A100-SXM4-80GB, 81920\\n2, Tesla T4, 15360\\n'\n"
	if err := os.WriteFile(filepath.Join(fake, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fake+":/usr/bin:/bin")
	const tok = "tide_test_admin_token_0123456789"
	s := serveGPUs(t, bin, filepath.Join(t.TempDir(), "data"), "--admin-token-file", writeToken(t, tok))
	out := cli(t, s, tok, "cluster")
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"0 of 3 GPUs allocated", "0 t4 Tesla T4 15 GiB - 1 a100-80 NVIDIA A100-SXM4-80GB 80 GiB - 2 t4 Tesla T4 15 GiB -"} {
		if !strings.Contains(flat, want) {
			t.Errorf("tide cluster lacks %q:\n%s", want, out)
		}
	}
	// A job asking for the A100 runs on device 1 alone.
	id := strings.Fields(cli(t, s, tok, "submit", "--gpu-type", "a100-80", "--cmd", "echo devices=$CUDA_VISIBLE_DEVICES"))[0]
	waitFor(t, "the job to finish", 10*time.Second, func() bool { return cliJob(t, s, tok, id).State == api.StateFinished })
	if logs := cli(t, s, tok, "logs", id); !strings.Contains(logs, "devices=1\n") {
		t.Errorf("the A100 job's log:\n%s", logs)
	}

	t.Setenv("PATH", t.TempDir()+":/usr/bin:/bin")
	code, stdout, stderr := runBin(t, bin, "serve", "--data-dir", filepath.Join(t.TempDir(), "d"), "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "no NVIDIA GPUs found: nvidia-smi is not in PATH (use --gpus fake:N:TYPE") {
		t.Errorf("tide serve without GPUs: exit %d\n%s%s", code, stdout, stderr)
	}
}

// runBin runs a binary to its end.
func runBin(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// lineWith returns the first line of s containing sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func writeToken(t *testing.T, tok string) string {
	p := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
