package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/localexec/cudatest"
)

// TestTidalSwapsPyTorch is TestTidalSwapsLive on a real GPU with real
// training (docs/tidal.md, "Live"): on a machine with an NVIDIA GPU and
// PyTorch built with CUDA, tide serve on its first GPU, under tidal's
// defaults, runs examples/pytorch/train.py:
//
//   - alone, to time it (samples/s), so that the runs below last about 45 s
//     (a) and 15 s (b) on this GPU;
//   - a, declared 2400 s of work due in 45 min, until it has reported
//     progress; then b, 1200 s due in 30 min. On one GPU b must run first
//     to meet, and a would then end late: EdgeFlow's admission declines b.
//     Moore-Hodgson keeps b, the job with less work left: tidal takes a out
//     for b, with the reason;
//   - a, stopped by SIGTERM, checkpoints the step it reached (train.py
//     saves only every 10^6 steps otherwise, so the step it resumes from is
//     the one the stop saved); b runs once, to its end; a is admitted
//     again, resumes from that step on the GPU and ends.
//
// b is due before a so that the progress it reports (its real speed is far
// above its declared estimate) cannot bring a back in front of it: once
// both fit, deadlines order them. With b due after a, as in
// TestTidalSwapsLive, b's first reports make both fit and a, due sooner,
// takes the GPU back after a few seconds.
//
// It logs the throughput, the step a stopped at and how long a was out,
// and writes them to $TIDE_TIDAL_RESULT when set. Skipped, saying why,
// without a GPU.
func TestTidalSwapsPyTorch(t *testing.T) {
	py := cudatest.Python(t, "the tidal swap PyTorch test needs a GPU with PyTorch")
	gpus, err := localexec.Discover("")
	if err != nil {
		t.Fatal(err)
	}
	tidalSwapsTorch(t, py, gpus[:1], 256, 300)
}

// TestTidalSwapsTorchCPU runs TestTidalSwapsPyTorch's steps on the CPU,
// on one pretend GPU, with a smaller batch, under Debian's CPU PyTorch
// (/usr/bin/python3 with python3-torch, which scripts/test installs; or
// the python $TIDE_TEST_TORCH_CPU names): real training, checkpointed on
// SIGTERM and resumed, on machines without a GPU (about 70 s on 2 cores).
// Skipped, saying so, without PyTorch, and with -short.
func TestTidalSwapsTorchCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("trains with PyTorch for about a minute")
	}
	py := os.Getenv("TIDE_TEST_TORCH_CPU")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch (apt-get install python3-torch, or set TIDE_TEST_TORCH_CPU): %v %s", py, err, out)
	}
	gpus, err := localexec.Discover("fake:1:t4")
	if err != nil {
		t.Fatal(err)
	}
	tidalSwapsTorch(t, py, gpus, 16, 40)
}

// tidalSwapsTorch is TestTidalSwapsPyTorch's body on the GPUs given (one),
// with py the python that has PyTorch, train.py's batch and the steps it
// is timed on alone.
func tidalSwapsTorch(t *testing.T, py string, gpus []localexec.GPU, batch, timed int) {
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.GPUs, cfg.Grace, cfg.Policy = gpus, 60*time.Second, "tidal"
	ts := startServer(t, cfg)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GPU %s (%s)", gpus[0].Name, gpus[0].Type)
	spec := func(steps int, estimate float64, due time.Duration) *api.JobSpec {
		s := &api.JobSpec{Command: []string{py, "examples/pytorch/train.py", "--synthetic", "--steps", fmt.Sprint(steps),
			"--batch-size", fmt.Sprint(batch), "--report-every", "10", "--checkpoint-every", "1000000"},
			Workdir: root, GPUs: 1, EstimateS: estimate}
		if due > 0 {
			s.Deadline = time.Now().Add(due).UTC().Format(time.RFC3339)
		}
		return s
	}

	// Alone, to size the runs below.
	alone := waitFinished(t, ts.admin, submit(t, ts.admin, spec(timed, 60, 0)).ID, 4*time.Minute).Throughput
	if !(alone > 0) {
		t.Fatalf("train.py reported no throughput alone")
	}
	stepsFor := func(s float64) int { return max(timed, int(s*alone/float64(batch))) }
	t.Logf("alone: %.1f samples/s; a %d steps, b %d steps", alone, stepsFor(45), stepsFor(15))

	a := submit(t, ts.admin, spec(stepsFor(45), 2400, 45*time.Minute))
	waitJob(t, ts.admin, a.ID, 2*time.Minute, "running and reporting", func(j *api.Job) bool {
		return j.State == api.StateRunning && j.Progress > 0.05 || api.Terminal(j.State)
	})
	b := submit(t, ts.admin, spec(stepsFor(15), 1200, 30*time.Minute))

	const why = "a newcomer with less work left took its place (Moore-Hodgson)"
	aj := waitJob(t, ts.admin, a.ID, time.Minute, "taken out for b", func(j *api.Job) bool {
		return strings.Contains(j.Reason, why) || api.Terminal(j.State)
	})
	if api.Terminal(aj.State) {
		t.Fatalf("a: %s (%s): want taken out for b with %q", aj.State, aj.Reason, why)
	}
	t.Logf("a: %s: %s", aj.State, aj.Reason)
	bj := waitFinished(t, ts.admin, b.ID, 4*time.Minute)
	aj = waitFinished(t, ts.admin, a.ID, 4*time.Minute)

	if len(aj.Attempts) < 2 || aj.Attempts[0].Outcome != "preempted" || aj.Attempts[0].Ended == nil || aj.Attempts[1].Started == nil {
		t.Fatalf("a's attempts %+v: want a first one preempted, then another", aj.Attempts)
	}
	if len(bj.Attempts) != 1 || bj.Started == nil || bj.Ended == nil || bj.Started.Before(*aj.Attempts[0].Ended) || aj.Attempts[1].Started.Before(*bj.Ended) {
		t.Errorf("b's attempts %+v, a's %+v: want b run once, between a's first and second attempts", bj.Attempts, aj.Attempts)
	}
	out := logs(t, ts.admin, a.ID)
	stop := regexp.MustCompile(`SIGTERM at step (\d+): checkpointed`).FindStringSubmatch(out)
	starts := regexp.MustCompile(`train\.py: step (\d+) of \d+ on`).FindAllStringSubmatch(out, -1)
	if stop == nil || len(starts) < 2 {
		t.Fatalf("a's log has no checkpoint on SIGTERM or no second start:\n%s", out)
	}
	at, _ := strconv.Atoi(stop[1])
	first, _ := strconv.Atoi(starts[0][1])
	resumed, _ := strconv.Atoi(starts[1][1])
	if first != 0 || at <= 0 || resumed != at {
		t.Errorf("a started at step %d, checkpointed at %d on SIGTERM and resumed at %d: want 0, > 0 and the step it saved", first, at, resumed)
	}
	out2 := aj.Attempts[1].Started.Sub(*aj.Attempts[0].Ended)
	line := fmt.Sprintf("tidal swap on %s: alone %.1f samples/s; a stopped at step %d of %d and resumed there after %.1f s out; b ran %.1f s; a %.1f samples/s at the end\n",
		gpus[0].Name, alone, at, stepsFor(45), out2.Seconds(), bj.Ended.Sub(*bj.Started).Seconds(), aj.Throughput)
	t.Log(line)
	if f := os.Getenv("TIDE_TIDAL_RESULT"); f != "" {
		if err := os.WriteFile(f, []byte(line), 0o644); err != nil {
			t.Error(err)
		}
	}
}
