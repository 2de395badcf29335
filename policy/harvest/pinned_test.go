package harvest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	capacitypkg "github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
)

// pinnedCluster is a training site of two GPU types, 4 A100 then 4 V100
// (the A100 pool comes first), and an inference site of 4 V100, lent to
// training: a job pinned to V100 finds A100 GPUs free first.
func pinnedCluster(t testing.TB) *cluster.Cluster {
	c, err := cluster.New([]cluster.Node{
		{Name: "train-a", Site: "train", GPUType: "a100", GPUs: 4},
		{Name: "train-v", Site: "train", GPUType: "v100", GPUs: 4},
		{Name: "infer-0", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "v100", GPUs: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pinnedSpecs are the harvest policies and presets the pinned tests run.
var pinnedSpecs = []string{"deepboot", "deepboot:loan=false", "aryl", "aryl:loan=false", "aryl:elastic=false", "aryl:whole=false"}

// TestPinnedGPUTypes: on a training site of two GPU types, a job that pins
// one (Job.GPUType) is only ever given GPUs of that type, training or
// loaned, and is left waiting only when no training pool of its type has
// room for it. Both policies took the first pool with room whatever the
// job asked for, and the engine refused the plan ("plan gives job j0 a100
// GPUs, it asks for v100"), stopping every job.
func TestPinnedGPUTypes(t *testing.T) {
	type pin struct {
		typ  string // "" unpinned
		work float64
	}
	cases := []struct {
		name  string
		jobs  []pin
		down  []string // nodes down (failed): their GPUs are not free
		waits []string // pinned jobs that must wait, under each policy
	}{
		{name: "pinned to the second type", jobs: []pin{{"v100", 1000}, {"", 1000}}},
		{name: "pinned to each type and unpinned", jobs: []pin{{"v100", 1000}, {"a100", 2000}, {"", 500}, {"v100", 3000}, {"", 4000}}},
		// Eight jobs on one GPU each: the training site holds them all,
		// one per GPU, so each pinned job must get its own type's.
		{name: "both types full", jobs: []pin{{"v100", 100}, {"v100", 200}, {"a100", 300}, {"v100", 400},
			{"a100", 500}, {"v100", 600}, {"", 700}, {"", 800}}},
		// More V100 jobs than training V100 GPUs, A100 GPUs idle: the rest
		// borrow the inference V100s, or wait (loan=false), never on A100.
		{name: "more pinned jobs than their type's training GPUs", jobs: []pin{{"v100", 100}, {"v100", 200},
			{"v100", 300}, {"v100", 400}, {"v100", 500}, {"v100", 600}}},
		// The training V100 node has failed and inference holds all its
		// V100s: the V100 job waits, the A100 node half idle, and its
		// reason names its type.
		{name: "its type down, another free", jobs: []pin{{"v100", 1000}, {"", 1000}}, down: []string{"train-v", "infer-0"},
			waits: []string{"j0"}},
	}
	c := pinnedCluster(t)
	for _, tc := range cases {
		for _, spec := range pinnedSpecs {
			t.Run(tc.name+"/"+spec, func(t *testing.T) {
				s := &engine.Snapshot{Now: 600, Cluster: c, Model: policytest.SqrtModel{}, GPUsPerNode: map[string]int{"a100": 4, "v100": 4}}
				if len(tc.down) > 0 {
					s.Down = make([]bool, c.TotalGPUs())
					for _, nd := range c.Nodes {
						if slices.Contains(tc.down, nd.Name) {
							for g := range nd.GPUs {
								s.Down[int(nd.First)+g] = true
							}
						}
					}
				}
				for i, p := range tc.jobs {
					j := enginetest.Job(fmt.Sprintf("j%d", i)).At(0).Elastic(1, 1, 4).Seconds(p.work).Type(p.typ).Obj()
					s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: j.Work, FirstStart: -1, LastStart: -1, Finish: -1})
				}
				plan := fam.Parse(t, spec, contract.Context{}).Schedule(s)
				checkPinnedPlan(t, s, plan)
				var waiting []string
				for _, st := range s.Jobs {
					if st.Job.GPUType != "" && !slices.ContainsFunc(plan.Run, func(a engine.Assignment) bool { return a.Job == st.Job.ID }) {
						waiting = append(waiting, st.Job.ID)
						if r := plan.Reasons[st.Job.ID].Text; !strings.Contains(r, "only "+st.Job.GPUType+" GPUs") {
							t.Errorf("pinned job %s waits for %q: want its type named", st.Job.ID, r)
						}
					}
				}
				for _, id := range tc.waits {
					if !slices.Contains(waiting, id) {
						t.Errorf("job %s runs (plan %v): want it waiting", id, policytest.Runs(plan))
					}
				}
			})
		}
	}
}

// checkPinnedPlan fails t when plan gives a job another GPU type than it
// pins, or an unknown one, or asks a site for more GPUs of a type than it
// has up; or leaves a pinned job waiting while a training site has room of
// its type for it (each job is new to the plan, so room is what the plan
// leaves unassigned).
func checkPinnedPlan(t *testing.T, s *engine.Snapshot, plan engine.Plan) {
	t.Helper()
	asked := map[[2]string]int{}
	for _, a := range plan.Run {
		st := s.Jobs[slices.IndexFunc(s.Jobs, func(st *engine.Status) bool { return st.Job.ID == a.Job })]
		if a.GPUType == "" || (st.Job.GPUType != "" && a.GPUType != st.Job.GPUType) {
			t.Errorf("plan gives job %s %q GPUs, it asks for %q (plan %v)", a.Job, a.GPUType, st.Job.GPUType, policytest.Runs(plan))
		}
		asked[[2]string{a.Site, a.GPUType}] += a.GPUs
	}
	for k, n := range asked {
		if have := s.Available(k[0], k[1]); n > have {
			t.Errorf("plan asks %s for %d %s GPUs, it has %d up", k[0], n, k[1], have)
		}
	}
	for _, st := range s.Jobs {
		if t0 := st.Job.GPUType; t0 != "" && !slices.ContainsFunc(plan.Run, func(a engine.Assignment) bool { return a.Job == st.Job.ID }) {
			if room := s.Available("train", t0) - asked[[2]string{"train", t0}]; room >= st.Job.MinGPUs {
				t.Errorf("pinned job %s waits with %d %s training GPUs left free (plan %v)", st.Job.ID, room, t0, policytest.Runs(plan))
			}
		}
	}
}

// TestPinnedGPUTypesRun: the harvest policies on pinnedCluster, through the
// simulator, with inference taking and releasing its V100s and a third of
// the jobs pinned to each type: the engine accepts every plan (it refuses
// one that gives a job another type than it pins, and the run aborts), and
// every job finishes.
func TestPinnedGPUTypesRun(t *testing.T) {
	pack, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range pinnedSpecs {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", spec, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				var jobs []*job.Job
				for i := range 24 {
					typ := []string{"", "a100", "v100"}[i%3]
					jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(float64(r.IntN(3000))).
						Elastic(1, 1, 1+r.IntN(4)).Seconds(float64(200+r.IntN(2000))).Type(typ).Obj())
				}
				var changes []capacitypkg.Change
				for k := range 40 {
					changes = append(changes, capacitypkg.Change{T: float64(k * 150), Site: "infer", Available: -1, Inference: r.IntN(5)})
				}
				p := fam.Parse(t, spec, contract.Context{})
				run, err := sim.Run(sim.Config{Cluster: pinnedCluster(t), Model: policytest.SqrtModel{Restart: 5}, Policy: p,
					Placer: pack, Round: 60, OnEvents: true, Sites: &sim.Sites{Changes: changes}}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range run.Jobs {
					if j.Finish < 0 {
						t.Errorf("job %s never finished", j.ID)
					}
				}
			})
		}
	}
}
