// Package localexec runs tide jobs as processes on this machine: each
// attempt of a job is its command in its own process group, with
// CUDA_VISIBLE_DEVICES set to its GPUs, TIDE_* variables, and its output
// appended to a per-job log file. Stopping a job (preemption, resize,
// cancellation) sends SIGTERM to the group, waits a grace period, then
// sends SIGKILL.
//
// Every command runs under a small POSIX sh wrapper that writes the
// wrapper's pid to a file first and the command's exit code to a file
// last. The wrapper outlives the tide server if the server dies, so a
// restarted server can re-adopt the process (by pid and start time) and
// still learn its exit code. The package knows nothing of scheduling: the
// server decides what runs where.
package localexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// wrapper runs the command ("$@") in the background, waits for it, and
// records its exit code.
//
// It uses shell builtins only, and writes to file descriptors tide opened
// for it (3: the exit file, 4: the pid file) rather than to paths: it works
// whatever PATH or other variables the job's environment sets (a PATH
// without /bin once left tide's own "mv" not found), and in a directory
// the job cannot write to. The command gets neither descriptor. Each file
// gets one short write ending in a newline; readers take a file without
// its newline as not written.
//
// The wrapper leads the process group and must outlive the SIGTERM tide
// (or anyone else) sends to the group until the command has ended. Until
// the command is started it catches SIGTERM, SIGINT and SIGHUP; then it
// ignores them. Ignoring them, not catching them, keeps the exit code
// right: a caught signal cuts a shell's wait short (128+15), and when the
// command exited just then (it traps SIGTERM, saves and exits 0) the shell
// had reaped it and lost its status (bash, busybox sh; dash rarely), so 143
// was recorded instead of 0. An ignored signal does not end the wait, which
// returns the command's own code, or 128+N when signal N killed it.
// Ignoring them before the command is started would not do: the command
// would inherit them ignored.
//
// The command is started by a background subshell, in which the caught
// signals are back to their defaults, as they are in the command. The
// subshell writes the pid file (the wrapper's pid: $$ is the same in a
// subshell) and then execs the command, so a SIGTERM sent once the pid
// file is written (Stop waits for it) ends the subshell before the command
// starts or reaches the command. The wrapper used to write it just after
// the fork, and Stop's SIGTERM could find the child still holding the
// handler it inherited from the wrapper's trap: dash and busybox sh lost
// the signal there, and the command ran on until the grace period was
// over. A SIGTERM that reached the wrapper before the fork ends the
// subshell (143) without starting the command; one that came between the
// fork and the ignoring is passed on to the child. One sent by someone
// else to the group in the first moments of the launch can still miss the
// command under dash or busybox sh (it reaches the child before the child
// has reset that handler, after the wrapper has begun to ignore it): about
// one launch in ten when signalled within the first millisecond, as before
// this wrapper.
const wrapper = `term=
trap 'term=1' TERM INT HUP
{
	[ -n "$term" ] && exit 143
	echo "$$" >&4
	exec "$@" 3>&- 4>&-
} &
child=$!
trap '' TERM INT HUP
[ -n "$term" ] && kill -TERM "$child" 2>/dev/null
exec 4>&-
wait "$child"
code=$?
echo "$code" >&3
exit "$code"
`

// Launch is one attempt to run a job.
type Launch struct {
	JobID   string
	Attempt int // 1 for the first launch
	Command []string
	Dir     string            // working directory
	Env     map[string]string // the job's own variables
	Devices []int             // CUDA indices
	// CheckpointDir, LogFile, PIDFile and ExitFile are absolute paths;
	// the checkpoint directory is created if needed.
	CheckpointDir, LogFile, PIDFile, ExitFile string
	// ReportURL, ReportToken and ReportFile tell the job where to report
	// progress (TIDE_REPORT_*); empty ones are left out.
	ReportURL, ReportToken, ReportFile string
	// User, when set, is the Unix user the job runs as (tide serve runs as
	// root): its environment then starts from a minimal one (PATH, locale,
	// TZ, HOME, USER, LOGNAME) instead of the server's. The directories
	// it must write to (checkpoint, working directory, report file) are
	// the caller's to prepare.
	User *User
	// Batch is the batch configuration the job is to use
	// (TIDE_BATCH_SIZE, TIDE_LOCAL_BSZ, TIDE_ACCUM_STEPS); left out when
	// its global batch is 0.
	Batch Batch
	// Share and GPUMemGiB, for a job holding part of each GPU (mps.go),
	// are its part of each GPU's compute, in (0, 1], and its GPU memory
	// on each, GiB; 0 for whole GPUs. MPSPipeDir is the pipe directory of
	// the MPS daemon serving its GPU (MPS.Acquire), "" without one.
	Share, GPUMemGiB float64
	MPSPipeDir       string
}

