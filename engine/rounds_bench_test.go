package engine_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/cputime"
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

// fullRounds hides a policy's engine.IncrementalPolicy: the engine hands
// it no Changed and it plans every round in full (the rounds before issue
// 19's incremental ones).
type fullRounds struct{ engine.Policy }

// BenchmarkChangedRound runs the commonest round of a large replay: one
// job ends and one arrives while every other active job keeps running, on
// 20,000 GPUs with 1,000 and with 10,000 jobs running (the queued rounds
// with 100,000 jobs too). Tiresias plans it from what changed
// (Snapshot.Changed, Plan.Keep) with the counters kept lazily
// (Config.LazyCounters), as the simulator runs it; "full" is the
// same policy made to plan every round in full. The "queued" rounds are
// the same on a cluster a tenth too small for the jobs (the GPUs of 90% of
// what they ask), so that jobs wait in every round and the greedy pass
// must choose: Tiresias plans them from its kept order (Plan.Keep with
// Plan.Stop), leaving its waiting jobs' reasons to be worked out when read
// (Plan.Explain). It reports the allocations of a round (allocs/op) and its
// CPU time (cpu-ns/op): the incremental round's cost stays flat from
// 1,000 to 10,000 jobs (up to the logarithm of the order's depth), the
// full round's grows with them.
//
//	go test ./engine -run '^$' -bench ChangedRound -benchtime 2000x
func BenchmarkChangedRound(b *testing.B) {
	build := func(shorthand string) *cluster.Cluster {
		spec, err := cluster.ParseShorthand(shorthand)
		if err != nil {
			b.Fatal(err)
		}
		c, err := spec.Build()
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	big := build("2500x8:v100")
	model := perf.Duration{}
	for _, n := range []int{1000, 10000, 100000} {
		for _, kind := range []string{"tiresias", "tiresias-full", "tiresias-quiet", "tiresias-queued", "tiresias-queued-full"} {
			full, quiet := strings.HasSuffix(kind, "-full"), kind == "tiresias-quiet"
			if n > 10000 && kind != "tiresias-queued" {
				continue // the others' figures at 10,000 jobs tell enough
			}
			c := big
			if strings.Contains(kind, "queued") {
				// The jobs ask for 1.5 GPUs each on average.
				c = build(fmt.Sprintf("%dx8:v100", n*3/2*9/10/8))
			}
			b.Run(fmt.Sprintf("%s/%djobs", kind, n), func(b *testing.B) {
				mk := func(i int, at float64) *job.Job {
					return &job.Job{ID: fmt.Sprintf("j%07d", i), Submit: at, GPUs: 1 + i%2, MinGPUs: 1 + i%2, MaxGPUs: 1 + i%2,
						Work: 1e9, Unit: job.Seconds, Duration: 1e9}
				}
				tiresias, err := policy.Parse("tiresias", policy.Context{})
				if err != nil {
					b.Fatal(err)
				}
				var p engine.Policy = tiresias
				if full {
					p = fullRounds{tiresias}
				}
				clk := &roundClock{}
				e, err := engine.New(engine.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Clock: clk,
					ForgetEnded: true, LazyCounters: true})
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := e.Submit(mk(i, 0)); err != nil {
						b.Fatal(err)
					}
				}
				clk.t = 1
				for range 3 { // everything starts, then steady rounds
					if _, err := e.Schedule(); err != nil {
						b.Fatal(err)
					}
					clk.t++
				}
				// The jobs to come, made before the clock starts.
				next := make([]*job.Job, b.N)
				for i := range next {
					next[i] = mk(n+i, clk.t+float64(i))
				}
				ends := make([]string, 0, n+b.N)
				for _, st := range e.Active() {
					ends = append(ends, st.Job.ID)
				}
				b.ReportAllocs()
				runtime.GC() // the setup's garbage is not the rounds' to collect
				cpu := cputime.Process()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if !quiet {
						if err := e.Finish(ends[i]); err != nil {
							b.Fatal(err)
						}
						if _, err := e.Submit(next[i]); err != nil {
							b.Fatal(err)
						}
						ends = append(ends, next[i].ID)
					}
					if _, err := e.Schedule(); err != nil {
						b.Fatal(err)
					}
					clk.t++
				}
				b.StopTimer()
				b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
				if got := len(e.Active()); got != n {
					b.Fatalf("%d jobs active, want %d", got, n)
				}
				if c != big {
					waiting := 0
					for _, st := range e.Active() {
						if len(st.GPUs) == 0 {
							waiting++
						}
					}
					if waiting == 0 {
						b.Fatal("no job waits: the rounds are not queued ones")
					}
					b.ReportMetric(float64(waiting), "waiting")
					if q := tiresias.(interface{ QueuedRounds() int }).QueuedRounds(); !full && q < b.N {
						b.Fatalf("%d of %d rounds planned from the kept order", q, b.N)
					}
				}
			})
		}
	}
}

