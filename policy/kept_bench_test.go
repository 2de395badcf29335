package policy_test

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// keptPolicies are the policies that plan rounds from what changed
// (issue 19; Tiresias is engine.BenchmarkChangedRound's).
var keptPolicies = []string{"fifo", "srtf", "edf", "gandiva", "themis", "fifo-perf"}

// BenchmarkKeptRound runs, for every policy that plans rounds from what
// changed, the commonest round of a large replay (as
// engine.BenchmarkChangedRound does for Tiresias): one job ends and one
// arrives, one second after the last round, on 20,000 GPUs with 1,000 and
// with 10,000 jobs active, as the simulator runs it (lazy counters).
// "kept" is the policy as is, "full" the same policy made to plan every
// round in full, "quiet" the policy as is in rounds where nothing changes
// (no job ends or arrives). It reports the allocations of a round (allocs/op) and
// its CPU time (cpu-ns/op). Every job fits, so FIFO, SRTF, EDF, Gandiva and
// Themis plan every such round from what changed; fifo-perf re-plans in
// full every 360 s (one round in 360 here) and its arrivals wait for an
// allocation (up to 1,920 s), so its rounds explain up to ~1,900 waiting
// jobs each. "queued" (FIFO) is "kept" on a cluster a tenth too small, so
// that about a tenth of the jobs wait in every round.
//
//	go test ./policy -run '^$' -bench KeptRound -benchtime 2000x
func BenchmarkKeptRound(b *testing.B) {
	spec, err := cluster.ParseShorthand("2500x8:v100")
	if err != nil {
		b.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	model := perf.Duration{}
	for _, n := range []int{1000, 10000} {
		for _, name := range keptPolicies {
			for _, kind := range []string{"kept", "full", "quiet", "queued"} {
				c := c
				if kind == "queued" {
					if name != "fifo" {
						continue // the others plan their congested rounds in full
					}
					// A cluster a tenth too small for the jobs (they ask
					// for 1.5 GPUs each on average), so that about a tenth
					// of them wait in every round.
					spec, err := cluster.ParseShorthand(fmt.Sprintf("%dx8:v100", n*3/2*9/10/8))
					if err != nil {
						b.Fatal(err)
					}
					if c, err = spec.Build(); err != nil {
						b.Fatal(err)
					}
				}
				b.Run(fmt.Sprintf("%s/%s/%djobs", name, kind, n), func(b *testing.B) {
					keptRound(b, c, model, name, kind == "full", kind == "quiet", n)
				})
			}
		}
	}
}

// keptRound is one BenchmarkKeptRound case.
func keptRound(b *testing.B, c *cluster.Cluster, model perf.Model, name string, full, quiet bool, n int) {
	mk := func(i int, at float64) *job.Job {
		g := 1 + i%2
		d := 1e9 - float64(i) // remaining times differ (SRTF's order)
		return &job.Job{ID: fmt.Sprintf("j%07d", i), Submit: at, GPUs: g, MinGPUs: g, MaxGPUs: g,
			Work: d, Unit: job.Seconds, Duration: d, Deadline: 1e10 + float64(i%97)}
	}
	p, err := policy.Parse(name, policy.Context{})
	if err != nil {
		b.Fatal(err)
	}
	if full {
		p = policytest.FullOnly{Policy: p}
	}
	clk := &benchClock{}
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
	next := make([]*job.Job, b.N) // the jobs to come, made before the clock starts
	for i := range next {
		next[i] = mk(n+i, clk.t+float64(i))
	}
	ends := make([]string, 0, n+b.N)
	for _, st := range e.Active() {
		ends = append(ends, st.Job.ID)
	}
	b.ReportAllocs()
	cpu := cputime.Process()
	b.ResetTimer()
	for i := range b.N {
		if quiet {
			if _, err := e.Schedule(); err != nil {
				b.Fatal(err)
			}
			clk.t++
			continue
		}
		if st := e.Job(ends[i]); st != nil && !st.State.Terminal() {
			if err := e.Finish(ends[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.Submit(next[i]); err != nil {
			b.Fatal(err)
		}
		ends = append(ends, next[i].ID)
		if _, err := e.Schedule(); err != nil {
			b.Fatal(err)
		}
		clk.t++
	}
	b.StopTimer()
	b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
	if k, ok := p.(interface{ KeptRounds() int }); ok {
		b.ReportMetric(float64(k.KeptRounds())/float64(b.N+3), "kept/round")
	}
}