// Batch is a data-parallel batch configuration: LocalBsz samples per GPU
// in each forward/backward pass, AccumSteps extra passes accumulated
// before each optimizer step, Global = GPUs x LocalBsz x (AccumSteps+1).
type Batch struct {
	Global, LocalBsz, AccumSteps int
}

// Environ is the environment the job's command gets: the server's own
// without TIDE_*, CUDA_MPS_* and CUDA_VISIBLE_DEVICES (with a User, only its PATH,
// locale and TZ, and the user's HOME, USER and LOGNAME), then the job's
// Env, then tide's variables.
func (l *Launch) Environ() []string {
	var env []string
	base := os.Environ()
	if u := l.User; u != nil {
		base = nil
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if k == "PATH" || k == "LANG" || k == "TZ" || strings.HasPrefix(k, "LC_") {
				base = append(base, kv)
			}
		}
		if u.Home != "" {
			base = append(base, "HOME="+u.Home)
		}
		if u.Name != "" {
			base = append(base, "USER="+u.Name, "LOGNAME="+u.Name)
		}
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TIDE_") || k == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(k, "CUDA_MPS_") {
			continue
		}
		if _, own := l.Env[k]; own {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+l.Env[k])
	}
	devs := make([]string, len(l.Devices))
	for i, d := range l.Devices {
		devs[i] = strconv.Itoa(d)
	}
	env = append(env,
		"CUDA_VISIBLE_DEVICES="+strings.Join(devs, ","),
		"TIDE_JOB_ID="+l.JobID,
		"TIDE_ATTEMPT="+strconv.Itoa(l.Attempt),
		"TIDE_RESTARTS="+strconv.Itoa(max(0, l.Attempt-1)),
		"TIDE_GPUS="+strconv.Itoa(len(l.Devices)),
		"TIDE_CHECKPOINT_DIR="+l.CheckpointDir,
	)
	env = append(env, l.shareEnv()...)
	if b := l.Batch; b.Global > 0 {
		env = append(env, "TIDE_BATCH_SIZE="+strconv.Itoa(b.Global), "TIDE_LOCAL_BSZ="+strconv.Itoa(b.LocalBsz),
			"TIDE_ACCUM_STEPS="+strconv.Itoa(b.AccumSteps))
	}
	for _, v := range [][2]string{{"TIDE_REPORT_URL", l.ReportURL}, {"TIDE_REPORT_TOKEN", l.ReportToken}, {"TIDE_REPORT_FILE", l.ReportFile}} {
		if v[1] != "" {
			env = append(env, v[0]+"="+v[1])
		}
	}
	return env
}

// Proc is a running (or finished) attempt: the wrapper process, leader of
// the attempt's process group.
type Proc struct {
	pid      int
	ticks    uint64
	pidFile  string
	exitFile string
	child    bool // started here (else adopted)
	done     chan struct{}
	code     int
	known    bool // code is known
	termOnce sync.Once
}

// PID is the process group leader's pid (the group id too).
func (p *Proc) PID() int { return p.pid }

// StartTicks is the leader's start time in clock ticks since boot
// (/proc/PID/stat), 0 where unknown.
func (p *Proc) StartTicks() uint64 { return p.ticks }

// Done is closed when the attempt is over: its leader has exited and the
// rest of its group has been killed.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit returns the command's exit code (128+N when killed by signal N) once
// Done is closed; known is false when the process vanished without one
// (killed with the wrapper, or adopted and gone without an exit file).
func (p *Proc) Exit() (code int, known bool) {
	<-p.done
	return p.code, p.known
}

