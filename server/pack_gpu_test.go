package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/localexec/cudatest"
)

// TestPackedPairsPyTorch is the real-GPU check of packed pairs
// (docs/sharing.md, "Packed pairs live"): on a machine with an NVIDIA GPU
// and PyTorch built with CUDA, tide serve on its first GPU, under
// Gandiva's packing (the paper's rule) with a pair table that says two
// train.py jobs gain together (0.6 + 0.6 of their speeds alone), runs
// examples/pytorch/train.py:
//
//   - alone, to time it (samples/s);
//   - X alone, then Y submitted while X runs: Y is packed beside X (same
//     GPU), and X's step times alone and beside Y reach the pair model,
//     which then holds X's measured ratio (Gandiva splits the pair if
//     that ratio and Y's from the table sum to 1 or less);
//   - Z and W submitted together: packed from the start, each with half
//     the GPU's threads over MPS where the machine has it.
//
// It logs the throughputs alone and packed and X's measured ratio, and
// writes them to $TIDE_PACK_RESULT when set. Skipped, saying why, without
// a GPU.
func TestPackedPairsPyTorch(t *testing.T) {
	py := cudatest.Python(t, "the packed-pair PyTorch test needs a GPU with PyTorch")
	gpus, err := localexec.Discover("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.GPUs, cfg.MPS, cfg.Grace = gpus[:1], os.Getenv("TIDE_TEST_MPS"), 20*time.Second
	cfg.Policy = "gandiva:pack=true"
	typ := gpus[0].Type
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	table := fmt.Sprintf(`{%q: {"('train', 1)": {"null": 10.0, "('train', 1)": [6.0, 6.0]}}}`, typ)
	if err := os.WriteFile(cfg.PairThroughputs, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GPU %s (%s), MPS %v", gpus[0].Name, typ, ts.mps.Available())
	const batch = 256
	spec := func(steps int) *api.JobSpec {
		return &api.JobSpec{Command: []string{py, "examples/pytorch/train.py", "--synthetic", "--steps", fmt.Sprint(steps),
			"--batch-size", fmt.Sprint(batch), "--report-every", "20"}, Workdir: root, GPUs: 1, JobType: "train", EstimateS: 600}
	}
	get := func(id string) *api.Job {
		t.Helper()
		j, err := ts.admin.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	finished := func(ids ...string) []*api.Job {
		var out []*api.Job
		for _, id := range ids {
			out = append(out, waitFinished(t, ts.admin, id, 4*time.Minute))
		}
		return out
	}
	// Alone, to time it and size the runs below (about 30 s alone).
	alone := finished(submit(t, ts.admin, spec(300)).ID)[0].Throughput
	if !(alone > 0) {
		t.Fatalf("train.py reported no throughput alone")
	}
	steps := max(300, int(30*alone/batch))

	// X alone, then Y beside it.
	x := submit(t, ts.admin, spec(steps))
	waitJob(t, ts.admin, x.ID, 2*time.Minute, "reporting alone", func(j *api.Job) bool { return j.Progress > 0.1 })
	y := submit(t, ts.admin, spec(steps))
	var measured, gain float64
	var split bool
	for {
		xj, yj := get(x.ID), get(y.ID)
		ts.lock()
		sx, sy := ts.eng.Job(x.ID), ts.eng.Job(y.ID)
		if sx != nil && sy != nil && sx.PackedWith == y.ID && len(sx.GPUs) > 0 {
			if q1, q2, ok := ts.pairs.Ratios(sx.Job, sy.Job, sx.Alloc); ok && q1 != 0.6 {
				measured, gain = q1, q1+q2
			}
		}
		ts.mu.Unlock()
		if yj.State == api.StatePreempted {
			split = true
		}
		if api.Terminal(xj.State) || api.Terminal(yj.State) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	xy := finished(x.ID, y.ID)
	if a, b := xy[0].Attempts[0], xy[1].Attempts[0]; !slices.Equal(a.GPUs, b.GPUs) || b.Started == nil || a.Ended == nil || !b.Started.Before(*a.Ended) {
		t.Errorf("Y's first attempt %+v did not run beside X's %+v on its GPU", b, a)
	}
	if measured == 0 {
		t.Errorf("X's step times alone and beside Y never gave the pair model a measured ratio")
	}

	// Z and W packed from the start: sample their throughputs while both
	// run, past their first reports.
	ts.mu.Lock() // both reach the same first round
	z, w := submit(t, ts.admin, spec(steps)), submit(t, ts.admin, spec(steps))
	ts.mu.Unlock()
	var tz, tw []float64
	for {
		zj, wj := get(z.ID), get(w.ID)
		if api.Terminal(zj.State) || api.Terminal(wj.State) {
			break
		}
		if zj.Progress > 0.1 && wj.Progress > 0.1 && zj.Progress < 0.9 && wj.Progress < 0.9 {
			tz, tw = append(tz, zj.Throughput), append(tw, wj.Throughput)
		}
		time.Sleep(500 * time.Millisecond)
	}
	zw := finished(z.ID, w.ID)
	if a, b := zw[0].Attempts[0], zw[1].Attempts[0]; !slices.Equal(a.GPUs, b.GPUs) {
		t.Errorf("Z and W ran on GPUs %v and %v, want one GPU shared", a.GPUs, b.GPUs)
	}
	if len(tz) == 0 {
		t.Fatalf("Z and W never reported while both ran")
	}
	mz, mw := median(tz), median(tw)
	result := fmt.Sprintf("%s: train.py (batch %d) alone %.0f samples/s; X alone then Y beside it: X's measured ratio %.3f, with Y's from the table a gain of %.3f (split by Gandiva: %v); "+
		"Z and W packed from the start (MPS %v): %.0f + %.0f samples/s, %.3f + %.3f of alone (sum %.3f)",
		gpus[0].Name, batch, alone, measured, gain, split, ts.mps.Available(), mz, mw, mz/alone, mw/alone, (mz+mw)/alone)
	t.Log(result)
	if f := os.Getenv("TIDE_PACK_RESULT"); f != "" {
		if err := os.WriteFile(f, []byte(result+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// median of xs (not empty); sorts xs.
func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
