package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJobShowsPerf: the step times and gradient statistics a job reports
// reach `tide job`, as the goodput model fitted to them, and under Pollux
// that model grows the job (it starts on one GPU, all Pollux gives a job
// it knows nothing about).
func TestJobShowsPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, countjob := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	const tok = "tide_test_admin_token_0123456789"
	s := serve(t, bin, dir, "--admin-token-file", writeToken(t, tok), "--policy", "pollux:restart_penalty=0")
	id := strings.Fields(cli(t, s, tok, "submit", "--name", "elastic", "--min-gpus", "1", "--max-gpus", "4", "--batch-size", "64",
		"--", countjob, "-steps", "100000", "-step-time", "2ms", "-batch", "64", "-sample-time", "500us", "-sync-time", "1ms", "-noise-scale", "500"))[0]
	waitFor(t, "the job to be grown to 4 GPUs", 20*time.Second, func() bool {
		j := cliJob(t, s, tok, id)
		return len(j.GPUs) == 4 && j.Perf != nil && len(j.Perf.Observations) == 3
	})
	out := cli(t, s, tok, "job", id)
	for _, want := range []string{
		"Gradients:  noise scale 500 samples",
		"Performance (goodput model fitted to 3 observed configurations, on 1, 2, 4 GPUs; predictions for one node):",
		"GPUS  BATCH        STEP     SAMPLES/S  SPEEDUP  OBSERVED STEP",
		// 2 ms + 64 x 0.5 ms on one GPU; 2 + 32 x 0.5 + 1 ms on two.
		"1     64 (64/GPU)  0.034 s  1882       1.00x    0.034 s (64/GPU)",
		"2     64 (32/GPU)  0.019 s  3368       1.79x    0.019 s (32/GPU)",
		"4     64 (16/GPU)  0.011 s  5818       3.09x    0.011 s (16/GPU)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tide job lacks %q:\n%s", want, out)
		}
	}
	cli(t, s, tok, "cancel", id)
	waitFor(t, "the cancelled job to exit", 10*time.Second, func() bool {
		a := cliJob(t, s, tok, id).Attempts
		return a[len(a)-1].Ended != nil
	})
}
