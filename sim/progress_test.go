package sim_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver"
)

// declaredSpecs are the registered policies and presets among those keep
// selects that read progress only on demand (engine.ProgressOnDemand) or
// never (engine.ProgressFree), found through the registry, so a policy
// that declares either is replayed (TestProgressOnDemandMatches requires
// every one to be). Those that never read progress are run lazily too: a
// policy that says so wrongly shows there.
func declaredSpecs(t *testing.T, jobs []*job.Job, keep func(policy.Info) bool) []string {
	t.Helper()
	var specs []string
	for _, info := range policy.All() {
		if !keep(info) {
			continue
		}
		for _, spec := range append([]string{info.Name}, info.Presets...) {
			p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
			if err != nil {
				t.Logf("%s not run: %v", spec, err) // needs what the trace lacks
				continue
			}
			if declares(p) {
				specs = append(specs, spec)
			}
		}
	}
	return specs
}

// declares reports whether p says it reads progress only on demand or never.
func declares(p engine.Policy) bool {
	free, isFree := p.(engine.ProgressFree)
	od, isOD := p.(engine.ProgressOnDemand)
	return (isFree && free.ProgressFree()) || (isOD && od.ProgressOnDemand())
}

// onDemandSpecs are the registered policies (and presets) that read
// progress only on demand or never and that the simulator may run lazily
// on rigid jobs without deadlines (declaredSpecs), plus a
// few knob settings that make them read more often or elsewhere: a
// shorter lease and Gavel round, Gandiva's rotation (the paper's preset
// with it) and growing, Gandiva_fair without its trade, DRF with
// preemption (progress-free), and the elastic
// harvesting policies on the training cluster alone (rigid jobs, no job
// agents: the simulator runs them lazily), with their defaults too (no
// inference site to lend: the same runs). Chronus, EDF and the flow
// policies need deadlines (deadlineJobs), the elastic ones elastic jobs
// (elasticSpecs).
func onDemandSpecs(t *testing.T, jobs []*job.Job) []string {
	t.Helper()
	specs := declaredSpecs(t, jobs, func(info policy.Info) bool { return !info.Elastic && !info.NeedsDeadlines && !info.AdaptBatch })
	return append(specs, "themis:lease=120", "fifo-perf:round=120", "gandiva:rotate=true", "gandiva:grow=true",
		"gandiva-fair:trade=false", "aryl", "aryl:loan=false", "deepboot", "deepboot:loan=false", "drf:preempt=true")
}

// elasticSpecs are the registered elastic policies without deadlines that
// read progress only on demand or never (Optimus, AFS, Pollux), run on
// workload-6's elastic jobs without job agents (with agents the simulator
// keeps every job current whatever a policy declares). The harvesting
// policies (onDemandSpecs: on elastic jobs their knapsacks take 10 to 20 s
// a run) and tidal (deadlines and edge servers: flowSpecs) are left to
// their loads.
func elasticSpecs(t *testing.T, jobs []*job.Job) []string {
	t.Helper()
	return declaredSpecs(t, jobs, func(info policy.Info) bool {
		return info.Elastic && !info.NeedsDeadlines && info.Name != "tidal" && info.Name != "aryl" && info.Name != "deepboot"
	})
}

// onDemandOnly is specs less those that never read progress (Pollux,
// EDF: they pull nothing, so a tiny round log tells nothing more of them).
func onDemandOnly(t *testing.T, specs []string) []string {
	t.Helper()
	var out []string
	for _, spec := range specs {
		p, err := policy.Parse(spec, policy.Context{})
		if err != nil {
			t.Fatal(err)
		}
		if free, ok := p.(engine.ProgressFree); !ok || !free.ProgressFree() {
			out = append(out, spec)
		}
	}
	return out
}

// flowSpecs are the registered policies that need deadlines and read
// progress only on demand or never, but GLPK's (Chronus: its own loads),
// and tidal (elastic, deadline jobs planned by EdgeFlow), plus the flow
// policies' knobs that read elsewhere: reservations from the deadline
// back, spare GPUs by GPU-time (EdgeFlow's preset offloads only the jobs
// that miss).
func flowSpecs(t *testing.T, jobs []*job.Job) []string {
	t.Helper()
	specs := declaredSpecs(t, jobs, func(info policy.Info) bool {
		return (info.NeedsDeadlines && !info.NeedsSolver) || info.Name == "tidal"
	})
	return append(specs, "elasticflow:reserve=late", "elasticflow:spare=gputime")
}

