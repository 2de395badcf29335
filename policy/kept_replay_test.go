package policy_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// TestKeptReplaysMatchFull replays random traces in the simulator under
// every policy that plans rounds from what changed, as is (Changed,
// Plan.Keep, the lazy counters and, where the policy never reads progress,
// the lazy advance) and behind a wrapper that makes it plan every round in
// full: every job's record (times, GPU-seconds, reason, queue position,
// predicted start), the timeline and the run's counters must be the same,
// bit for bit. The traces mix quiet stretches with bursts that overfill
// the cluster, jobs arriving at one instant, short and long jobs.
func TestKeptReplaysMatchFull(t *testing.T) {
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30, Resize: 30}}}
	specs := append([]string{"fifo:backfill=true", "gandiva:migrate=false", "themis:lease=120", "fifo-perf:round=120"}, keptPolicies...)
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x19))
		nodes := 2 + r.IntN(5)
		spec, err := cluster.ParseShorthand(fmt.Sprintf("%dx4:v100", nodes))
		if err != nil {
			t.Fatal(err)
		}
		c, err := spec.Build()
		if err != nil {
			t.Fatal(err)
		}
		var jobs []*job.Job
		now := 0.0
		for i := range 40 + r.IntN(60) {
			switch r.IntN(10) {
			case 0: // at the same instant as the last
			case 1, 2:
				now += float64(r.IntN(20000))
			default:
				now += float64(r.IntN(900))
			}
			g := []int{1, 1, 1, 2, 2, 4, 8}[r.IntN(7)]
			if g > 4*nodes {
				g = 1
			}
			d := float64(30 + r.IntN(4000))
			jobs = append(jobs, &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d, Deadline: now + float64(r.IntN(20000))})
		}
		for _, name := range specs {
			run := func(wrap bool) (*report.Run, int) {
				p, err := policy.Parse(name, policy.Context{Jobs: jobs})
				if err != nil {
					t.Fatal(err)
				}
				pol := p
				if wrap {
					pol = policytest.FullOnly{Policy: p}
				}
				out, err := sim.Run(sim.Config{Cluster: c, Model: model, Policy: pol, Placer: place.Pack{},
					Round: 60, OnEvents: seed%3 != 0, Seed: 1}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				kept := 0
				if k, ok := p.(interface{ KeptRounds() int }); ok {
					kept = k.KeptRounds()
				}
				return out, kept
			}
			want, _ := run(true)
			got, kept := run(false)
			if kept == 0 {
				t.Errorf("seed %d, %s: no round planned from what changed", seed, name)
			}
			for i := range want.Jobs {
				if !reflect.DeepEqual(got.Jobs[i], want.Jobs[i]) {
					t.Fatalf("seed %d, %s: job %d\n kept %+v\n full %+v", seed, name, i, got.Jobs[i], want.Jobs[i])
				}
			}
			if !reflect.DeepEqual(got.Timeline, want.Timeline) || got.Events != want.Events || got.Rounds != want.Rounds {
				t.Fatalf("seed %d, %s: timeline or counters differ (%d/%d events, %d/%d rounds)",
					seed, name, got.Events, want.Events, got.Rounds, want.Rounds)
			}
		}
	}
}
