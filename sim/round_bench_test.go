package sim

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
)

// BenchmarkProgressRound is one scheduling round of the simulator (the
// running jobs advanced, the engine's round, the policy's decision) with n
// one-GPU jobs running on n GPUs and nothing changing but the clock, under
// the policies that read progress, eager (every running job advanced and
// its progress reported before every round, as before progress on demand)
// and lazy (progress on demand: a job is advanced when its progress is
// read). "+wait" adds a 4-GPU job that cannot start (the cluster is full)
// and would run longest: FIFO then predicts its start from the running
// jobs' ends (each computed once per launch), SRTF plans every round in
// full and so reads every running job's remaining time. pulls/op is the
// running jobs a round's reads brought up to date. The rounds are 60 s
// apart; 20 rounds are run before timing (fifo-perf re-plans every 360 s),
// more while jobs have yet to start.
// Gandiva with Gavel's preset rotates types every round and Gandiva_fair
// plans every round; on one GPU type neither reads a rate that moves with
// progress. AlloX and DRF match or fill for the waiting job; Aryl orders
// every job by its remaining time, every round; Chronus (with GLPK; the
// jobs have no deadline, so all are best-effort) weighs every job's.
// ElasticFlow reads every job's remaining work and rates (no deadlines
// here: all take spare GPUs), AFS every job's remaining time at its
// minimum; Optimus, with every job at its maximum of one GPU, none.
//
//	go test ./sim -run '^$' -bench ProgressRound -benchtime 300x
func BenchmarkProgressRound(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		c := enginetest.Cluster(fmt.Sprintf("%dx4:v100", n/4))
		for _, spec := range []string{"fifo", "fifo+wait", "srtf", "srtf+wait", "themis", "fifo-perf",
			"gandiva:preset=gavel", "gandiva-fair", "allox+wait", "drf+wait", "aryl:loan=false", "chronus",
			"elasticflow", "afs", "optimus"} {
			name, wait := spec, false
			if len(spec) > 5 && spec[len(spec)-5:] == "+wait" {
				name, wait = spec[:len(spec)-5], true
			}
			jobs := make([]*job.Job, n, n+1)
			for i := range jobs {
				w := 1e9 + float64(i)
				jobs[i] = &job.Job{ID: fmt.Sprintf("j%05d", i), GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: w, Unit: job.Seconds, Duration: w}
			}
			if wait {
				jobs = append(jobs, &job.Job{ID: "wait", Submit: 1, GPUs: 4, MinGPUs: 4, MaxGPUs: 4, Work: 1e10, Unit: job.Seconds, Duration: 1e10})
			}
			for _, eager := range []bool{true, false} {
				mode := "lazy"
				if eager {
					mode = "eager"
				}
				b.Run(fmt.Sprintf("%s/%djobs/%s", spec, n, mode), func(b *testing.B) {
					p, err := policy.Parse(name, policy.Context{Jobs: jobs})
					if err != nil {
						b.Fatal(err)
					}
					s, err := newSim(Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Round: 60}, jobs, eager)
					if err != nil {
						b.Fatal(err)
					}
					t := 0.0
					round := func() {
						s.clk.t = t
						if err := s.schedule(t); err != nil {
							b.Fatal(err)
						}
						t += 60
					}
					for i := range n {
						if err := s.arrive(i); err != nil {
							b.Fatal(err)
						}
					}
					round()
					if wait {
						if err := s.arrive(n); err != nil {
							b.Fatal(err)
						}
					}
					// AlloX starts at most its window (256) a round.
					for i := 0; i < 20 || (s.nrun < n && i < 100); i++ {
						round()
					}
					if s.nrun != n {
						b.Fatalf("%d jobs running, want %d", s.nrun, n)
					}
					if lazy := s.lazyOK(); lazy == eager {
						b.Fatalf("lazy rounds %v in the %s run", lazy, mode)
					}
					pulls, cpu := s.pulls, cputime.Process()
					b.ReportAllocs()
					for b.Loop() {
						round()
					}
					b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(s.pulls-pulls)/float64(b.N), "pulls/op")
					if s.nrun != n {
						b.Fatalf("%d jobs running after the rounds, want %d", s.nrun, n)
					}
				})
			}
		}
	}
}
