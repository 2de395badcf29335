package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// onDemandSpecs are the registered policies (and presets) that read
// progress only on demand (engine.ProgressOnDemand) and that the
// simulator may run lazily (no job agents, no deadlines needed), plus a
// few knob settings that make them read more often.
func onDemandSpecs(t *testing.T, jobs []*job.Job) []string {
	t.Helper()
	var specs []string
	for _, info := range policy.All() {
		if info.Elastic || info.NeedsDeadlines || info.AdaptBatch {
			continue
		}
		for _, spec := range append([]string{info.Name}, info.Presets...) {
			p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
			if err != nil {
				t.Logf("%s not run: %v", spec, err) // needs what workload-6 lacks
				continue
			}
			if free, ok := p.(engine.ProgressFree); ok && free.ProgressFree() {
				continue // never reads progress: TestLazyAdvanceMatches
			}
			if od, ok := p.(engine.ProgressOnDemand); ok && od.ProgressOnDemand() {
				specs = append(specs, spec)
			}
		}
	}
	return append(specs, "themis:lease=120", "fifo-perf:round=120")
}

// TestProgressOnDemandMatches replays shipped traces under every policy
// that reads progress on demand, lazily (the simulator advances a running
// job only when its progress is read, its event comes or a round changes
// it) and eagerly (every running job every round, its progress reported
// before each round, as before progress on demand), and requires the two
// runs' records, counters and timelines to be the same to the bit. The
// traces: Pollux's workload-6 with its epoch-wise throughput model (a job's
// rate moves with its progress) on 64 T4, once with a tiny round log (every
// running job brought up to date every few rounds), and, when the shared
// data is there, the first 200 Philly jobs on 32 V100 (queues, preemptions,
// auctions and re-plans), rounds every 10 minutes.
func TestProgressOnDemandMatches(t *testing.T) {
	w6, m6, c6 := workload6(t)
	specs := onDemandSpecs(t, w6)
	for _, want := range []string{"fifo", "srtf", "themis", "fifo-perf"} {
		if !strings.Contains(","+strings.Join(specs, ",")+",", ","+want+",") {
			t.Fatalf("%s does not read progress on demand (specs %v)", want, specs)
		}
	}
	type load struct {
		name     string
		jobs     []*job.Job
		model    perf.Model
		cluster  *cluster.Cluster
		onEvents bool
		instants int
		round    float64
		specs    []string
	}
	loads := []load{
		{name: "workload6", jobs: w6, model: m6, cluster: c6, onEvents: true, instants: 1 << 16, round: 60, specs: specs},
		{name: "workload6-tinylog", jobs: w6, model: m6, cluster: c6, instants: 3, round: 60, specs: specs},
	}
	if path := filepath.Join("..", "..", "shared", "data", "pollux", "philly.csv"); testing.Short() {
		t.Log("short: workload-6 only")
	} else if _, err := os.Stat(path); err != nil {
		t.Logf("%s not found, workload-6 only: %v", path, err)
	} else {
		// Rounds every 10 min: a long job keeps this slice going for
		// months. The four policies of the docs and two settings.
		loads = append(loads, load{name: "philly200", jobs: phillyJobs(t)[:200], model: phillyModel, cluster: buildCluster(t, "8x4:v100"),
			onEvents: true, instants: 1 << 16, round: 600, specs: []string{"fifo", "srtf", "themis", "themis:lease=120", "fifo-perf", "gavel-fifo"}})
	}
	for _, l := range loads {
		restore := sim.SetMaxInstants(l.instants)
		pulled := 0
		for _, spec := range l.specs {
			cfg := func() sim.Config {
				p, err := policy.Parse(spec, policy.Context{Jobs: l.jobs})
				if err != nil {
					t.Fatal(err)
				}
				return sim.Config{Cluster: l.cluster, Model: l.model, Policy: p, Placer: place.Pack{}, Round: l.round, OnEvents: l.onEvents, Seed: 1}
			}
			lazy, stats, err := sim.RunStats(cfg(), l.jobs)
			if err != nil {
				t.Fatalf("%s, %s: %v", l.name, spec, err)
			}
			eager, err := sim.RunEager(cfg(), l.jobs)
			if err != nil {
				t.Fatalf("%s, %s: %v", l.name, spec, err)
			}
			if stats.LazyRounds == 0 {
				t.Fatalf("%s, %s: no round left a running job behind: the replay tells nothing", l.name, spec)
			}
			pulled += stats.Pulls
			t.Logf("%s, %s: %d rounds, %d lazily, %d running jobs brought up to date by a read", l.name, spec, lazy.Rounds, stats.LazyRounds, stats.Pulls)
			sameRuns(t, l.name+", "+spec, lazy, eager)
		}
		restore()
		if pulled == 0 {
			t.Fatalf("%s: no policy read a running job's progress: the replays do not test the reads", l.name)
		}
	}
}
