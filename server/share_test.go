package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	cfg := testConfig(t, filepath.Join(dir, "data"))
	gpus, err := localexec.Discover("fake:2:t4")
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
	time.Sleep(3 * cfg.Round)
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
	// last job ends), per GPU in turn (the fifth quarter may have run on
	// the GPU the whole job left, with a daemon of its own).
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(calls)
		state, bad := map[string]string{}, ""
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			dev, what, _ := strings.Cut(l, " ")
			if (what == "start") == (state[dev] == "start") {
				bad = fmt.Sprintf("%q after %q on GPU %s", what, state[dev], dev)
			}
			state[dev] = what
		}
		if bad != "" {
			t.Fatalf("MPS control calls out of turn: %s:\n%s", bad, b)
		}
		running := false
		for _, s := range state {
			running = running || s == "start"
		}
		if !running && state[q[0]] == "quit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MPS control calls: want every daemon stopped, GPU %s's among them, got:\n%s", q[0], b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
