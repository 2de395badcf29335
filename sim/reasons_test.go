package sim_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// TestLazyReasonsMatchFull replays random traces with long queues (bursts
// on a few nodes, jobs that take the whole cluster, after which many start
// at once) under FIFO (with and without backfill), Tiresias, fifo-perf,
// SRTF, EDF, Gandiva and Themis twice: as is, planning from what changed
// and leaving most waiting jobs' reasons to be worked out when read
// (engine.Plan.Explain), and behind a wrapper that
// makes the policy plan every round in full, writing every reason. The
// simulator records each job's reason as it starts and at the end
// (Status.WaitReason): every record, reasons, queue positions and
// predicted starts included, must be the same.
func TestLazyReasonsMatchFull(t *testing.T) {
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30}}}
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x19e))
		nodes := 5 + r.IntN(4)
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", nodes))
		var jobs []*job.Job
		now := 0.0
		for i := range 150 + r.IntN(100) {
			if r.IntN(60) == 0 {
				now += float64(r.IntN(20000)) // a quiet stretch
			} else if r.IntN(4) == 0 {
				now += float64(r.IntN(300))
			}
			g := []int{1, 1, 1, 2, 2, 4}[r.IntN(6)]
			if r.IntN(25) == 0 {
				g = 4 * nodes // the whole cluster: the jobs behind it start at once when it ends
			}
			d := float64(30 + r.IntN(3000))
			j := &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d}
			if r.IntN(3) == 0 {
				j.Deadline = now + float64(r.IntN(20000)) // EDF's order
			}
			jobs = append(jobs, j)
		}
		for _, spec := range []string{"fifo", "tiresias", "fifo-perf", "fifo:backfill=true", "srtf", "edf", "gandiva", "gandiva:quantum=600", "themis"} {
			lockstep(t, fmt.Sprintf("seed %d, %s", seed, spec), spec, jobs,
				sim.Config{Cluster: c, Model: model, Placer: place.Pack{}, Round: 60, Seed: 1}, nil)
		}
	}
}

var _ engine.Policy = full{}

// lockstep replays jobs under the policy spec names twice with cfg (its
// Policy set each time): as is, and behind wrap (full{} when nil), which
// must hide whatever lets the policy leave reasons to be worked out when
// read. It fails t where the two runs' records (withReasons: every job's
// reason, queue position and predicted start, and the timeline) differ,
// and returns the first run's.
func lockstep(t *testing.T, what, spec string, jobs []*job.Job, cfg sim.Config, wrap func(engine.Policy) engine.Policy) string {
	t.Helper()
	if wrap == nil {
		wrap = func(p engine.Policy) engine.Policy { return full{p} }
	}
	run := func(wrapped bool) string {
		p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		if wrapped {
			p = wrap(p)
		}
		cfg.Policy = p
		out, err := sim.Run(cfg, jobs)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return withReasons(out)
	}
	got := run(false)
	sameLines(t, what, got, run(true))
	return got
}
