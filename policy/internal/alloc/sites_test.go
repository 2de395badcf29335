package alloc_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// policyFunc is a policy made of one function.
type policyFunc func(s *engine.Snapshot) engine.Plan

func (f policyFunc) Name() string                            { return "greedy" }
func (f policyFunc) Schedule(s *engine.Snapshot) engine.Plan { return f(s) }

// TestGreedySites: two jobs of 3 GPUs running on two sites of 4 leave one
// GPU free on each. A waiting job of 2 fits neither site; the job of 1
// behind it runs at once (it waited for the jobs of 3 to end, beside the
// idle GPUs), and the plan names the site it runs on.
func TestGreedySites(t *testing.T) {
	c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "a", Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "a100"}}},
		{Name: "b", Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "a100"}}},
	}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	var plan engine.Plan
	e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Placer: place.Pack{}, Clock: &clock{},
		Policy: policyFunc(func(s *engine.Snapshot) engine.Plan {
			plan = alloc.Greedy(s, s.ActiveJobs(), false)
			return plan
		})})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*enginetest.JobBuilder{enginetest.Job("j1").GPUs(3), enginetest.Job("j2").GPUs(3)} {
		if _, err := e.Submit(j.Seconds(1e4).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*enginetest.JobBuilder{enginetest.Job("j3").At(1).GPUs(2), enginetest.Job("j4").At(2).GPUs(1)} {
		if _, err := e.Submit(j.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, a := range plan.Run {
		runs = append(runs, fmt.Sprintf("%s@%s", a.Job, a.Site))
		if st := e.Job(a.Job); len(st.GPUs) != a.GPUs || c.NodeOf(st.GPUs[0]).Site != a.Site {
			t.Errorf("job %s planned on %d GPUs of site %s, holds %v", a.Job, a.GPUs, a.Site, st.GPUs)
		}
	}
	if want := []string{"j1@a", "j2@b", "j4@a"}; !slices.Equal(runs, want) {
		t.Errorf("plan %v, want %v", runs, want)
	}
}

// TestGreedyPlacesWhatItPlans: on random clusters of several cloud,
// inference and edge sites, with GPUs down, whatever order the jobs come in (a
// waiting job may come before running ones, taking their GPUs), every job
// the greedy pass plans is placed as planned: the pool counts what each
// site can hold, as the placer does. Round after round jobs end and come.
func TestGreedyPlacesWhatItPlans(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		types := []string{"a100", "v100"}[:1+r.IntN(2)]
		var sites []cluster.SiteSpec
		for i := range 2 + r.IntN(2) {
			kind := []string{cluster.SiteCloud, cluster.SiteCloud, cluster.SiteInference, cluster.SiteEdge}[r.IntN(4)]
			var nodes []cluster.NodeSpec
			for _, typ := range types {
				if r.IntN(4) > 0 {
					nodes = append(nodes, cluster.NodeSpec{Count: 1 + r.IntN(2), GPUs: []int{1, 2, 4}[r.IntN(3)], GPU: typ})
				}
			}
			if len(nodes) == 0 {
				nodes = append(nodes, cluster.NodeSpec{Count: 1, GPUs: 2, GPU: types[0]})
			}
			sites = append(sites, cluster.SiteSpec{Name: fmt.Sprintf("s%d", i), Kind: kind, Nodes: nodes})
		}
		c, err := (&cluster.Spec{Sites: sites}).Build()
		if err != nil {
			t.Fatal(err)
		}
		var plan engine.Plan
		clk := &clock{}
		e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Placer: place.Pack{}, Clock: clk,
			Policy: policyFunc(func(s *engine.Snapshot) engine.Plan {
				order := slices.Clone(s.ActiveJobs())
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				plan = alloc.Greedy(s, order, false)
				return plan
			})})
		if err != nil {
			t.Fatal(err)
		}
		next := 0
		for round := range 30 {
			for range r.IntN(4) {
				j := enginetest.Job(fmt.Sprintf("j%d", next)).At(clk.t).GPUs(1 + r.IntN(c.MaxJobGPUs(""))).Seconds(600)
				if r.IntN(3) == 0 {
					j = j.Type(types[r.IntN(len(types))])
				}
				next++
				if jb := j.Obj(); jb.GPUs <= c.MaxJobGPUs(jb.GPUType) {
					if _, err := e.Submit(jb); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Some GPUs go down, others come back (a fault, inference).
			var down, up []cluster.GPUID
			for g := range c.TotalGPUs() {
				if r.IntN(12) == 0 {
					if e.IsDown(cluster.GPUID(g)) {
						up = append(up, cluster.GPUID(g))
					} else {
						down = append(down, cluster.GPUID(g))
					}
				}
			}
			for _, set := range []struct {
				gs   []cluster.GPUID
				down bool
			}{{down, true}, {up, false}} {
				if _, err := e.SetDown(set.gs, set.down); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Schedule(); err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
			for _, a := range plan.Run {
				st := e.Job(a.Job)
				if len(st.GPUs) != a.GPUs || c.NodeOf(st.GPUs[0]).Site != a.Site {
					t.Fatalf("seed %d round %d: job %s planned on %d GPUs of type %q, site %q, holds %d GPUs %v\n%s",
						seed, round, a.Job, a.GPUs, a.GPUType, a.Site, len(st.GPUs), st.GPUs, c)
				}
			}
			// A job holding GPUs ends now and then.
			for _, st := range e.Active() {
				if len(st.GPUs) > 0 && r.IntN(4) == 0 {
					if err := e.Finish(st.Job.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			clk.t += 60
		}
	}
}
