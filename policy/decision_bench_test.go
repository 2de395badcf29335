package policy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/trace"
)

// BenchmarkDecision times one scheduling decision (Policy.Schedule on a
// snapshot) of every registered policy at two sizes: 1,000 GPUs with 1,000
// active jobs and 10,000 GPUs with 5,000 (docs/scale.md). The jobs are
// workload-6's, repeated, with the Pollux profiles as the model and a
// deadline 4 h after submission; a FIFO round first puts the cluster in a
// busy state (some jobs running, the rest waiting), then the policy runs two
// rounds of its own before the timed one, so that its state (queues,
// leases, rounds) is warm. It reports the decision's wall time as ns/op and,
// apart, the time spent inside the LP/MILP solver as solver-ms/op.
//
//	go test ./policy -run '^$' -bench Decision -benchtime 1x -timeout 2h
func BenchmarkDecision(b *testing.B) {
	for _, size := range []struct{ gpus, jobs int }{{1000, 1000}, {10000, 5000}} {
		for _, info := range policy.All() {
			name := fmt.Sprintf("%dgpus-%djobs/%s", size.gpus, size.jobs, info.Name)
			b.Run(name, func(b *testing.B) {
				if info.NeedsSolver {
					if err := solver.Available(); err != nil {
						b.Skipf("GLPK missing: %v", err)
					}
				}
				benchDecision(b, info, size.gpus, size.jobs)
			})
		}
	}
}

type benchClock struct{ t float64 }

func (c *benchClock) Now() float64 { return c.t }

// switchPolicy lets the benchmark change the engine's policy between rounds.
type switchPolicy struct {
	p       engine.Policy
	elapsed time.Duration // time inside the last Schedule
}

func (s *switchPolicy) Name() string { return s.p.Name() }
func (s *switchPolicy) Schedule(snap *engine.Snapshot) engine.Plan {
	start := time.Now()
	plan := s.p.Schedule(snap)
	s.elapsed = time.Since(start)
	return plan
}

func benchDecision(b *testing.B, info policy.Info, gpus, n int) {
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := trace.Read(f, data.DefaultTrace, trace.Pollux, trace.Options{})
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	m, err := pollux.Load(data.FS, data.ProfilesDir)
	if err != nil {
		b.Fatal(err)
	}
	spec, err := cluster.ParseShorthand(fmt.Sprintf("%dx4:t4", gpus/4))
	if err != nil {
		b.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]*job.Job, n)
	for i := range jobs {
		j := *tr.Jobs[i%len(tr.Jobs)]
		j.ID = fmt.Sprintf("j%05d", i)
		j.Submit = float64(i)
		j.Deadline = j.Submit + 4*3600
		jobs[i] = &j
	}
	p, err := policy.Parse(info.Name, policy.Context{Jobs: jobs})
	if err != nil {
		b.Fatal(err)
	}
	fifo, err := policy.Parse("fifo:backfill=true", policy.Context{Jobs: jobs})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		clk := &benchClock{}
		sw := &switchPolicy{p: fifo}
		e, err := engine.New(engine.Config{Cluster: c, Model: m, Policy: sw, Placer: place.Pack{}, Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range jobs {
			jc := *j
			if _, err := e.Submit(&jc); err != nil {
				b.Fatal(err)
			}
		}
		clk.t = float64(n)
		if _, err := e.Schedule(); err != nil {
			b.Fatal(err)
		}
		sw.p = p
		for r := 0; r < 2; r++ {
			clk.t += 60
			if _, err := e.Schedule(); err != nil {
				b.Fatal(err)
			}
		}
		clk.t += 60
		solved := solver.SolveTime()
		b.StartTimer()
		if _, err := e.Schedule(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(sw.elapsed.Nanoseconds()), "decide-ns/op")
		b.ReportMetric(float64(solver.SolveTime()-solved)/1e6, "solver-ms/op")
	}
}
