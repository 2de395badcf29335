package sim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver"
)

// TestLazyReasonsMatchFullChronus is TestLazyReasonsMatchFull for
// Chronus, which leaves its waiting jobs' reasons to be worked out when
// read in every round (engine.ExplainsWhenRead, explain.Queue with each
// job's class): random traces of strict-deadline jobs (some too tight to
// admit, some that lose their deadline while they wait) and best-effort
// ones, in bursts that overfill the cluster, under Chronus as is and
// behind full{}, which hides ExplainsWhenRead so that every reason is
// written. Every job's record (reason, queue position, predicted start)
// must be the same. chronus:decline=true declines the jobs it cannot
// admit: its rounds that decline are explained in full either way.
func TestLazyReasonsMatchFullChronus(t *testing.T) {
	if err := solver.Available(); err != nil {
		t.Skipf("GLPK missing: %v", err)
	}
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30}}}
	seen := reasonKinds{"waits; admitted (deadline": 0, "waits; not admitted": 0, "waits; can no longer meet": 0, "waits; best effort": 0, "preempted; ": 0}
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 0x19c))
		nodes := 3 + r.IntN(3)
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", nodes))
		var jobs []*job.Job
		now := 0.0
		for i := range 60 + r.IntN(40) {
			switch r.IntN(10) {
			case 0: // a burst: several at once
			case 1:
				now += float64(r.IntN(8000)) // a quiet stretch
			default:
				now += float64(r.IntN(200))
			}
			g := []int{1, 1, 2, 2, 4, 8}[r.IntN(6)]
			d := float64(60 + r.IntN(2400))
			j := &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d}
			if r.IntN(4) != 0 {
				// Strict deadlines from hopeless (less than its duration) to loose.
				j.Deadline = now + d*(0.8+3*r.Float64())
			}
			jobs = append(jobs, j)
		}
		for _, spec := range []string{"chronus:horizon=10:maxjobs=5", "chronus:horizon=10:maxjobs=5:decline=true", "chronus:horizon=10:maxjobs=5:objective=maximize"} {
			got := lockstep(t, fmt.Sprintf("seed %d, %s", seed, spec), spec, jobs, sim.Config{Cluster: c, Model: model,
				Placer: place.Pack{}, Round: 60, OnEvents: seed%2 == 1, Seed: 1}, nil)
			seen.count(got)
		}
	}
	seen.need(t, "waits; admitted (deadline", "waits; not admitted", "waits; can no longer meet", "waits; best effort", "preempted; ")
}

// TestLazyReasonsMatchFullDeepBoot is the same for DeepBoot (explain.Waits
// with each waiting job's restart factor) and Aryl, which writes its
// reasons in full, on a training site and an inference site whose load
// changes at random: idle inference GPUs are lent to training jobs
// (elastic, sublinear speedups, so the knapsack shrinks and preempts) and
// reclaimed, between rounds, when inference takes them back. The wrapper
// forwards the policy's reclaim costs (fullReclaim).
func TestLazyReasonsMatchFullDeepBoot(t *testing.T) {
	model := sqrtModel{perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30, Resize: 5}}}}
	seen := reasonKinds{"waits; restart factor": 0, "preempted; restart factor": 0, "waits; remaining": 0}
	for seed := range 5 {
		r := rand.New(rand.NewPCG(uint64(seed), 0xdb))
		c := enginetest.MultiSite(2+r.IntN(2), 4, 0, 1+r.IntN(2))
		var changes []capacity.Change
		infer := c.Sites()[len(c.Sites())-1]
		for tm := 0.0; tm < 30000; tm += float64(60 + r.IntN(1200)) {
			changes = append(changes, capacity.Change{T: tm, Site: infer.Name, Available: -1, Inference: r.IntN(infer.GPUs + 1)})
		}
		changes = append(changes, capacity.Change{T: 30000, Site: infer.Name, Available: -1, Inference: 0})
		var jobs []*job.Job
		now := 0.0
		for i := range 50 + r.IntN(40) {
			switch r.IntN(8) {
			case 0:
			case 1:
				now += float64(r.IntN(5000))
			default:
				now += float64(r.IntN(300))
			}
			lo := 1 + r.IntN(2)
			hi := lo + r.IntN(6)
			d := float64(60 + r.IntN(3000))
			jobs = append(jobs, &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: lo, MinGPUs: lo, MaxGPUs: hi,
				Work: d, Unit: job.Seconds, Duration: d})
		}
		for _, spec := range []string{"deepboot", "deepboot:loan=false", "deepboot:restart_penalty=300", "aryl"} {
			got := lockstep(t, fmt.Sprintf("seed %d, %s", seed, spec), spec, jobs, sim.Config{Cluster: c, Model: model,
				Placer: place.Pack{}, Round: 60, OnEvents: seed%2 == 0, Seed: 1, Sites: &sim.Sites{Changes: changes}},
				func(p engine.Policy) engine.Policy { return fullReclaim{full{p}, p.(engine.ReclaimCoster)} })
			seen.count(got)
		}
	}
	seen.need(t, "waits; restart factor", "preempted; restart factor", "waits; remaining")
}

// reasonKinds counts the records whose reason starts with each prefix
// (withReasons' lines): the traces must give every kind of reason.
type reasonKinds map[string]int

func (k reasonKinds) count(text string) {
	for _, line := range strings.Split(text, "\n") {
		if _, rest, ok := strings.Cut(line, " \""); ok {
			for p := range k {
				if strings.HasPrefix(rest, p) {
					k[p]++
				}
			}
		}
	}
}

// need fails t unless a record's reason started with each prefix.
func (k reasonKinds) need(t *testing.T, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		t.Logf("%d records: %q", k[p], p)
		if k[p] == 0 {
			t.Errorf("no job's record says %q: the traces do not exercise it", p)
		}
	}
}

// fullReclaim is full{} that still prices reclaims as its policy does
// (engine.ReclaimCoster): the simulator asks it which jobs inference takes
// GPUs back from, a decision, not a reason.
type fullReclaim struct {
	full
	rc engine.ReclaimCoster
}

func (f fullReclaim) ReclaimCost(s *engine.Snapshot, st *engine.Status) float64 {
	return f.rc.ReclaimCost(s, st)
}

// sqrtModel is the duration model with sublinear speedups: a job runs
// sqrt(n/GPUs) times as fast on n GPUs as on its requested GPUs.
type sqrtModel struct{ perf.Duration }

func (m sqrtModel) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	r, until := m.Duration.Rate(j, a, p)
	return math.Sqrt(r), until
}

var _ engine.Policy = full{}
