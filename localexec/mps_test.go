package localexec

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestShareEnviron: a job holding part of its GPUs gets its share as MPS's
// active thread percentage (rounded up) and its memory as MPS's pinned
// limit on each device as it sees them, with TIDE_GPU_SHARE and
// TIDE_GPU_MEM_GIB; the server's own CUDA_MPS_* never leak in; a
// whole-GPU job gets none of them.
func TestShareEnviron(t *testing.T) {
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "/server/own")
	t.Setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "3")
	l, _ := launch(t, `env | sort > "$TIDE_CHECKPOINT_DIR/env"`)
	l.Share, l.GPUMemGiB, l.MPSPipeDir = 0.333, 7.5, "/run/tide/mps/gpu1/pipe"
	env := runEnv(t, l)
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=1,3", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=34", "TIDE_GPU_SHARE=0.333",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=7680M,1=7680M", "TIDE_GPU_MEM_GIB=7.5", "CUDA_MPS_PIPE_DIRECTORY=/run/tide/mps/gpu1/pipe"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	for _, bad := range []string{"/server/own", "PERCENTAGE=3\n"} {
		if strings.Contains(env, bad) {
			t.Errorf("environment holds the server's %s", bad)
		}
	}
	l, _ = launch(t, `env | sort > "$TIDE_CHECKPOINT_DIR/env"`)
	if env := runEnv(t, l); strings.Contains(env, "CUDA_MPS_") || strings.Contains(env, "TIDE_GPU_SHARE") {
		t.Errorf("a whole-GPU job got sharing variables:\n%s", env)
	}
}

func runEnv(t *testing.T, l *Launch) string {
	t.Helper()
	p, err := Start(l)
	if err != nil {
		t.Fatal(err)
	}
	if code, known := p.Exit(); code != 0 || !known {
		t.Fatalf("exit %d %v", code, known)
	}
	b, err := os.ReadFile(filepath.Join(l.CheckpointDir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeControl writes a stand-in for nvidia-cuda-mps-control: a shell
// script that appends "<GPU> <args or stdin>" to log, the way the real one
// is called (-d to start a daemon, "quit" on stdin to stop it).
func fakeControl(t *testing.T) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "mps-control"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\nif [ \"$1\" = -d ]; then what=start; else read what; fi\n" +
		"echo \"$CUDA_VISIBLE_DEVICES $what $CUDA_MPS_PIPE_DIRECTORY\" >> " + log + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// TestMPSDaemonPerGPU: the first job on a GPU starts its daemon, the last
// to leave stops it, each GPU its own, with its own pipe directory; with
// fake GPUs and no program named, or "off", MPS is unavailable and
// nothing runs.
func TestMPSDaemonPerGPU(t *testing.T) {
	bin, log := fakeControl(t)
	dir := t.TempDir()
	m := NewMPS(bin, dir, []GPU{{Index: 0, Fake: true}, {Index: 1, Fake: true}})
	if !m.Available() {
		t.Fatal("MPS with a named program is unavailable")
	}
	var wg sync.WaitGroup
	for range 3 { // three jobs share GPU 1 at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p, err := m.Acquire(1); err != nil || p != filepath.Join(dir, "gpu1", "pipe") {
				t.Errorf("Acquire(1) = %q, %v", p, err)
			}
		}()
	}
	wg.Wait()
	if _, err := m.Acquire(0); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []int{1, 1, 0, 1, 1} { // the fifth releases nothing
		if err := m.Release(dev); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(log)
	want := "1 start " + dir + "/gpu1/pipe\n0 start " + dir + "/gpu0/pipe\n0 quit " + dir + "/gpu0/pipe\n1 quit " + dir + "/gpu1/pipe\n"
	if string(b) != want {
		t.Errorf("control calls:\n%s\nwant:\n%s", b, want)
	}
	for _, m := range []*MPS{NewMPS("", dir, []GPU{{Fake: true}}), NewMPS("off", dir, nil), nil} {
		if p, err := m.Acquire(0); m.Available() || p != "" || err != nil {
			t.Errorf("unavailable MPS: Available %v, Acquire %q %v", m.Available(), p, err)
		}
	}
	// A control program that fails is an error naming the GPU.
	m = NewMPS("/bin/false", dir, nil)
	if _, err := m.Acquire(2); err == nil || !strings.Contains(err.Error(), "GPU 2") {
		t.Errorf("failing control program: %v", err)
	}
}
