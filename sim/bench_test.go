package sim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// reportRate records simulated events and rounds per wall second.
func reportRate(b *testing.B, run *report.Run) {
	s := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(run.Events)/s, "events/s")
	b.ReportMetric(float64(run.Events+run.Rounds)/s, "events+rounds/s")
}

// BenchmarkWorkload6 is the run the Pollux artifact's Python simulator needs
// about 6.7 s for: workload-6, 64 T4, Tiresias under the artifact's rules.
func BenchmarkWorkload6(b *testing.B) {
	jobs, m, c := workload6(b)
	var run *report.Run
	for b.Loop() {
		run = artifactRun(b, jobs, m, c)
	}
	reportRate(b, run)
}

// BenchmarkPhilly replays the 82,247-job Philly trace the Pollux artifact
// ships (../shared/data/pollux/philly.csv) on 512 nodes x 4 V100 under
// Tiresias with the paper's queues.
func BenchmarkPhilly(b *testing.B) {
	path := filepath.Join("..", "..", "shared", "data", "pollux", "philly.csv")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("%s not found (the shared data folder is absent): %v", path, err)
	}
	tr, err := trace.ReadFile(path, "", trace.Options{Sort: true})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := cluster.ParseShorthand("512x4:v100")
	if err != nil {
		b.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 30, Resize: 30}}}
	var run *report.Run
	for b.Loop() {
		p, err := policy.Parse("tiresias", policy.Context{Jobs: tr.Jobs})
		if err != nil {
			b.Fatal(err)
		}
		run, err = sim.Run(sim.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true}, tr.Jobs)
		if err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, run)
}

// BenchmarkFIFOWorkload6 is `tide sim --policy fifo`'s run (workload-6 on
// 64 T4, the Pollux profiles, the pack placer, 60 s rounds and events),
// and the same with arrivals four times denser (--arrival-scale 0.25):
// FIFO without backfill predicts the first waiting jobs' starts every
// round from the running jobs' ends (explain.KeptPredictStarts).
// cpu-ms/op is the process's CPU time per run, the figure to compare on a
// loaded machine.
func BenchmarkFIFOWorkload6(b *testing.B) {
	jobs, m, c := workload6(b)
	for _, scale := range []float64{1, 0.25} {
		b.Run(fmt.Sprintf("arrivals-x%g", scale), func(b *testing.B) {
			scaled := make([]*job.Job, len(jobs))
			for i, j := range jobs {
				cp := *j
				cp.Submit *= scale
				scaled[i] = &cp
			}
			var run *report.Run
			cpu := cputime.Process()
			for b.Loop() {
				p, err := policy.Parse("fifo", policy.Context{Jobs: scaled})
				if err != nil {
					b.Fatal(err)
				}
				run, err = sim.Run(sim.Config{Cluster: c, Model: m, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true}, scaled)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cputime.Process()-cpu)*1e3/float64(b.N), "cpu-ms/op")
			reportRate(b, run)
		})
	}
}