// edgeCluster is a cloud site of 2 nodes of 4 T4 GPUs and an edge site of
// 4 servers of 2 V100 GPUs (TestProgressOnDemandMatches runs them at 0.8
// of a T4's speed): on mixedDeadlines(workload-6's first 60 jobs) EdgeFlow
// meets 23 deadlines there, ElasticFlow 22, so jobs run on the edge.
func edgeCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	spec := cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "cloud", Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 4, GPU: "t4"}}},
		{Name: "edge", Kind: cluster.SiteEdge, Nodes: []cluster.NodeSpec{{Count: 4, GPUs: 2, GPU: "v100"}}},
	}}
	c, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
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

// mixedDeadlines is deadlineJobs with every third job best-effort (no
// deadline): the flow policies hand those the spare GPUs by their
// remaining times, and they keep the cluster busy while tidal holds a
// job (on an idle cluster with nothing to come tidal holds a job it
// cannot admit until the run is declared stuck: every third job
// best-effort avoids that).
func mixedDeadlines(jobs []*job.Job) []*job.Job {
	out := deadlineJobs(jobs)
	for i, j := range out {
		if i%3 == 2 {
			j.Deadline = 0
		}
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
	// Elastic jobs without job agents (Optimus and AFS read remaining
	// times at several counts; Pollux reads none), and the deadline
	// policies on a cloud and an edge site, the edge servers half as fast
	// (EdgeFlow's offloading and admission read the jobs' rates there),
	// workload-6's rates moving with each job's epoch. With 3 instants
	// only the policies that pull, less tidal's preset without deadlines
	// (its knapsacks take 25 s a run there; the full log has it).
	// The jobs are elastic as tide sim replays them for these policies
	// (assemble.Inputs.JobsFor: 1 GPU up to the cluster's, or what the
	// batch allows), and the deadline jobs fit the largest site.
	dl := deadlineJobs(w6[:40])
	edge, ec, c8 := perf.Scaled{Model: m6, Type: "v100", Ref: "t4", Lambda: 0.8}, edgeCluster(t), buildCluster(t, "8x4:t4")
	el := policy.Info{Elastic: true}
	loads = append(loads,
		load{name: "workload6-elastic", jobs: (&assemble.Inputs{Jobs: w6[:80], Cluster: c6, Model: m6}).JobsFor(el), model: m6, cluster: c6,
			onEvents: true, instants: 1 << 16, round: 60, specs: elasticSpecs(t, w6)},
		load{name: "workload6-elastic-tinylog", jobs: (&assemble.Inputs{Jobs: w6[:60], Cluster: c8, Model: m6}).JobsFor(el), model: m6, cluster: c8,
			instants: 3, round: 60, specs: onDemandOnly(t, elasticSpecs(t, w6))})
	mix := (&assemble.Inputs{Jobs: mixedDeadlines(w6[:60]), Cluster: ec, Model: edge, CapToSite: true}).JobsFor(el)
	loads = append(loads,
		load{name: "workload6-deadlines-edge", jobs: mix, model: edge, cluster: ec, onEvents: true, instants: 1 << 16, round: 60, specs: flowSpecs(t, mix)},
		load{name: "workload6-deadlines-edge-tinylog", jobs: mix, model: edge, cluster: ec, instants: 3, round: 60,
			specs: onDemandOnly(t, slices.DeleteFunc(flowSpecs(t, mix), func(spec string) bool { return spec == "tidal:deadlines=false" }))})
	if solver.Available() == nil {
		// The lease MILP over all 160 takes minutes: 40 jobs (dl).
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
	// Every registered policy and preset that declares either is replayed
	// on some load (those needing GLPK where it is there).
	ran := map[string]bool{}
	for _, l := range loads {
		for _, spec := range l.specs {
			ran[spec] = true
		}
	}
	for _, spec := range declaredSpecs(t, dl, func(info policy.Info) bool { return !info.NeedsSolver || solver.Available() == nil }) {
		if !ran[spec] {
			t.Errorf("%s reads progress on demand or never, and no load replays it", spec)
		}
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
