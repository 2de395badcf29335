package engine_test

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
)

type roundClock struct{ t float64 }

func (c *roundClock) Now() float64 { return c.t }

// fixedPlan runs the same assignments every round: what is left of a round
// is the engine's own work.
type fixedPlan struct{ run []engine.Assignment }

func (fixedPlan) Name() string                            { return "fixed" }
func (f fixedPlan) Schedule(*engine.Snapshot) engine.Plan { return engine.Plan{Run: f.run} }

// BenchmarkSteadyRound runs scheduling rounds in which nothing changes on
// 1,024 GPUs with 1,024 jobs (the fixed plan runs 640 of them on 768 GPUs;
// Tiresias leaves jobs waiting too, and explains why every round), and
// reports the allocations of one round (allocs/op): 0 for the engine's own
// work (a policy returning a fixed plan), and 0 with Tiresias deciding.
//
//	go test ./engine -run '^$' -bench SteadyRound -benchtime 200x
func BenchmarkSteadyRound(b *testing.B) {
	spec, err := cluster.ParseShorthand("128x8:v100")
	if err != nil {
		b.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 30, Resize: 30}}}
	jobs := make([]*job.Job, 1024)
	for i := range jobs {
		jobs[i] = &job.Job{ID: fmt.Sprintf("j%04d", i), Submit: float64(i), GPUs: 1 + i%2*1,
			Work: 1e9, Unit: job.Seconds, Duration: 1e9}
	}
	tiresias, err := policy.Parse("tiresias", policy.Context{Jobs: jobs})
	if err != nil {
		b.Fatal(err)
	}
	var fixed fixedPlan
	for i, j := range jobs {
		if i%2 == 0 || i < 256 {
			fixed.run = append(fixed.run, engine.Assignment{Job: j.ID, GPUs: j.GPUs})
		}
	}
	for _, p := range []engine.Policy{fixed, tiresias} {
		b.Run(p.Name(), func(b *testing.B) {
			clk := &roundClock{}
			e, err := engine.New(engine.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			for _, j := range jobs {
				jc := *j
				if _, err := e.Submit(&jc); err != nil {
					b.Fatal(err)
				}
			}
			clk.t = 2000
			for r := 0; r < 3; r++ { // reach the steady state
				if _, err := e.Schedule(); err != nil {
					b.Fatal(err)
				}
				clk.t += 60
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				clk.t += 1 // well inside Tiresias' first queue change
				if _, err := e.Schedule(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