// waitAll plans every round in full and runs nothing: what is left of a
// round is the engine's own work, which for a policy that reads
// Snapshot.Jobs (not an engine.IncrementalPolicy) is a pass over every
// active job.
type waitAll struct{}

func (waitAll) Name() string                          { return "wait-all" }
func (waitAll) Schedule(*engine.Snapshot) engine.Plan { return engine.Plan{} }

// BenchmarkDepartureRound runs rounds of a policy that plans every round
// in full (waitAll) with 10,000 and 100,000 jobs active, in each round
// DEPS jobs ending at spread positions of the active list (those that have
// been active longest at first, as a replay's do) and as many arriving
// after the others. It reports the CPU time of a round (cpu-ns/op) and its
// allocations (allocs/op): a round's own pass over the active jobs is its
// cost; the jobs that end must add O(1) each, not a move of the list's
// entries after them.
//
//	go test ./engine -run '^$' -bench DepartureRound -benchtime 200x
func BenchmarkDepartureRound(b *testing.B) {
	spec, err := cluster.ParseShorthand("2x8:v100")
	if err != nil {
		b.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	mk := func(i int, at float64) *job.Job {
		return &job.Job{ID: fmt.Sprintf("j%07d", i), Submit: at, GPUs: 1 + i%2, Work: 1e9, Unit: job.Seconds, Duration: 1e9}
	}
	for _, n := range []int{10000, 100000} {
		for _, deps := range []int{0, 1, 16} {
			b.Run(fmt.Sprintf("%djobs/%ddeps", n, deps), func(b *testing.B) {
				clk := &roundClock{}
				e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Policy: waitAll{}, Placer: place.Pack{}, Clock: clk,
					ForgetEnded: true, LazyCounters: true})
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := e.Submit(mk(i, 0)); err != nil {
						b.Fatal(err)
					}
				}
				clk.t = 1
				if _, err := e.Schedule(); err != nil {
					b.Fatal(err)
				}
				clk.t++
				// The jobs to come and the order in which the jobs end,
				// made before the clock starts: the jobs active now end in
				// a random order (each from a random position of the
				// list), then those that arrived, oldest first.
				next := make([]*job.Job, b.N*deps)
				for i := range next {
					next[i] = mk(n+i, clk.t+float64(i/max(deps, 1)))
				}
				ends := make([]string, 0, len(next))
				first := e.Active()
				for _, k := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
					if len(ends) == len(next) {
						break
					}
					ends = append(ends, first[k].Job.ID)
				}
				for i := 0; len(ends) < len(next); i++ {
					ends = append(ends, next[i].ID)
				}
				b.ReportAllocs()
				runtime.GC()
				cpu := cputime.Process()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for d := range deps {
						k := i*deps + d
						if err := e.Finish(ends[k]); err != nil {
							b.Fatal(err)
						}
						if _, err := e.Submit(next[k]); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := e.Schedule(); err != nil {
						b.Fatal(err)
					}
					clk.t++
				}
				b.StopTimer()
				b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
				if got := len(e.Active()); got != n {
					b.Fatalf("%d jobs active, want %d", got, n)
				}
			})
		}
	}
}
