package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
)

// TestSharedGPUsLive runs real processes on two fake T4s: a whole-GPU job
// and four quarter-GPU jobs run at once, the quarters on one GPU with the
// same CUDA_VISIBLE_DEVICES, a 25% MPS thread share and a 4 GiB memory
// limit each, one MPS daemon (a stand-in control program) started for
// their GPU and stopped once they are gone; a fifth quarter waits while
// both GPUs are full, then runs; the cluster view counts a shared GPU
// once.
func TestSharedGPUsLive(t *testing.T) {
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:2:t4")
	ts := startServer(t, cfg)
	out, gate := filepath.Join(dir, "env"), filepath.Join(dir, "go")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each job writes what it sees, then waits for the gate: they all run
	// at once, or the test times out.
	cmd := []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|$CUDA_MPS_PIPE_DIRECTORY" > ` +
		out + `/$TIDE_JOB_ID.tmp && mv ` + out + `/$TIDE_JOB_ID.tmp ` + out + `/$TIDE_JOB_ID; while [ ! -e ` + gate + ` ]; do sleep 0.05; done`}
	whole := submit(t, ts.admin, &api.JobSpec{Command: cmd, GPUs: 1})
	var quarters []string
	for range 4 {
		quarters = append(quarters, submit(t, ts.admin, &api.JobSpec{Command: cmd, GPUs: 1, GPUShare: 0.25}).ID)
	}
	for _, id := range append([]string{whole.ID}, quarters...) {
		waitJob(t, ts.admin, id, 20*time.Second, "running", inState(api.StateRunning))
	}
	seen := func(id string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, err := os.ReadFile(filepath.Join(out, id))
			if err == nil {
				return strings.TrimSpace(string(b))
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s never wrote its environment:\n%s", id, logs(t, ts.admin, id))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	w := strings.Split(seen(whole.ID), "|")
	q := strings.Split(seen(quarters[0]), "|")
	if w[0] == q[0] || w[1] != "" || w[3] != "" {
		t.Errorf("whole job sees %q, quarter job %q: want other devices, no MPS for the whole job", w, q)
	}
	if q[1] != "25" || q[2] != "0=4096M" || q[3] != filepath.Join(cfg.DataDir, "mps", "gpu"+q[0], "pipe") {
		t.Errorf("quarter job sees %q: want 25%% of the threads, 4096 MiB, the MPS pipe of GPU %s", q, q[0])
	}
	for _, id := range quarters[1:] {
		if got := seen(id); got != strings.Join(q, "|") {
			t.Errorf("job %s sees %q, job %s %q: quarters should share one GPU alike", id, got, quarters[0], strings.Join(q, "|"))
		}
	}
	c, err := ts.admin.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Allocated != 2 {
		t.Errorf("cluster: %d GPUs allocated, want 2 (the shared one once)", c.Allocated)
	}
	fifth := submit(t, ts.admin, &api.JobSpec{Command: cmd, GPUs: 1, GPUShare: 0.25})
	waitRounds(t, ts, 3)
	if j := waitJob(t, ts.admin, fifth.ID, time.Second, "known", inState(api.StatePending, api.StateRunning)); j.State != api.StatePending {
		t.Errorf("a fifth quarter is %s while both GPUs are full, want pending", j.State)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{whole.ID, fifth.ID}, quarters...) {
		waitJob(t, ts.admin, id, 30*time.Second, "finished", inState(api.StateFinished))
	}
	// Every daemon started is stopped (the last stop runs just after the
	// last job ends), GPU q[0]'s among them (the fifth quarter may have run
	// on the GPU the whole job left, with a daemon of its own).
	waitMPSStopped(t, calls, q[0])
}

// mpsConfig is a test server's configuration on GPUs (a fake: spec), its
// data under dir, with a stand-in MPS control program that logs each call
// as "<GPU> start" (-d) or "<GPU> quit" (quit on its input) to calls.
func mpsConfig(t *testing.T, dir, spec string) (cfg Config, calls string) {
	t.Helper()
	cfg = testConfig(t, filepath.Join(dir, "data"))
	gpus, err := localexec.Discover(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = gpus
	control, calls := filepath.Join(dir, "mps-control"), filepath.Join(dir, "mps-calls")
	script := "#!/bin/sh\nif [ \"$1\" = -d ]; then what=start; else read what; fi\necho \"$CUDA_VISIBLE_DEVICES $what\" >> " + calls + "\n"
	if err := os.WriteFile(control, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.MPS = control
	return cfg, calls
}

// waitMPSStopped waits until the control calls logged in calls (one
// "<GPU> start|quit" line each) leave every daemon stopped, each GPU's
// calls alternating from a start, the GPUs devs among those started.
func waitMPSStopped(t *testing.T, calls string, devs ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(calls)
		state := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			dev, what, _ := strings.Cut(l, " ")
			if (what == "start") == (state[dev] == "start") {
				t.Fatalf("MPS control calls out of turn: %q after %q on GPU %s:\n%s", what, state[dev], dev, b)
			}
			state[dev] = what
		}
		stopped := len(state) > 0
		for _, s := range state {
			stopped = stopped && s == "quit"
		}
		for _, d := range devs {
			stopped = stopped && state[d] == "quit"
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MPS control calls: want every daemon stopped, GPUs %v among them, got:\n%s", devs, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSharedGPUsRecovered: two half-GPU jobs run on one fake GPU; the
// server stops, leaving them running, and a new one re-adopts both on the
// same GPU (no restart), so a third half-GPU job waits: nothing is
// over-committed across the restart. The GPU's MPS daemon, started by the
// first server, is stopped by the second once the jobs have ended.
func TestSharedGPUsRecovered(t *testing.T) {
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:1:t4")
	cfg.StopJobsOnExit = false
	gate := filepath.Join(dir, "go")
	cmd := []string{"sh", "-c", `touch ` + dir + `/$TIDE_JOB_ID.ran; while [ ! -e ` + gate + ` ]; do sleep 0.05; done`}
	s1 := startServer(t, cfg)
	var ids []string
	for range 2 {
		ids = append(ids, submit(t, s1.admin, &api.JobSpec{Command: cmd, GPUs: 1, GPUShare: 0.5}).ID)
	}
	for _, id := range ids {
		waitJob(t, s1.admin, id, 20*time.Second, "launched", func(j *api.Job) bool {
			_, err := os.Stat(filepath.Join(dir, id+".ran"))
			return j.State == api.StateRunning && err == nil
		})
	}
	s1.close(t)

	s2 := startServer(t, cfg)
	third := submit(t, s2.admin, &api.JobSpec{Command: cmd, GPUs: 1, GPUShare: 0.5})
	waitRounds(t, s2, 3)
	for _, id := range ids {
		j := waitJob(t, s2.admin, id, 5*time.Second, "running", inState(api.StateRunning))
		if len(j.Attempts) != 1 || j.Restarts != 0 {
			t.Errorf("job %s after the restart: %d attempts, %d restarts; want it re-adopted; its events:\n%s", id, len(j.Attempts), j.Restarts, jobEvents(s2.admin, id))
		}
	}
	if j := waitJob(t, s2.admin, third.ID, time.Second, "known", inState(api.StatePending, api.StateRunning)); j.State != api.StatePending {
		t.Errorf("a third half-GPU job is %s beside two re-adopted halves, want pending", j.State)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids, third.ID) {
		waitJob(t, s2.admin, id, 30*time.Second, "finished", inState(api.StateFinished))
	}
	// One daemon or two in turn: the third may launch before the last
	// adopted job's release, keeping the daemon running.
	waitMPSStopped(t, calls, "0")
}

// jobEvents lists a job's events, one a line, for a failure's message: a
// rare failure under load then says what the server did.
func jobEvents(c *api.Client, id string) string {
	evs, err := c.Events(context.Background(), id)
	if err != nil {
		return "(events: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %s attempt %d %s: %s\n", ev.Time.Format("15:04:05.000"), ev.Attempt, ev.Kind, ev.Message)
	}
	return b.String()
}

// TestClusterSharersInSubmissionOrder: GET /v1/cluster lists the jobs
// sharing a GPU in submission order, as docs/api.md says, the first as its
// job. It listed them in queue order, where a job requeued comes after
// those queued before its requeue: two halves of a GPU, the first
// requeued, were listed second first (found by the random operations
// search, seed 72).
func TestClusterSharersInSubmissionOrder(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	gpus, err := localexec.Discover("fake:1:t4")
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = gpus
	ts := startServer(t, cfg)
	var ids []string
	for range 2 {
		s := countSpec(1, 2000, 10*time.Millisecond)
		s.GPUShare = 0.5
		ids = append(ids, submit(t, ts.admin, s).ID)
	}
	for _, id := range ids {
		waitJob(t, ts.admin, id, 20*time.Second, "running", inState(api.StateRunning))
	}
	if _, err := ts.admin.Requeue(ctx, ids[0], false); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ts.admin, ids[0], 20*time.Second, "running again", func(j *api.Job) bool { return j.State == api.StateRunning && j.Requeues == 1 })
	cl, err := ts.admin.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := cl.GPUs[0]; g.Job != ids[0] || !slices.Equal(g.Jobs, ids) {
		t.Errorf("GPU 0 shared by job %q, jobs %v; want %s, %v (submission order)", g.Job, g.Jobs, ids[0], ids)
	}
	for _, id := range ids {
		if _, err := ts.admin.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMPSDaemonAfterRestart: the MPS daemon a part held is stopped when
// the part ends while tide serve is down (the next server finds it gone)
// and when the server stops its jobs on exit (Close waits for the stop).
// The next server knew only the daemons of the jobs it re-adopted: it left
// the first running and started another on the same GPU for the next part
// (the random operations search, seed 34); on exit the daemons' stops ran
// after Close returned, so a tide serve process exited before them.
func TestMPSDaemonAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:1:t4")
	gate := filepath.Join(dir, "go")
	cmd := []string{"sh", "-c", `touch ` + dir + `/$TIDE_JOB_ID.ran; while [ ! -e ` + gate + ` ]; do sleep 0.05; done`}
	part := &api.JobSpec{Command: cmd, GPUs: 1, GPUShare: 0.5}

	// The part ends while no server runs.
	cfg.StopJobsOnExit = false
	s1 := startServer(t, cfg)
	id := submit(t, s1.admin, part).ID
	j := waitJob(t, s1.admin, id, 20*time.Second, "launched", func(j *api.Job) bool {
		_, err := os.Stat(filepath.Join(dir, id+".ran"))
		return j.State == api.StateRunning && err == nil && len(j.Attempts) == 1 && j.Attempts[0].PID > 0
	})
	s1.close(t)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(j.Attempts[0].PID, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s's process %d did not end", id, j.Attempts[0].PID)
		}
	}
	s2 := startServer(t, cfg)
	waitJob(t, s2.admin, id, 20*time.Second, "finished", inState(api.StateFinished))
	waitMPSStopped(t, calls, "0")
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	next := submit(t, s2.admin, part).ID
	waitJob(t, s2.admin, next, 20*time.Second, "running", inState(api.StateRunning))
	s2.close(t)

	// The server stops its jobs on exit: the daemon is stopped by then.
	cfg.StopJobsOnExit = true
	s3 := startServer(t, cfg)
	waitJob(t, s3.admin, next, 20*time.Second, "running", inState(api.StateRunning))
	s3.close(t)
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); lines[len(lines)-1] != "0 quit" {
		t.Errorf("tide serve stopped its jobs and exited; the MPS control calls end with %q, want the daemon stopped:\n%s", lines[len(lines)-1], b)
	}
	waitMPSStopped(t, calls, "0")
}

// TestMPSDaemonStoppedByClose: the MPS daemon of a part that ended while
// the server ran is stopped by the time Close returns, also when the
// server leaves its jobs running on exit. Close waited for the daemons'
// stops only when it stopped the jobs: the store, closed, said no job
// held the daemon, so the next server started another on the same GPU
// for the next part, and the old server's stop, still in flight, came
// after that start (the random operations search, seed 859 at 150 steps:
// "0 start, 0 start, 0 quit" when a part ended just before a restart);
// in tide serve, which exits once Close returns, the stop was cut off,
// leaving the daemon running beside the next server's. Here the stand-in
// takes a moment to stop a daemon, as a real one does.
func TestMPSDaemonStoppedByClose(t *testing.T) {
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:1:t4")
	slow := "#!/bin/sh\nif [ \"$1\" = -d ]; then what=start; else read what; sleep 0.5; fi\necho \"$CUDA_VISIBLE_DEVICES $what\" >> " + calls + "\n"
	if err := os.WriteFile(cfg.MPS, []byte(slow), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.StopJobsOnExit = false
	part := countSpec(1, 1, time.Millisecond)
	part.GPUShare = 0.5

	s1 := startServer(t, cfg)
	id := submit(t, s1.admin, part).ID
	waitJob(t, s1.admin, id, 20*time.Second, "finished", inState(api.StateFinished))
	s1.close(t)
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "0 start\n0 quit" {
		t.Errorf("Close returned after the only part ended; MPS control calls:\n%s\nwant its daemon started and stopped", got)
	}

	// The next server starts a daemon for its part after the old one's
	// stop, and stops it in turn.
	s2 := startServer(t, cfg)
	next := submit(t, s2.admin, part).ID
	waitJob(t, s2.admin, next, 20*time.Second, "finished", inState(api.StateFinished))
	waitMPSStopped(t, calls, "0")
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "start") != 2 {
		t.Errorf("two parts ran one after the other; MPS control calls:\n%s\nwant a daemon started for each", b)
	}
}
