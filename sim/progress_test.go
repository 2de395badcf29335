package sim_test

import (
	"math"
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
	"github.com/tide-sched/tide/solver"
)

// onDemandSpecs are the registered policies (and presets) that read
// progress only on demand (engine.ProgressOnDemand) or never
// (engine.ProgressFree) and that the simulator may run lazily (no job
// agents, no deadlines needed), plus a
// few knob settings that make them read more often or elsewhere: a
// shorter lease and Gavel round, Gandiva's rotation (the paper's preset
// with it) and growing, Gandiva_fair without its trade, DRF with
// preemption (progress-free), and the elastic
// harvesting policies on the training cluster alone (rigid jobs, no job
// agents: the simulator runs them lazily). Chronus needs deadlines
// (deadlineJobs).
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
			// Those that never read progress are run lazily too: a
			// policy that says so wrongly shows here.
			free, isFree := p.(engine.ProgressFree)
			od, isOD := p.(engine.ProgressOnDemand)
			if (isFree && free.ProgressFree()) || (isOD && od.ProgressOnDemand()) {
				specs = append(specs, spec)
			}
		}
	}
	return append(specs, "themis:lease=120", "fifo-perf:round=120", "gandiva:rotate=true", "gandiva:grow=true",
		"gandiva-fair:trade=false", "aryl:loan=false", "deepboot:loan=false", "drf:preempt=true")
}

// epochSkew is a model of two GPU types whose ratio moves with a job's
// progress: on v100 a job runs its base rate times 0.5, 1.5, 2.5 or 3.5
// by the epoch it is in (told apart by where the epoch ends), on any other
// type at its base rate. A fixed speed factor (perf.SpeedFactors) would
// leave the ratio of a job's rates on two types the same at any progress,
// so a policy reading a stale progress would order the types the same.
type epochSkew struct{ perf.Model }

// Rate implements perf.Model.
func (m epochSkew) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	r, until := m.Model.Rate(j, a, p)
	if a.GPUType != "v100" || math.IsInf(until, 1) {
		return r, until
	}
	return r * (0.5 + float64(math.Float64bits(until)%4)), until
}

// deadlineJobs is jobs with a deadline each (Chronus admits by them): its
// submission plus one to four hours, by its place in the trace.
func deadlineJobs(jobs []*job.Job) []*job.Job {
	out := make([]*job.Job, len(jobs))
	for i, j := range jobs {
		c := *j
		c.Deadline = c.Submit + 3600*float64(1+i%4)
		out[i] = &c
	}
	return out
}

// TestProgressOnDemandMatches replays shipped traces under every policy
// that reads progress on demand (and those that never read it),
// lazily (the simulator advances a running
// job only when its progress is read, its event comes or a round changes
// it) and eagerly (every running job every round, its progress reported
// before each round, as before progress on demand), and requires the two
// runs' records, counters and timelines to be the same to the bit. The
// traces: Pollux's workload-6 with its epoch-wise throughput model (a job's
// rate moves with its progress) on 64 T4, once with a tiny round log (every
// running job brought up to date every few rounds), once on 32 T4 and 64
// V100 2.5 times as fast (the policies that read rates on each type), its
// first 40 jobs with deadlines under Chronus (with GLPK) on each cluster,
// and, when the shared data is there, the first 200 Philly jobs on 32 V100
// (queues, preemptions, auctions and re-plans) and on 16 K80 and 16 V100,
// rounds every 10 minutes.
func TestProgressOnDemandMatches(t *testing.T) {
	w6, m6, c6 := workload6(t)
	specs := onDemandSpecs(t, w6)
	for _, want := range []string{"fifo", "srtf", "themis", "fifo-perf", "gandiva:preset=gavel", "gandiva-fair", "allox"} {
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
	// Two GPU types, the second's speed moving with each job's epoch
	// (epochSkew): the policies that read the jobs' rates on each type
	// (Gandiva's rotation, Gandiva_fair's order of types and trade,
	// AlloX's matching) read them there, and a stale progress would order
	// the types otherwise.
	// Aryl and DeepBoot lend one type's pools (the first): they are left
	// out there.
	hetero := epochSkew{m6}
	var heteroSpecs []string
	for _, spec := range specs {
		if !strings.HasPrefix(spec, "aryl") && !strings.HasPrefix(spec, "deepboot") {
			heteroSpecs = append(heteroSpecs, spec)
		}
	}
	loads := []load{
		{name: "workload6", jobs: w6, model: m6, cluster: c6, onEvents: true, instants: 1 << 16, round: 60, specs: specs},
		{name: "workload6-tinylog", jobs: w6, model: m6, cluster: c6, instants: 3, round: 60, specs: specs},
		{name: "workload6-hetero", jobs: w6, model: hetero, cluster: buildCluster(t, "8x4:t4,16x4:v100"), onEvents: true, instants: 1 << 16, round: 60, specs: heteroSpecs},
	}
	if solver.Available() == nil {
		dl := deadlineJobs(w6[:40]) // the lease MILP over all 160 takes minutes
		loads = append(loads,
			load{name: "workload6-deadlines", jobs: dl, model: m6, cluster: c6, onEvents: true, instants: 1 << 16, round: 60, specs: []string{"chronus"}},
			load{name: "workload6-deadlines-hetero", jobs: dl, model: hetero, cluster: buildCluster(t, "8x4:t4,16x4:v100"), instants: 3, round: 60, specs: []string{"chronus"}})
	} else {
		t.Logf("chronus not run: %v", solver.Available())
	}
	if path := filepath.Join("..", "..", "shared", "data", "pollux", "philly.csv"); testing.Short() {
		t.Log("short: workload-6 only")
	} else if _, err := os.Stat(path); err != nil {
		t.Logf("%s not found, workload-6 only: %v", path, err)
	} else {
		// Rounds every 10 min: a long job keeps this slice going for
		// months. The four policies of the docs and two settings, and
		// those read through the models' rates, once more on two types.
		philly := phillyJobs(t)[:200]
		loads = append(loads, load{name: "philly200", jobs: philly, model: phillyModel, cluster: buildCluster(t, "8x4:v100"),
			onEvents: true, instants: 1 << 16, round: 600, specs: []string{"fifo", "srtf", "themis", "themis:lease=120", "fifo-perf", "gavel-fifo",
				"gandiva:preset=gavel", "gandiva-fair", "allox", "aryl:loan=false"}},
			load{name: "philly200-hetero", jobs: philly, model: perf.SpeedFactors{Base: phillyModel, Speed: map[string]float64{"k80": 0.4, "v100": 1}},
				cluster: buildCluster(t, "4x4:k80,4x4:v100"), onEvents: true, instants: 1 << 16, round: 600,
				specs: []string{"gandiva:preset=gavel", "gandiva-fair", "gandiva-fair:trade=false", "allox"}})
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
