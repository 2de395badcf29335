package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec/cudatest"
)

// TestServeSharedGPUPyTorch is the real-GPU check of GPU sharing
// (docs/sharing.md): on a machine with an NVIDIA GPU and PyTorch built
// with CUDA, tide serve (discovering the GPUs, running MPS daemons where
// nvidia-cuda-mps-control exists) runs examples/pytorch/train.py with
// gpu_share 0.5 alone, then two such jobs at once, which must share one
// GPU (same device, overlapping in time) and both finish. It logs the
// throughput (samples/s, the jobs' last reports) alone and together, and
// writes them to $TIDE_SHARE_RESULT when set. Skipped, saying why, without
// a GPU.
func TestServeSharedGPUPyTorch(t *testing.T) {
	py := cudatest.Python(t, "the shared-GPU PyTorch test needs a GPU with PyTorch")
	bin, _ := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serveGPUs(t, bin, dir)
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(n int) []*api.Job {
		var ids []string
		for range n {
			out := cli(t, s, admin, "submit", "--gpus", "1", "--gpu-share", "0.5", "--estimate", "10m", "--workdir", root, "--",
				py, "examples/pytorch/train.py", "--synthetic", "--steps", "300", "--batch-size", "64", "--report-every", "50")
			ids = append(ids, strings.Fields(out)[0])
		}
		var jobs []*api.Job
		for _, id := range ids {
			var j *api.Job
			waitFor(t, "train.py "+id+" to end", 10*time.Minute, func() bool {
				j = cliJob(t, s, admin, id)
				return api.Terminal(j.State)
			})
			if j.State != api.StateFinished {
				t.Fatalf("train.py %s: %s (%s):\n%s", id, j.State, j.Reason, cli(t, s, admin, "logs", id))
			}
			jobs = append(jobs, j)
		}
		return jobs
	}
	alone := run(1)[0]
	both := run(2)
	a, b := both[0].Attempts[len(both[0].Attempts)-1], both[1].Attempts[len(both[1].Attempts)-1]
	if !slices.Equal(a.GPUs, b.GPUs) {
		t.Errorf("two half-GPU jobs ran on GPUs %v and %v, want one GPU shared", a.GPUs, b.GPUs)
	}
	if a.Started == nil || b.Started == nil || a.Ended == nil || b.Ended == nil || !a.Started.Before(*b.Ended) || !b.Started.Before(*a.Ended) {
		t.Errorf("the two half-GPU jobs did not overlap in time: %+v, %+v", a, b)
	}
	result := fmt.Sprintf("throughput alone %.1f samples/s; together %.1f + %.1f samples/s", alone.Throughput, both[0].Throughput, both[1].Throughput)
	t.Log(result)
	if f := os.Getenv("TIDE_SHARE_RESULT"); f != "" {
		if err := os.WriteFile(f, []byte(result+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}
