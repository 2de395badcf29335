// Package examples holds tide's example jobs; this test checks the one no
// other test runs, pytorch/train.py.
package examples

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestPyTorchScriptParses checks that pytorch/train.py is valid Python
// (PyTorch itself is not needed, nor installed by the tests).
func TestPyTorchScriptParses(t *testing.T) {
	py := python(t)
	out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", "pytorch/train.py").CombinedOutput()
	if err != nil {
		t.Fatalf("pytorch/train.py: %v\n%s", err, out)
	}
}

func python(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: pytorch/train.py not checked")
	}
	return py
}

// train starts pytorch/train.py as tide would, with a stand-in for
// PyTorch (pytorch/testdata/torchstub: a forward/backward pass takes 5 ms,
// and a batch of n samples has squared gradient norm 1 + 8/n).
func train(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	stub, err := filepath.Abs("pytorch/testdata/torchstub")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python(t), append([]string{"-B", "pytorch/train.py", "--synthetic"}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+stub, "TIDE_CHECKPOINT_DIR="+dir, "TIDE_REPORT_FILE="+filepath.Join(dir, "report.jsonl"))
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// reports reads the report file, each line checked as tide checks a
// report.
func reports(t *testing.T, dir string) []api.Report {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "report.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []api.Report
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r api.Report
		if err := api.DecodeStrict(strings.NewReader(sc.Text()), &r); err != nil {
			t.Fatalf("report %s: %v", sc.Text(), err)
		}
		if errs := r.Validate(); len(errs) > 0 {
			t.Fatalf("report %s: %v", sc.Text(), errs)
		}
		out = append(out, r)
	}
	return out
}

// TestPyTorchScript runs train.py's protocol: it uses the batch tide gives
// (TIDE_LOCAL_BSZ, TIDE_ACCUM_STEPS), reports progress, step times and
// gradient statistics tide accepts, checkpoints and exits 143 on SIGTERM,
// and resumes from its checkpoint.
func TestPyTorchScript(t *testing.T) {
	dir := t.TempDir()
	// 8 samples a pass, 2 passes a step: batch 16, twice the job's own 8,
	// so the 10 steps of 8 take 5 steps.
	cmd, out := train(t, dir, []string{"TIDE_LOCAL_BSZ=8", "TIDE_ACCUM_STEPS=1"},
		"--steps", "10", "--batch-size", "8", "--report-every", "1", "--grad-stats")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train.py: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "on 1 replica(s) (cpu), batch 16 (8 per replica, 1 accumulation steps, synthetic data)") || !strings.Contains(out.String(), "train.py: done") {
		t.Errorf("output:\n%s", out)
	}
	reps := reports(t, dir)
	if len(reps) != 5 {
		t.Fatalf("%d reports, want one per step (5)", len(reps))
	}
	for i, r := range reps {
		// Gradient statistics of the whole batch (8) and its half (4):
		// |G|^2 = 1, tr(Sigma) = 8, per sample of the initial batch 8: 1.
		if r.Step != float64(2*(i+1)) || r.TotalSteps != 10 || r.LocalBsz != 8 || r.Replicas != 1 || r.StepTime <= 0 || r.ComputeTime <= 0 ||
			math.Abs(r.GradSqr-1) > 1e-9 || math.Abs(r.GradVar-1) > 1e-9 {
			t.Errorf("report %d: %+v", i, r)
		}
	}

	// Preempted: SIGTERM after the first reports, then a restart with the
	// job's own batch.
	dir = t.TempDir()
	cmd, out = train(t, dir, nil, "--steps", "150", "--batch-size", "8", "--report-every", "5", "--checkpoint-every", "1000")
	for deadline := time.Now().Add(20 * time.Second); len(reports(t, dir)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no reports:\n%s", out)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit %d (%v) after SIGTERM, want 143:\n%s", code, err, out)
	}
	line := lastLine(out.String())
	var stopped int
	if _, err := fmt.Sscanf(line, "train.py: SIGTERM at step %d: checkpointed, exiting", &stopped); err != nil || stopped < 10 {
		t.Fatalf("last line %q: want a checkpoint at step 10 or later", line)
	}
	cmd, out = train(t, dir, []string{"TIDE_ATTEMPT=2"}, "--steps", "150", "--batch-size", "8", "--report-every", "50")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train.py after a restart: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out.String(), fmt.Sprintf("train.py: step %d of 150 on 1 replica(s) (cpu), batch 8", stopped)) || lastLine(out.String()) != "train.py: done" {
		t.Errorf("the restart did not resume at step %d:\n%s", stopped, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestPyTorchScriptReplicas: given 2 GPUs that CUDA does not see (fake
// GPUs, or a PyTorch without CUDA), train.py says so, runs and reports the
// one replica it really runs, and keeps the global batch tide chose.
func TestPyTorchScriptReplicas(t *testing.T) {
	dir := t.TempDir()
	cmd, out := train(t, dir, []string{"TIDE_GPUS=2", "CUDA_VISIBLE_DEVICES=0,1", "TIDE_BATCH_SIZE=16", "TIDE_LOCAL_BSZ=8", "TIDE_ACCUM_STEPS=0"},
		"--steps", "4", "--batch-size", "16", "--report-every", "1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train.py: %v\n%s", err, out)
	}
	for _, want := range []string{"tide gave 2 GPU(s) but 1 replica(s) run (no CUDA device: on the CPU)", "on 1 replica(s) (cpu), batch 16 (16 per replica"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	reps := reports(t, dir)
	if len(reps) != 4 {
		t.Fatalf("%d reports, want 4", len(reps))
	}
	for i, r := range reps {
		if r.Replicas != 1 || r.LocalBsz != 16 {
			t.Errorf("report %d: %d replicas of %d samples, want 1 of 16", i, r.Replicas, r.LocalBsz)
		}
	}
}

// TestPyTorchScriptNoTorch: without PyTorch (python3 -S: no site
// packages; the stand-in not on the path), train.py says what to install
// and exits with 78, which tide does not retry.
func TestPyTorchScriptNoTorch(t *testing.T) {
	cmd := exec.Command(python(t), "-S", "-B", "pytorch/train.py", "--synthetic")
	cmd.Env = append(os.Environ(), "PYTHONPATH=")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != api.ExitNoRetry || !strings.Contains(string(out), "cannot import PyTorch") || !strings.Contains(string(out), "python3-torch") {
		t.Errorf("train.py without PyTorch: exit %d (%v), want %d:\n%s", code, err, api.ExitNoRetry, out)
	}
}