// Start launches l. The returned Proc's Done channel closes when it ends.
func Start(l *Launch) (*Proc, error) {
	if len(l.Command) == 0 {
		return nil, fmt.Errorf("job %s: empty command", l.JobID)
	}
	for _, d := range []string{l.CheckpointDir, filepath.Dir(l.LogFile), filepath.Dir(l.ExitFile), filepath.Dir(l.PIDFile)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("job %s: %w", l.JobID, err)
		}
	}
	// The wrapper writes to descriptors opened here: fresh, empty files
	// only the server may open by path.
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, path := range []string{l.ExitFile, l.PIDFile} {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", l.JobID, err)
		}
		files = append(files, f)
	}
	log, err := os.OpenFile(l.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("job %s: log file: %w", l.JobID, err)
	}
	defer log.Close()
	fmt.Fprintf(log, "=== tide: job %s attempt %d on GPUs [%s] at %s: %s\n", l.JobID, l.Attempt,
		strings.Trim(fmt.Sprint(l.Devices), "[]"), time.Now().UTC().Format(time.RFC3339), quoteArgs(l.Command))
	args := append([]string{"-c", wrapper, "tide-job"}, l.Command...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = l.Dir
	cmd.Env = l.Environ()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = files // fds 3 (exit) and 4 (pid)
	if err := ownGroup(cmd, l.User); err != nil {
		return nil, fmt.Errorf("job %s: %w", l.JobID, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("job %s: starting %s: %w", l.JobID, l.Command[0], err)
	}
	p := &Proc{pid: cmd.Process.Pid, pidFile: l.PIDFile, exitFile: l.ExitFile, child: true, done: make(chan struct{})}
	p.ticks, _, _ = procStat(p.pid)
	go func() {
		err := cmd.Wait()
		p.code, p.known = exitCode(cmd.ProcessState, err)
		if c, ok := readExitFile(p.exitFile); ok {
			p.code, p.known = c, true
		}
		p.reapGroup()
		close(p.done)
	}()
	return p, nil
}

func exitCode(ps *os.ProcessState, err error) (int, bool) {
	if ps == nil {
		return -1, false
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	return ps.ExitCode(), err == nil || ps.ExitCode() >= 0
}

// Adopt attaches to an attempt started by an earlier server: pid must be
// alive and, when ticks is not 0 and /proc is readable, have started at
// ticks. ok is false when the process is gone (or the pid now belongs to
// another process): ExitCode then tells how it ended.
func Adopt(pid int, ticks uint64, exitFile string) (p *Proc, ok bool) {
	if !Alive(pid, ticks) {
		return nil, false
	}
	p = &Proc{pid: pid, ticks: ticks, exitFile: exitFile, done: make(chan struct{})}
	go func() {
		for Alive(pid, ticks) {
			time.Sleep(100 * time.Millisecond)
		}
		p.code, p.known = readExitFile(exitFile)
		p.reapGroup()
		close(p.done)
	}()
	return p, true
}

// FindByPIDFile adopts the wrapper whose pid an attempt's wrapper wrote to
// pidFile, for attempts whose pid the server never recorded (it died just
// after the launch). The process must carry TIDE_JOB_ID=jobID and
// TIDE_ATTEMPT=attempt in its environment.
//
// Start creates pidFile empty, and the wrapper writes its pid there just
// before the command starts (earlier wrappers wrote "PID COMMAND-PID": the
// first field is read), when the wrapper has run (and may have been seen
// running) for a while: a pidFile that exists but is still empty is waited
// for, up to pidFileWait, before the attempt is given up as never
// launched. Without the wait, a server that stopped just after a launch
// left its successor to restart a job whose first attempt still ran.
func FindByPIDFile(pidFile, exitFile, jobID string, attempt int) (*Proc, bool) {
	line, ok := readLine(pidFile)
	for deadline := time.Now().Add(pidFileWait); !ok && time.Now().Before(deadline); {
		if _, err := os.Stat(pidFile); err != nil {
			return nil, false // never created: the launch did not get that far
		}
		time.Sleep(10 * time.Millisecond)
		line, ok = readLine(pidFile)
	}
	if !ok {
		return nil, false
	}
	first, _, _ := strings.Cut(line, " ")
	pid, err := strconv.Atoi(first)
	if err != nil || pid <= 1 {
		return nil, false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, false
	}
	want := map[string]bool{"TIDE_JOB_ID=" + jobID: false, "TIDE_ATTEMPT=" + strconv.Itoa(attempt): false}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if _, ok := want[string(kv)]; ok {
			want[string(kv)] = true
		}
	}
	for _, found := range want {
		if !found {
			return nil, false
		}
	}
	ticks, _, _ := procStat(pid)
	return Adopt(pid, ticks, exitFile)
}

// pidFileWait bounds how long FindByPIDFile waits for a wrapper to write
// its pid file: a fork and a shell's first lines, on a loaded machine.
const pidFileWait = 2 * time.Second

// ExitCode reads the exit code an attempt's wrapper recorded; ok is false
// when there is none (the attempt was killed, or never ran).
func ExitCode(exitFile string) (code int, ok bool) { return readExitFile(exitFile) }

func readExitFile(path string) (int, bool) {
	line, ok := readLine(path)
	if !ok {
		return -1, false
	}
	c, err := strconv.Atoi(line)
	if err != nil {
		return -1, false
	}
	return c, true
}

// readLine returns the content of a file the wrapper writes, without its
// final newline; ok is false when the file is missing or not written yet
// (empty, or a write cut short).
func readLine(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 || data[len(data)-1] != '\n' {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

// Alive reports whether pid runs and, when ticks is not 0 and /proc can be
// read, started at ticks (a reused pid is not alive). Zombies are dead.
func Alive(pid int, ticks uint64) bool {
	if pid <= 1 {
		return false
	}
	t, state, err := procStat(pid)
	if err == nil {
		return state != 'Z' && state != 'X' && (ticks == 0 || t == ticks)
	}
	if !errors.Is(err, errNoProc) {
		return false
	}
	return exists(pid)
}

var errNoProc = errors.New("/proc is not available")

// procStat returns a process's start time (clock ticks since boot) and
// state letter from /proc/PID/stat.
func procStat(pid int) (uint64, byte, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return 0, 0, errNoProc
		}
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return ticks, f[0][0], nil
}

// Stop ends the attempt: SIGTERM to its process group, then SIGKILL if it
// is still there after grace. It returns once Done is closed.
func (p *Proc) Stop(grace time.Duration) {
	deadline := time.Now().Add(grace)
	p.termOnce.Do(func() {
		p.waitLaunched(deadline)
		p.signal(syscall.SIGTERM)
	})
	// A timer of its own for what is left of grace: waiting for the launch
	// may have used all of it, and SIGKILL must still follow.
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// waitLaunched waits until the wrapper is about to start the command (it
// writes its pid file then, with SIGTERM back to its default), the attempt
// ends, or deadline passes; at most a second.
func (p *Proc) waitLaunched(deadline time.Time) {
	if p.pidFile == "" {
		return
	}
	limit := time.NewTimer(min(time.Until(deadline), time.Second))
	defer limit.Stop()
	for {
		if _, ok := readLine(p.pidFile); ok {
			return
		}
		select {
		case <-p.done:
			return
		case <-limit.C:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to the attempt's process group now.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

func (p *Proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return // the group may be gone and its id reused
	default:
	}
	if !p.child && !Alive(p.pid, p.ticks) {
		return
	}
	_ = signalGroup(p.pid, sig)
}

// reapGroup kills what is left of the attempt's process group after its
// leader exited (workers a job left behind would hold its GPUs), and waits
// up to five seconds for every member to exit. Zombies count as gone: they
// hold no memory, and whoever inherited them may take its time to reap.
// A process whose main thread is a zombie while its other threads still
// run (or are still exiting, a killed CUDA process freeing its memory)
// is not gone: it keeps its files, the GPU's device among them.
func (p *Proc) reapGroup() {
	if signalGroup(p.pid, syscall.SIGKILL) != nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && groupAlive(p.pid) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether process group pgid has a member that is not a
// zombie, or whose main thread is a zombie but not its last thread.
func groupAlive(pgid int) bool {
	if signalGroup(pgid, 0) != nil {
		return false // no member at all, zombies included
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		// After the command name: state, ppid, pgrp, ... num_threads
		// (field 20 of the line).
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 18 {
			continue
		}
		if threads, _ := strconv.Atoi(f[17]); (f[0] == "Z" || f[0] == "X") && threads <= 1 {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && pid > 0 {
			return true
		}
	}
	return false
}

func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			out[i] = strconv.Quote(a)
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}
