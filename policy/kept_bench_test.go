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

// queuedPolicies are the policies whose rounds with a queue
// BenchmarkKeptRound's "queued" runs: those that leave their waiting jobs'
// reasons to be worked out when read (FIFO from its roster, the others
// from a copy of the round's order, explain.Queue).
var queuedPolicies = []string{"fifo", "fifo:backfill=true", "srtf", "edf", "gandiva", "themis"}

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
// jobs each. "queued" (queuedPolicies, also at 100,000 jobs) is "kept" on
// a cluster a tenth too small, so that about a tenth of the jobs wait in
// every round, and "queued-full" the same made to plan every round in full: FIFO plans such rounds from what changed, Gandiva and FIFO
// with backfill too while no job's turn ends (Gandiva's 60 s quanta end
// some every round here), the others in full (EDF from the order it keeps
// across rounds, SRTF from its waiting jobs' kept order:
// policy/classic/edf_order.go, srtf_order.go).
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
	for _, n := range []int{1000, 10000, 100000} {
		for _, name := range keptPolicies {
			if n > 10000 {
				break
			}
			for _, kind := range []string{"kept", "full", "quiet"} {
				b.Run(fmt.Sprintf("%s/%s/%djobs", name, kind, n), func(b *testing.B) {
					keptRound(b, c, model, name, kind == "full", kind == "quiet", n)
				})
			}
		}
		// A cluster a tenth too small for the jobs (they ask for 1.5
		// GPUs each on average), so that about a tenth of them wait in
		// every round.
		spec, err := cluster.ParseShorthand(fmt.Sprintf("%dx8:v100", n*3/2*9/10/8))
		if err != nil {
			b.Fatal(err)
		}
		small, err := spec.Build()
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range queuedPolicies {
			b.Run(fmt.Sprintf("%s/queued/%djobs", name, n), func(b *testing.B) {
				keptRound(b, small, model, name, false, false, n)
			})
			b.Run(fmt.Sprintf("%s/queued-full/%djobs", name, n), func(b *testing.B) {
				keptRound(b, small, model, name, true, false, n)
			})
		}
	}
}

// keptRound is one BenchmarkKeptRound case.
func keptRound(b *testing.B, c *cluster.Cluster, model perf.Model, name string, full, quiet bool, n int) {
	mk := func(i int, at float64) *job.Job {
		g := 1 + i%2
		// Remaining times differ and are scattered over submission order
		// (i*k mod 2^20 is a permutation of 0..2^20-1 for odd k), so
		// that SRTF's order is neither submission order nor its reverse,
		// both of which a sort handles in linear time.
		d := 1e9 - float64(uint32(i)*2654435761%(1<<20))
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
