package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestServePyTorch runs examples/pytorch/train.py with the real PyTorch
// (Debian's python3-torch: CPU only, no torchvision) under a real tide
// serve on 2 fake GPUs, as the README's command does, for a few steps: it
// finishes, says it fell back to synthetic data (when torchvision is
// missing) and that it runs 1 replica of the 2 GPUs given, and what it
// reports (1 replica) is what tide's goodput model learns. Skipped, saying
// so, without python3-torch.
func TestServePyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve and PyTorch")
	}
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s cannot import torch (apt-get install python3-torch): %v", py, err)
	}
	args := []string{"examples/pytorch/train.py", "--steps", "3", "--batch-size", "8", "--report-every", "1"}
	vision := exec.Command(py, "-c", "import torchvision").Run() == nil
	if vision {
		args = append(args, "--synthetic") // no download in tests
	}
	s, admin, root := servePy(t)
	out := cli(t, s, admin, append([]string{"submit", "--gpus", "2", "--estimate", "1h", "--workdir", root, "--", py}, args...)...)
	id := strings.Fields(out)[0]
	var j *api.Job
	waitFor(t, "train.py to end", 5*time.Minute, func() bool {
		j = cliJob(t, s, admin, id)
		return api.Terminal(j.State)
	})
	log := cli(t, s, admin, "logs", id)
	if j.State != api.StateFinished || len(j.Attempts) != 1 {
		t.Fatalf("train.py: %s after %d attempts, %q:\n%s", j.State, len(j.Attempts), j.Reason, log)
	}
	want := []string{"tide gave 2 GPU(s) but 1 replica(s) run (no CUDA device: on the CPU)", "on 1 replica(s) (cpu)", "step 3/3", "train.py: done"}
	if !vision {
		want = append(want, "torchvision is not installed", "training on synthetic data")
	}
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if j.Perf == nil || len(j.Perf.Observations) == 0 || j.Perf.Observations[0].Replicas != 1 || j.Perf.Observations[0].LocalBsz != 8 {
		t.Errorf("what tide learned from the reports: %+v, want 1 replica of 8 samples", j.Perf)
	}
}

// TestServePyTorchImportError: train.py without PyTorch (python3 -S, no
// site packages) exits 78, and tide fails it after one attempt instead of
// retrying it; so does a Python script whose import fails with an
// ordinary traceback.
func TestServePyTorchImportError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	s, admin, root := servePy(t)
	for _, tc := range []struct {
		cmd    []string
		reason string
	}{
		{[]string{py, "-S", "examples/pytorch/train.py"}, "exit code " + strconv.Itoa(api.ExitNoRetry)},
		{[]string{py, "-c", "import tide_no_such_module"}, "No module named 'tide_no_such_module'"},
	} {
		out := cli(t, s, admin, append([]string{"submit", "--max-retries", "3", "--workdir", root, "--"}, tc.cmd...)...)
		id := strings.Fields(out)[0]
		var j *api.Job
		waitFor(t, "the job to end", time.Minute, func() bool {
			j = cliJob(t, s, admin, id)
			return api.Terminal(j.State)
		})
		if j.State != api.StateFailed || len(j.Attempts) != 1 || !strings.Contains(j.Reason, tc.reason) || !strings.Contains(j.Reason, "not retried") {
			t.Errorf("%v: %s after %d attempts, reason %q; want failed after 1, %q", tc.cmd, j.State, len(j.Attempts), j.Reason, tc.reason)
		}
	}
}

// servePy starts tide serve on 2 fake GPUs; it returns the server, its
// admin token and the repository's root (the jobs' working directory).
func servePy(t *testing.T) (*served, string, string) {
	bin, _ := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serveGPUs(t, bin, dir, "--gpus", "fake:2:t4")
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return s, admin, root
}
