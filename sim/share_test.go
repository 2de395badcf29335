package sim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// pairTable: on one V100, A runs at 10 it/s alone and B at 5; sharing a GPU,
// A gets 6 and B 3. C has no measured pair with anyone.
const pairTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 3.0], "('A', 1)": [5.0, 5.0]},
 "('B', 1)": {"null": 5.0, "('B', 1)": [2.0, 2.0]},
 "('C', 1)": {"null": 4.0}
}}`

func pairModel(t *testing.T, resize float64) *table.Gavel {
	t.Helper()
	g, err := table.ParseGavel("pairs.json", []byte(pairTable))
	if err != nil {
		t.Fatal(err)
	}
	g.Cost.Default = perf.Costs{Resize: resize}
	return g
}

func gavelJob(id, model string, iters float64) *job.Job {
	return &job.Job{ID: id, Model: model, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: iters, Unit: job.Iterations}
}

type planAt func(s *engine.Snapshot) engine.Plan

func (planAt) Name() string                              { return "plan-at" }
func (f planAt) Schedule(s *engine.Snapshot) engine.Plan { return f(s) }

func pairOf(a, b string) []engine.Assignment {
	return []engine.Assignment{{Job: a, GPUs: 1, PackWith: b}, {Job: b, GPUs: 1, PackWith: a}}
}

// activeIDs is the set of jobs in a snapshot.
func activeIDs(s *engine.Snapshot) map[string]bool {
	ids := map[string]bool{}
	for _, st := range s.Jobs {
		ids[st.Job.ID] = true
	}
	return ids
}

// keep filters run to the jobs still active.
func keep(s *engine.Snapshot, run []engine.Assignment) []engine.Assignment {
	ids := activeIDs(s)
	var out []engine.Assignment
	for _, a := range run {
		if ids[a.Job] && (a.PackWith == "" || ids[a.PackWith]) {
			out = append(out, a)
		} else if ids[a.Job] {
			a.PackWith = ""
			out = append(out, a)
		}
	}
	return out
}

// TestPackedPair, worked by hand: A (100 it) and B (30 it) share one V100
// from t=60 at 6 and 3 it/s. B finishes 30/3 = 10 s later, A then has 40 it
// left alone at 10 it/s and finishes 4 s later (no round in between: the
// partner's completion rerates it at once). The GPU is held 14 s and counts
// once: A is charged 10/2 + 4 = 9 GPU-s, B 10/2 = 5, utilisation 100%.
func TestPackedPair(t *testing.T) {
	jobs := []*job.Job{gavelJob("a", "A", 100), gavelJob("b", "B", 30)}
	for _, j := range jobs {
		j.Submit = 60 // on the first round: rounds only, none at B's completion
	}
	run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x1:v100"), Model: pairModel(t, 0),
		Policy: planAt(func(s *engine.Snapshot) engine.Plan {
			return engine.Plan{Run: keep(s, pairOf("a", "b"))}
		}), Placer: place.Pack{}, Round: 60}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"a": {74, 9}, "b": {70, 5}}
	for _, j := range run.Jobs {
		if w := want[j.ID]; math.Abs(j.Finish-w[0]) > 1e-9 || math.Abs(j.GPUSeconds-w[1]) > 1e-9 {
			t.Errorf("job %s finished at %v holding %v GPU-s, want %v and %v", j.ID, j.Finish, j.GPUSeconds, w[0], w[1])
		}
	}
	sum := report.Summarize(run)
	if math.Abs(sum.Utilization-1) > 1e-9 {
		t.Errorf("utilisation %v, want 1 (a shared GPU counts once)", sum.Utilization)
	}
	for _, smp := range run.Timeline {
		if smp.Allocated > 1 {
			t.Errorf("timeline at %v: %d GPUs allocated on a 1-GPU cluster", smp.T, smp.Allocated)
		}
	}
}

// TestUnpackCostsAResize, worked by hand: A and B (1,000 it each) share
// GPU 0 until the round at 60 s (A 360 it, B 180), then run apart. A keeps
// GPU 0 and needs 640/10 = 64 s more: done at 124. B moves to GPU 1 (a
// resize, 5 s without progress) and needs 820/5 = 164 s: done at 229.
func TestUnpackCostsAResize(t *testing.T) {
	jobs := []*job.Job{gavelJob("a", "A", 1000), gavelJob("b", "B", 1000)}
	run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("2x1:v100"), Model: pairModel(t, 5),
		Policy: planAt(func(s *engine.Snapshot) engine.Plan {
			if s.Now < 60 {
				return engine.Plan{Run: keep(s, pairOf("a", "b"))}
			}
			return engine.Plan{Run: keep(s, []engine.Assignment{{Job: "a", GPUs: 1}, {Job: "b", GPUs: 1}})}
		}), Placer: place.Pack{}, Round: 60, OnEvents: true}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]float64{"a": {124, 0, 0}, "b": {229, 1, 5}}
	for _, j := range run.Jobs {
		w := want[j.ID]
		if math.Abs(j.Finish-w[0]) > 1e-9 || float64(j.Resizes) != w[1] || math.Abs(j.RestartSeconds-w[2]) > 1e-9 {
			t.Errorf("job %s: finish %v, %d resizes, %v s restarting; want %v", j.ID, j.Finish, j.Resizes, j.RestartSeconds, w)
		}
	}
}

// randomPacker plans random jobs, packing random measured pairs, on a
// cluster of one-GPU servers, and checks at each round what the previous
// round's plan implies: no GPU with more than two jobs or with two that are
// not partners, no more GPUs held than exist, and work conserved — each
// job's progress since the last round is its rate alone, or packed next to
// its partner, times the time elapsed (between the two when the partner
// finished in between).
type randomPacker struct {
	t     *testing.T
	rng   *rand.Rand
	m     *table.Gavel
	last  map[string]engine.Assignment
	prog  map[string]float64
	then  float64
	pairs int
}

func (*randomPacker) Name() string { return "random-packer" }

func (p *randomPacker) Schedule(s *engine.Snapshot) engine.Plan {
	p.check(s)
	byID := map[string]*job.Job{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st.Job
	}
	free := s.Cluster.TotalGPUs()
	var plan engine.Plan
	var alone []int
	for _, i := range p.rng.Perm(len(s.Jobs)) {
		j := s.Jobs[i].Job
		if p.rng.IntN(5) == 0 {
			continue
		}
		joined := false
		if p.rng.IntN(2) == 0 {
			for k, at := range alone {
				a := &plan.Run[at]
				if _, _, ok := p.m.Shared(byID[a.Job], j, perf.Alloc{GPUType: "v100", PerNode: []int{1}}); ok {
					a.PackWith = j.ID
					plan.Run = append(plan.Run, engine.Assignment{Job: j.ID, GPUs: 1, PackWith: a.Job})
					alone = append(alone[:k], alone[k+1:]...)
					joined = true
					break
				}
			}
		}
		if !joined && free > 0 {
			free--
			alone = append(alone, len(plan.Run))
			plan.Run = append(plan.Run, engine.Assignment{Job: j.ID, GPUs: 1})
		}
	}
	p.last = map[string]engine.Assignment{}
	for _, a := range plan.Run {
		p.last[a.Job] = a
	}
	p.prog, p.then = map[string]float64{}, s.Now
	for _, st := range s.Jobs {
		p.prog[st.Job.ID] = st.Progress
	}
	return plan
}

func (p *randomPacker) check(s *engine.Snapshot) {
	t := p.t
	holders := map[int][]*engine.Status{}
	ids := activeIDs(s)
	one := perf.Alloc{GPUType: "v100", PerNode: []int{1}}
	for _, st := range s.Jobs {
		for _, g := range st.GPUs {
			holders[int(g)] = append(holders[int(g)], st)
		}
		before, seen := p.prog[st.Job.ID]
		if !seen {
			continue
		}
		dt := s.Now - p.then
		got := st.Progress - before
		alone, _ := p.m.Rate(st.Job, one, 0)
		lo, hi := 0.0, 0.0
		if a, ran := p.last[st.Job.ID]; ran {
			lo, hi = alone, alone
			if a.PackWith != "" {
				p.pairs++
				packed, _, _ := p.m.Shared(st.Job, partnerJob(s, a.PackWith), one)
				lo, hi = packed, packed
				if !ids[a.PackWith] { // the partner finished in between
					lo, hi = min(packed, alone), max(packed, alone)
				}
			}
		}
		if got < lo*dt-1e-6 || got > hi*dt+1e-6 {
			t.Fatalf("t=%v: job %s progressed %v in %v s, want between %v and %v (plan %+v)", s.Now, st.Job.ID, got, dt, lo*dt, hi*dt, p.last[st.Job.ID])
		}
	}
	if len(holders) > s.Cluster.TotalGPUs() {
		t.Fatalf("t=%v: %d GPUs held", s.Now, len(holders))
	}
	for g, hs := range holders {
		if len(hs) > 2 || (len(hs) == 2 && (hs[0].PackedWith != hs[1].Job.ID || hs[1].PackedWith != hs[0].Job.ID)) {
			t.Fatalf("t=%v: GPU %d held by %d jobs (%s with %q)", s.Now, g, len(hs), hs[0].Job.ID, hs[0].PackedWith)
		}
	}
}

// partnerJob finds job id among the snapshot's jobs; a partner that has
// finished is rebuilt from its ID, which starts with its model ("A-3").
func partnerJob(s *engine.Snapshot, id string) *job.Job {
	for _, st := range s.Jobs {
		if st.Job.ID == id {
			return st.Job
		}
	}
	return gavelJob(id, id[:1], 1)
}

func TestPackingProperties(t *testing.T) {
	for trial := range 12 {
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		var jobs []*job.Job
		for i := range 25 {
			m := []string{"A", "B", "C"}[rng.IntN(3)]
			j := gavelJob(fmt.Sprintf("%s-%d", m, i), m, float64(200+rng.IntN(3000)))
			j.Submit = float64(rng.IntN(600))
			jobs = append(jobs, j)
		}
		p := &randomPacker{t: t, rng: rng, m: pairModel(t, 0)}
		run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("3x1:v100"), Model: p.m, Policy: p,
			Placer: place.Pack{}, Round: float64(20 + rng.IntN(60)), OnEvents: trial%2 == 0}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		gpuSec := 0.0
		for i, smp := range run.Timeline {
			if smp.Allocated > 3 {
				t.Fatalf("timeline at %v: %d GPUs allocated of 3", smp.T, smp.Allocated)
			}
			if i+1 < len(run.Timeline) {
				gpuSec += float64(smp.Allocated) * (run.Timeline[i+1].T - smp.T)
			}
		}
		held := 0.0
		for _, j := range run.Jobs {
			if j.Finish < 0 {
				t.Fatalf("job %s never finished", j.ID)
			}
			held += j.GPUSeconds
		}
		// Both count a shared GPU once: the jobs' charges add up to the
		// timeline's integral.
		if math.Abs(gpuSec-held) > 1e-6*held {
			t.Fatalf("jobs hold %v GPU-s, the timeline integrates to %v", held, gpuSec)
		}
		if p.pairs == 0 {
			t.Fatal("no pair ever ran")
		}
	}
}
