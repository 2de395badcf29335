package sim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// TestFractionalJobsShareAGPU, worked by hand: four quarter-GPU jobs of
// 100, 200, 300 and 400 s on one V100 all run at once from t=0 and end at
// 100 ... 400 s, charged 25, 50, 75 and 100 GPU-s, saving 75, 150, 225 and
// 300; the GPU is held for all 400 s, counted once in the timeline, and
// its shares in use average 0.625 (the utilisation). The
// same jobs whole run one after another: ends 100, 300, 600, 1,000, 1,000
// GPU-s charged, nothing saved.
func TestFractionalJobsShareAGPU(t *testing.T) {
	for _, share := range []float64{0.25, 0} {
		var jobs []*job.Job
		for i, d := range []float64{100, 200, 300, 400} {
			b := enginetest.Job(fmt.Sprintf("j%d", i)).Seconds(d)
			if share > 0 {
				b.Share(share)
			}
			jobs = append(jobs, b.Obj())
		}
		p, err := policy.Parse("fifo", policy.Context{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x1:v100"), Model: perf.Duration{}, Policy: p,
			Placer: place.Pack{}, Round: 60, OnEvents: true}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		ends, charged, saved := []float64{100, 200, 300, 400}, []float64{25, 50, 75, 100}, []float64{75, 150, 225, 300}
		if share == 0 {
			ends, charged, saved = []float64{100, 300, 600, 1000}, []float64{100, 200, 300, 400}, []float64{0, 0, 0, 0}
		}
		for i, j := range run.Jobs {
			if math.Abs(j.Finish-ends[i]) > 1e-6 || math.Abs(j.GPUSeconds-charged[i]) > 1e-6 || math.Abs(j.SharedGPUSeconds-saved[i]) > 1e-6 {
				t.Errorf("share %v: job %s ends at %v charged %v GPU-s, saved %v; want %v, %v, %v",
					share, j.ID, j.Finish, j.GPUSeconds, j.SharedGPUSeconds, ends[i], charged[i], saved[i])
			}
		}
		// Utilisation counts the parts charged: the GPU's shares in use
		// average (1 + 0.75 + 0.5 + 0.25) / 4 over the 400 s.
		sum := report.Summarize(run)
		if want := map[bool]float64{true: 0.625, false: 1}[share > 0]; math.Abs(sum.Utilization-want) > 1e-9 {
			t.Errorf("share %v: utilisation %v, want %v", share, sum.Utilization, want)
		}
		for _, smp := range run.Timeline {
			if smp.Allocated > 1 {
				t.Errorf("share %v: timeline at %v: %d GPUs allocated on a 1-GPU cluster", share, smp.T, smp.Allocated)
			}
		}
		switch {
		case share > 0 && (sum.Sharing == nil || sum.Sharing.Jobs != 4 || math.Abs(sum.Sharing.SavedGPUHours-750.0/3600) > 1e-9 || math.Abs(sum.GPUHours-250.0/3600) > 1e-9):
			t.Errorf("sharing summary %+v, %v GPU-h charged; want 4 jobs, 250/3600 GPU-h charged, 750/3600 saved", sum.Sharing, sum.GPUHours)
		case share == 0 && sum.Sharing != nil:
			t.Errorf("whole jobs: sharing summary %+v, want none", sum.Sharing)
		}
	}
}

// sharingMix is a day on 16 V100s: 60 training jobs of 1, 2 or 4 whole
// GPUs and 1 to 4 hours, and 240 small inference-like or notebook jobs of
// one GPU and 10 to 60 minutes, each needing a tenth, a quarter or half of
// a GPU (share 0 keeps them whole), all arriving at random over 20 hours.
// Seeded: the same mix every time.
func sharingMix(fractions bool) []*job.Job {
	rng := rand.New(rand.NewPCG(22, 4))
	var jobs []*job.Job
	for i := range 300 {
		b := enginetest.Job(fmt.Sprintf("j%03d", i)).At(math.Round(rng.Float64() * 20 * 3600))
		if i%5 == 0 {
			b.GPUs([]int{1, 2, 4}[rng.IntN(3)]).Seconds(float64(3600 * (1 + rng.IntN(4))))
		} else {
			b.Seconds(float64(600 * (1 + rng.IntN(6))))
			if s := []float64{0.1, 0.25, 0.5}[rng.IntN(3)]; fractions {
				b.Share(s)
			}
		}
		jobs = append(jobs, b.Obj())
	}
	// Submission order.
	for i := 1; i < len(jobs); i++ {
		for k := i; k > 0 && (jobs[k].Submit < jobs[k-1].Submit); k-- {
			jobs[k], jobs[k-1] = jobs[k-1], jobs[k]
		}
	}
	return jobs
}

// TestSharingMix measures GPU sharing per policy on sharingMix: the small
// jobs as fractions, then the same jobs whole. Whatever the policy, the
// fractional run is charged fewer GPU-hours (its small jobs hold their
// parts for as long as they held whole GPUs, at most), and the saving is
// what the report says. It logs the table docs/sharing.md shows
// (go test ./sim -run TestSharingMix -v).
func TestSharingMix(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 300 jobs under four policies twice")
	}
	c := enginetest.Cluster("4x4:v100")
	var rows []string
	for _, pol := range []string{"fifo", "srtf", "tiresias", "gandiva"} {
		var sums [2]report.Summary
		for k, fractions := range []bool{false, true} {
			jobs := sharingMix(fractions)
			p, err := policy.Parse(pol, policy.Context{Jobs: jobs})
			if err != nil {
				t.Fatal(err)
			}
			run, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true}, jobs)
			if err != nil {
				t.Fatalf("%s: %v", pol, err)
			}
			sums[k] = report.Summarize(run)
			if sums[k].Finished != len(jobs) {
				t.Errorf("%s: %d of %d jobs finished", pol, sums[k].Finished, len(jobs))
			}
			charged := 0.0
			for _, j := range run.Jobs {
				charged += j.GPUSeconds / 3600
			}
			if math.Abs(sums[k].GPUHours-charged) > 1e-6 {
				t.Errorf("%s: summary charges %.3f GPU-h, the jobs %.3f", pol, sums[k].GPUHours, charged)
			}
			if s := sums[k].Sharing; fractions && (s == nil || !(s.SavedGPUHours > 0)) {
				t.Errorf("%s: sharing summary %+v; want some GPU-hours saved", pol, s)
			}
		}
		whole, shared := sums[0], sums[1]
		if !(shared.GPUHours < whole.GPUHours-1e-6) || math.Abs(whole.GPUHours-shared.GPUHours-shared.Sharing.SavedGPUHours) > 1e-6 {
			t.Errorf("%s: sharing charged %.1f GPU-h and saved %.1f, whole %.1f: want fewer, by what was saved", pol, shared.GPUHours, shared.Sharing.SavedGPUHours, whole.GPUHours)
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %.1f | %.1f | %.1f | %.0f | %.0f (%+.1f%%) | %.0f | %.0f |", pol, whole.GPUHours, shared.GPUHours,
			shared.Sharing.SavedGPUHours, whole.AvgJCT, shared.AvgJCT, 100*(shared.AvgJCT/whole.AvgJCT-1), whole.Makespan, shared.Makespan))
	}
	t.Log("\n| policy | GPU-h whole | GPU-h shared | saved | avg JCT whole (s) | avg JCT shared (s) | makespan whole (s) | shared (s) |\n|---|---|---|---|---|---|---|---|\n" + strings.Join(rows, "\n"))
}
