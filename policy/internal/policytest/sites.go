package policytest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// RandomSites is a random cluster of two or three sites (cloud, inference
// or edge), each with nodes of one or two GPU types, drawn from r.
func RandomSites(t testing.TB, r *rand.Rand) (*cluster.Cluster, []string) {
	t.Helper()
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
	return c, types
}

// PlacesWhatItPlans drives the policies build makes (one per seed) on
// random clusters of several cloud, inference and edge sites (RandomSites)
// under place.Pack, round after round (rounds s apart): jobs come (rigid,
// or elastic ones from 1 GPU with elastic), GPUs go down and come back,
// jobs end. Every job a round's plan runs must be placed as planned: on
// its GPU count, on the site the plan names. A job never spans sites and
// uses one server on an edge site, so a policy that counts a type's GPUs
// over sites plans jobs the placer cannot place together.
func PlacesWhatItPlans(t *testing.T, seeds int, round float64, elastic bool, build func(seed int) engine.Policy) {
	t.Helper()
	for seed := 1; seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 13))
		c, types := RandomSites(t, r)
		var plan engine.Plan
		clk := &Clock{}
		pol := build(seed)
		e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Placer: place.Pack{}, Clock: clk,
			Policy: planSpy{pol, &plan}})
		if err != nil {
			t.Fatal(err)
		}
		next := 0
		for rd := range 30 {
			for range r.IntN(4) {
				n := 1 + r.IntN(c.MaxJobGPUs(""))
				j := enginetest.Job(fmt.Sprintf("j%d", next)).At(clk.T).GPUs(n).Seconds(float64(300 + r.IntN(900)))
				if elastic && r.IntN(4) > 0 {
					j = j.Elastic(1, n, n+r.IntN(4))
				}
				if r.IntN(3) == 0 {
					j = j.Type(types[r.IntN(len(types))])
				}
				next++
				if jb := j.Obj(); jb.MinGPUs <= c.MaxJobGPUs(jb.GPUType) {
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
			plan = engine.Plan{}
			if _, err := e.Schedule(); err != nil {
				t.Fatalf("%s seed %d round %d: %v", pol.Name(), seed, rd, err)
			}
			for _, a := range plan.Run {
				st := e.Job(a.Job)
				if len(st.GPUs) != a.GPUs || (a.Site != "" && c.NodeOf(st.GPUs[0]).Site != a.Site) {
					t.Fatalf("%s seed %d round %d: job %s planned on %d GPUs of type %q, site %q, holds %d GPUs %v\n%s",
						pol.Name(), seed, rd, a.Job, a.GPUs, a.GPUType, a.Site, len(st.GPUs), st.GPUs, c)
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
			clk.T += round
		}
	}
}

// planSpy is a policy that records the plans of the one it wraps (a copy:
// a policy may reuse a plan's memory).
type planSpy struct {
	engine.Policy
	plan *engine.Plan
}

// Schedule implements engine.Policy.
func (p planSpy) Schedule(s *engine.Snapshot) engine.Plan {
	out := p.Policy.Schedule(s)
	*p.plan = engine.Plan{Run: append([]engine.Assignment(nil), out.Run...)}
	return out
}

// PlacedAsPlanned wraps p for a simulation without faults: at each round
// it fails t for a job the last round's plan ran that does not hold what
// the plan gave it (its GPU count, on the site named) and has not ended
// (the first such job only).
func PlacedAsPlanned(t testing.TB, p engine.Policy) engine.Policy {
	return &placedCheck{t: t, Policy: p}
}

// placedCheck is PlacedAsPlanned's policy.
type placedCheck struct {
	engine.Policy
	t      testing.TB
	last   []engine.Assignment
	failed bool
}

// Schedule implements engine.Policy.
func (p *placedCheck) Schedule(s *engine.Snapshot) engine.Plan {
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	for _, a := range p.last {
		if st := byID[a.Job]; st != nil && !p.failed && (len(st.GPUs) != a.GPUs || (a.Site != "" && s.Cluster.NodeOf(st.GPUs[0]).Site != a.Site)) {
			p.t.Errorf("%s at %.0f s: job %s was planned on %d GPUs of type %q, site %q, and holds %d",
				p.Name(), s.Now, a.Job, a.GPUs, a.GPUType, a.Site, len(st.GPUs))
			p.failed = true // the first is enough
		}
	}
	out := p.Policy.Schedule(s)
	p.last = append(p.last[:0], out.Run...)
	return out
}
