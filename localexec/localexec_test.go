package localexec

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/cluster"
)

func TestParseNvidiaSMI(t *testing.T) {
	out := "0, Tesla T4, 15360 MiB\n1, NVIDIA A100-SXM4-80GB, 81920 MiB\n2, NVIDIA H100 80GB HBM3, 81559\n3, NVIDIA GeForce RTX 3090, 24576 MiB\n"
	gpus, err := ParseNvidiaSMI([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{0, "Tesla T4", "t4", 15, false}, {1, "NVIDIA A100-SXM4-80GB", "a100-80", 80, false}, {2, "NVIDIA H100 80GB HBM3", "h100", 81559.0 / 1024, false}, {3, "NVIDIA GeForce RTX 3090", "rtx3090", 24, false}}
	if len(gpus) != len(want) {
		t.Fatalf("got %d GPUs", len(gpus))
	}
	for i := range want {
		if gpus[i] != want[i] {
			t.Errorf("GPU %d: %+v, want %+v", i, gpus[i], want[i])
		}
	}
	for _, bad := range []string{"x, T4, 1 MiB\n", "0, T4\n", "0, T4, lots\n"} {
		if _, err := ParseNvidiaSMI([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if g, err := ParseNvidiaSMI(nil); err != nil || len(g) != 0 {
		t.Errorf("empty output: %v %v", g, err)
	}
	if got := GPUType("NVIDIA A100-SXM4-40GB", 40960); got != "a100" {
		t.Errorf("A100 40GB: %s", got)
	}
}

func TestDiscover(t *testing.T) {
	gpus, err := Discover("fake:3:v100")
	if err != nil || len(gpus) != 3 || gpus[2].Index != 2 || gpus[0].Type != "v100" || gpus[0].MemGiB != 32 {
		t.Fatalf("fake: %+v %v", gpus, err)
	}
	if g, err := Discover("fake:2"); err != nil || g[1].Type != "t4" {
		t.Errorf("fake:2: %+v %v", g, err)
	}
	for _, bad := range []string{"fake:0", "fake:x:t4", "fake:2:", "fake:1:2:3", "gpu0"} {
		if _, err := Discover(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Real discovery, where this machine has GPUs (the fake nvidia-smi
	// below covers the rest).
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		if gpus, err := Discover(""); err == nil {
			t.Logf("discovered %+v", gpus)
		} else {
			t.Logf("nvidia-smi present but: %v", err)
		}
	}
}

// fakeNvidiaSMI puts an nvidia-smi on PATH (and nothing else of ours) that
// checks it is asked for index, name and memory as CSV and runs body.
func fakeNvidiaSMI(t *testing.T, body string) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		`[ "$1" = "--query-gpu=index,name,memory.total" ] && [ "$2" = "--format=csv,noheader,nounits" ] || { echo "unexpected arguments: $*" >&2; exit 64; }` +
		"\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
}

// TestDiscoverNvidiaSMI discovers GPUs through a fake nvidia-smi on PATH,
// as on a machine with NVIDIA GPUs, and says what is wrong when it fails.
func TestDiscoverNvidiaSMI(t *testing.T) {
	fakeNvidiaSMI(t, `printf '0, Tesla T4, 15360\n1, Tesla T4, 15360\n2, NVIDIA A100-SXM4-80GB, 81920\n'`)
	for _, spec := range []string{"", "nvidia", "auto"} {
		gpus, err := Discover(spec)
		if err != nil {
			t.Fatalf("Discover(%q): %v", spec, err)
		}
		want := []GPU{{0, "Tesla T4", "t4", 15, false}, {1, "Tesla T4", "t4", 15, false}, {2, "NVIDIA A100-SXM4-80GB", "a100-80", 80, false}}
		if fmt.Sprint(gpus) != fmt.Sprint(want) {
			t.Errorf("Discover(%q) = %+v, want %+v", spec, gpus, want)
		}
	}
	for _, c := range []struct{ name, body, want string }{
		{"no GPUs", "exit 0", "nvidia-smi lists none"},
		{"driver failure", `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" >&2; exit 9`, "couldn't communicate with the NVIDIA driver"},
		{"garbage", "echo 'zero, T4, 1'", `index "zero" is not an integer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fakeNvidiaSMI(t, c.body)
			_, err := Discover("")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
			if !errors.Is(err, ErrNoGPUs) {
				t.Errorf("error %v is not ErrNoGPUs", err)
			}
		})
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Discover(""); !errors.Is(err, ErrNoGPUs) || !strings.Contains(err.Error(), "--gpus fake:N:TYPE") {
		t.Errorf("without nvidia-smi: %v, want ErrNoGPUs suggesting --gpus fake", err)
	}
}

func TestCluster(t *testing.T) {
	gpus := []GPU{{0, "a", "t4", 16, false}, {1, "b", "v100", 32, false}, {2, "a", "t4", 16, false}}
	c, devs, err := Cluster(gpus)
	if err != nil {
		t.Fatal(err)
	}
	if c.TotalGPUs() != 3 || len(c.Nodes) != 2 || c.GPUsOfType("t4") != 2 {
		t.Fatalf("cluster %s", c)
	}
	if fmt.Sprint(devs) != "[0 2 1]" {
		t.Errorf("devices %v, want [0 2 1]", devs)
	}
	for g, d := range devs {
		if c.NodeOf(cluster.GPUID(g)).GPUType != gpus[d].Type {
			t.Errorf("cluster GPU %d is %s, device %d is %s", g, c.NodeOf(cluster.GPUID(g)).GPUType, d, gpus[d].Type)
		}
	}
	if _, _, err := Cluster([]GPU{{0, "a", "t4", 16, false}, {0, "a", "t4", 16, false}}); err == nil {
		t.Error("duplicate index accepted")
	}
}

func launch(t *testing.T, script string) (*Launch, string) {
	t.Helper()
	dir := t.TempDir()
	return &Launch{JobID: "j1", Attempt: 2, Command: []string{"sh", "-c", script}, Dir: dir,
		Env: map[string]string{"FOO": "bar baz"}, Devices: []int{1, 3},
		CheckpointDir: filepath.Join(dir, "ckpt"), LogFile: filepath.Join(dir, "out.log"),
		PIDFile: filepath.Join(dir, "a.pid"), ExitFile: filepath.Join(dir, "a.exit"),
		ReportURL: "http://127.0.0.1:1/v1/jobs/j1/report", ReportToken: "tok", Batch: Batch{Global: 256, LocalBsz: 64, AccumSteps: 1}}, dir
}

// TestStart runs a command in its own process group with the job's
// environment, output in the log and the exit code recorded.
func TestStart(t *testing.T) {
	t.Setenv("TIDE_TOKEN", "secret")
	t.Setenv("CUDA_VISIBLE_DEVICES", "7")
	l, dir := launch(t, `env | sort > "$TIDE_CHECKPOINT_DIR/env"; echo out; echo err >&2; ps -o pgid= -p $$ > pgid; exit 3`)
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	code, known := p.Exit()
	if code != 3 || !known {
		t.Fatalf("exit %d %v, want 3", code, known)
	}
	if c, ok := ExitCode(l.ExitFile); c != 3 || !ok {
		t.Errorf("exit file: %d %v", c, ok)
	}
	env, err := os.ReadFile(filepath.Join(l.CheckpointDir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=1,3", "TIDE_JOB_ID=j1", "TIDE_ATTEMPT=2", "TIDE_RESTARTS=1", "TIDE_GPUS=2",
		"TIDE_CHECKPOINT_DIR=" + l.CheckpointDir, "TIDE_REPORT_URL=" + l.ReportURL, "TIDE_REPORT_TOKEN=tok", "FOO=bar baz",
		"TIDE_BATCH_SIZE=256", "TIDE_LOCAL_BSZ=64", "TIDE_ACCUM_STEPS=1"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	for _, bad := range []string{"TIDE_TOKEN", "CUDA_VISIBLE_DEVICES=7", "TIDE_REPORT_FILE"} {
		if strings.Contains(string(env), bad) {
			t.Errorf("environment holds %s", bad)
		}
	}
	log, _ := os.ReadFile(l.LogFile)
	if !strings.Contains(string(log), "=== tide: job j1 attempt 2 on GPUs [1 3]") || !strings.Contains(string(log), "out\nerr\n") {
		t.Errorf("log:\n%s", log)
	}
	pgid, _ := os.ReadFile(filepath.Join(dir, "pgid"))
	if strings.TrimSpace(string(pgid)) != strconv.Itoa(p.PID()) {
		t.Errorf("the command ran in process group %s, want its own (%d)", pgid, p.PID())
	}
	if _, err := Start(&Launch{JobID: "x"}); err == nil {
		t.Error("empty command accepted")
	}
}

// TestStopGraceful: SIGTERM reaches the command, which checkpoints and exits.
func TestStopGraceful(t *testing.T) {
	if signal.Ignored(syscall.SIGTERM) {
		t.Fatal("the test process ignores SIGTERM (an earlier test's signal.Ignore): the command could not trap it")
	}
	l, dir := launch(t, `trap 'echo saved > saved; exit 143' TERM; echo $$ > ready; while :; do sleep 0.01; done`)
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	// A command that has not yet set its handler dies of the SIGTERM.
	waitPIDFile(t, filepath.Join(dir, "ready"))
	p.Stop(10 * time.Second)
	if code, known := p.Exit(); code != 143 || !known {
		t.Errorf("exit %d %v, want 143", code, known)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "saved")); err != nil || string(data) != "saved\n" {
		t.Errorf("checkpoint %q %v", data, err)
	}
}

// TestStopKills: a command that ignores SIGTERM is killed after the grace
// period, with everything it started.
func TestStopKills(t *testing.T) {
	l, dir := launch(t, `trap '' TERM; sleep 60 & echo $! > child; while :; do sleep 0.01; done`)
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	child := waitPIDFile(t, filepath.Join(dir, "child"))
	p.Stop(100 * time.Millisecond)
	if code, known := p.Exit(); code != 137 || !known {
		t.Errorf("exit %d %v, want 137 (SIGKILL)", code, known)
	}
	if Alive(child, 0) {
		t.Errorf("the command's child %d survived", child)
		syscall.Kill(child, syscall.SIGKILL)
	}
}

// TestStrayReaped: processes a command leaves behind are killed when it exits.
func TestStrayReaped(t *testing.T) {
	l, dir := launch(t, `sleep 60 & echo $! > child; exit 0`)
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Exit(); code != 0 {
		t.Errorf("exit %d", code)
	}
	if child := waitPIDFile(t, filepath.Join(dir, "child")); Alive(child, 0) {
		t.Errorf("stray %d survived", child)
		syscall.Kill(child, syscall.SIGKILL)
	}
}

// mainThreadExitsEnv, set to a path, makes the test binary a process
// whose main thread exits at once while another thread runs on until the
// path exists.
const mainThreadExitsEnv = "TIDE_LOCALEXEC_TEST_MAIN_THREAD_EXITS"

func init() {
	if os.Getenv(mainThreadExitsEnv) != "" {
		runtime.LockOSThread() // main runs on the main thread
	}
}

func mainThreadExits(gate string) {
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(gate); err == nil {
				break
			}
		}
		os.Exit(0)
	}()
	// exit(2), not exit_group(2): this thread alone ends.
	syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
}

// TestGroupAliveWhileThreadsRun: a process whose main thread has exited
// while its other threads run on shows in /proc as a zombie, yet keeps
// its files (a GPU's device, a lock) until its last thread is gone. Its
// group is alive until then: groupAlive took it for gone, so Done could
// close and the attempt's GPUs go to the next job while a process of the
// group, killed but its threads still exiting, held them.
func TestGroupAliveWhileThreadsRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc; a thread's own exit(2) is Linux's")
	}
	gate := filepath.Join(t.TempDir(), "go")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainThreadExitsEnv+"="+gate)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = signalGroup(pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, state, err := procStat(pid); err != nil || state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper's main thread did not exit")
		}
	}
	if _, state, err := procStat(pid); err != nil || state != 'Z' {
		t.Fatalf("helper %d: state %c, %v; want a zombie leader", pid, state, err)
	}
	if !groupAlive(pid) {
		t.Errorf("a group whose process has a thread running is taken for gone")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Every thread gone, not yet reaped: a zombie holds nothing.
	for deadline := time.Now().Add(10 * time.Second); groupAlive(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a group whose one process is a zombie with no thread left is taken for alive")
		}
	}
}

// TestAdopt attaches to a running attempt by pid and start time, as a
// restarted server does, and learns its exit code from the exit file.
func TestAdopt(t *testing.T) {
	l, dir := launch(t, `while [ ! -e go ]; do sleep 0.01; done; exit 5`)
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	if p.StartTicks() == 0 {
		t.Skip("no /proc: start times unknown")
	}
	if _, ok := Adopt(p.PID(), p.StartTicks()+1, l.ExitFile); ok {
		t.Error("adopted a process with the wrong start time")
	}
	waitPIDFile(t, l.PIDFile)
	q, ok := FindByPIDFile(l.PIDFile, l.ExitFile, "j1", 2)
	if !ok || q.PID() != p.PID() || q.StartTicks() != p.StartTicks() {
		t.Fatalf("FindByPIDFile: %v %v", q, ok)
	}
	if _, ok := FindByPIDFile(l.PIDFile, l.ExitFile, "j1", 3); ok {
		t.Error("found the process of another attempt")
	}
	a, ok := Adopt(p.PID(), p.StartTicks(), l.ExitFile)
	if !ok {
		t.Fatal("could not adopt a live process")
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, known := a.Exit(); code != 5 || !known {
		t.Errorf("adopted exit %d %v, want 5", code, known)
	}
	p.Exit()
	if _, ok := Adopt(p.PID(), p.StartTicks(), l.ExitFile); ok {
		t.Error("adopted a finished process")
	}
}

// TestFindByPIDFileWritten late: the wrapper writes its pid file only
// after it has started the command, so a server that stops just after a
// launch (the command already running) may leave the file empty for a
// moment. Its successor waits for it instead of giving the attempt up as
// never launched (and restarting a job whose process still ran: seen
// once under load in server's TestSharedGPUsRecovered).
func TestFindByPIDFileWrittenLate(t *testing.T) {
	dir := t.TempDir()
	pidFile, exitFile := filepath.Join(dir, "pid"), filepath.Join(dir, "exit")
	if err := os.WriteFile(pidFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "TIDE_JOB_ID=late", "TIDE_ATTEMPT=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = os.WriteFile(pidFile, []byte(fmt.Sprintf("%d %d\n", cmd.Process.Pid, cmd.Process.Pid)), 0o600)
	}()
	p, ok := FindByPIDFile(pidFile, exitFile, "late", 1)
	if !ok || p.PID() != cmd.Process.Pid {
		t.Fatalf("FindByPIDFile with the pid file written 300 ms late: %v %v, want pid %d", p, ok, cmd.Process.Pid)
	}
	// No pid file at all: the launch never got that far, no waiting.
	if _, ok := FindByPIDFile(filepath.Join(dir, "none"), exitFile, "late", 1); ok {
		t.Error("found a process without a pid file")
	}
}

func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
		if pid, err := strconv.Atoi(first); err == nil {
			return pid
		}
	}
	t.Fatalf("%s not written", path)
	return 0
}

// TestStopBeforeLaunch: Stop with no grace, called before the wrapper has
// written its pid file, still ends a command that ignores SIGTERM. Waiting
// for the launch used to drain the grace timer, so SIGKILL never came and
// Stop hung (seen under load, where launching is slow).
//
// Ignored signals stay ignored across fork and exec, and a shell cannot
// trap a signal ignored on entry: with SIGTERM ignored by the test process,
// the whole group ignores it from its first instruction, whenever the
// signal comes. That is done in a child test process (this test, rerun
// with termIgnoredEnv set): signal.Reset does not undo signal.Ignore
// (golang/go#46321), and every command a later test started here ignored
// SIGTERM (TestStopGraceful, run after this one by -count=2 or -shuffle,
// got exit 137 and no checkpoint after its 10 s grace).
func TestStopBeforeLaunch(t *testing.T) {
	if os.Getenv(termIgnoredEnv) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStopBeforeLaunch$", "-test.count=1", "-test.v", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), termIgnoredEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestStopBeforeLaunch") {
			t.Fatalf("child test process with SIGTERM ignored: %v\n%s", err, out)
		}
		return
	}
	signal.Ignore(syscall.SIGTERM)
	for i := 0; i < 5; i++ {
		l, _ := launch(t, `while :; do sleep 0.01; done`)
		p, err := Start(l)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan struct{})
		go func() {
			p.Stop(0)
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			p.Kill()
			t.Fatal("Stop(0) did not return: no SIGKILL followed the SIGTERM")
		}
	}
}

// termIgnoredEnv, set to 1, makes TestStopBeforeLaunch run its commands
// with SIGTERM ignored, in the test process it was set for.
const termIgnoredEnv = "TIDE_LOCALEXEC_TEST_TERM_IGNORED"

// TestMain fails the run when a test left SIGTERM ignored by the test
// process: the commands of every test after it could not catch it.
func TestMain(m *testing.M) {
	if gate := os.Getenv(mainThreadExitsEnv); gate != "" {
		mainThreadExits(gate)
	}
	code := m.Run()
	if code == 0 && signal.Ignored(syscall.SIGTERM) && os.Getenv(termIgnoredEnv) != "1" {
		fmt.Fprintln(os.Stderr, "FAIL: a test left SIGTERM ignored by the test process (signal.Reset does not undo signal.Ignore): "+
			"commands started after it inherit SIG_IGN and cannot trap SIGTERM")
		code = 1
	}
	os.Exit(code)
}

// TestHostileEnvironment: the wrapper records the pid and exit code
// whatever the job's environment says (a PATH without /bin used to leave
// tide's own mv not found, and the exit file unwritten), and the command
// cannot reach the descriptors the wrapper writes to.
func TestHostileEnvironment(t *testing.T) {
	for _, env := range []map[string]string{
		{"PATH": "/nonexistent"},
		{"PATH": "", "IFS": "x", "ENV": "/nonexistent", "BASH_ENV": "/nonexistent"},
	} {
		l, dir := launch(t, `echo fd3 >&3 || echo closed3 > fds; echo fd4 >&4 || echo closed4 >> fds; exit 7`)
		l.Command = []string{"/bin/sh", "-c", l.Command[2]}
		l.Env = env
		p, err := Start(l)
		if err != nil {
			t.Fatal(err)
		}
		if code, known := p.Exit(); code != 7 || !known {
			t.Errorf("env %v: exit %d %v, want 7", env, code, known)
		}
		if c, ok := ExitCode(l.ExitFile); c != 7 || !ok {
			log, _ := os.ReadFile(l.LogFile)
			t.Errorf("env %v: exit file says %d %v, want 7\n%s", env, c, ok, log)
		}
		if pid := waitPIDFile(t, l.PIDFile); pid != p.PID() {
			t.Errorf("env %v: pid file says %d, want %d", env, pid, p.PID())
		}
		if fds, _ := os.ReadFile(filepath.Join(dir, "fds")); string(fds) != "closed3\nclosed4\n" {
			t.Errorf("env %v: the command could write to the wrapper's descriptors: %q", env, fds)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) > 0 {
			t.Errorf("env %v: files left: %v", env, m)
		}
	}
}
