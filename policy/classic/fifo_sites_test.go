package classic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/sim"
)

// predictions wraps a policy and records every predicted start its plans
// give, and every waiting job among the first explain.PredictAhead of the
// queue that gets none.
type predictions struct {
	engine.Policy
	got  []prediction
	none []string
	// last is each job's last reason with a position in the queue or a
	// predicted start (at 0: none) that a plan wrote.
	last map[string]prediction
}

type prediction struct {
	job     string
	now, at float64
}

func (p *predictions) Unwrap() engine.Policy { return p.Policy }

func (p *predictions) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.Policy.Schedule(s)
	for _, st := range s.Jobs {
		r, ok := plan.Reasons[st.Job.ID]
		if ok && (r.Position > 0 || r.PredictedStart > 0) {
			if p.last == nil {
				p.last = map[string]prediction{}
			}
			p.last[st.Job.ID] = prediction{st.Job.ID, s.Now, r.PredictedStart}
		}
		switch {
		case !ok:
		case r.PredictedStart > 0:
			p.got = append(p.got, prediction{st.Job.ID, s.Now, r.PredictedStart})
		case r.Position > 0 && r.Position <= explain.PredictAhead:
			p.none = append(p.none, fmt.Sprintf("t=%g %s (position %d): %q", s.Now, st.Job.ID, r.Position, r.Text))
		}
	}
	return plan
}

// TestFIFOPredictsOnSites runs FIFO in the simulator on small clusters of
// several sites, GPU types or edge servers (the duration model, on one
// type slower in some cases, and no start costs, so that a prediction is
// exact) and checks every round's predicted start of
// every waiting job against the start the job then got. FIFO is strict:
// a job that arrives later waits behind, so arrivals do not move the
// predictions of the jobs ahead. Each waiting job among the first
// explain.PredictAhead must get one. Counted over the whole cluster, the
// free GPUs of two sites (or two servers of an edge site alone) made a
// job that fits neither "start now" (no prediction) or start at an end
// that frees too few GPUs on any one site or server; on several types
// FIFO predicted nothing.
func TestFIFOPredictsOnSites(t *testing.T) {
	spec := func(name, kind string, count, gpus int) cluster.SiteSpec {
		return cluster.SiteSpec{Name: name, Kind: kind, Nodes: []cluster.NodeSpec{{Count: count, GPUs: gpus, GPU: "a100"}}}
	}
	j := func(id string, at float64, gpus int, seconds float64) *job.Job {
		return enginetest.Job(id).At(at).GPUs(gpus).Seconds(seconds).Obj()
	}
	twoTypes := cluster.SiteSpec{Name: "a", Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 2, GPU: "v100"}, {Count: 1, GPUs: 2, GPU: "k80"}}}
	slowK80 := perf.SpeedFactors{Base: perf.Duration{}, Speed: map[string]float64{"k80": 0.25}}
	for _, tc := range []struct {
		name  string
		sites []cluster.SiteSpec
		model perf.Model // nil: perf.Duration, the same on every type
		jobs  []*job.Job
		want  map[string]float64 // starts, to pin the case's shape
	}{{
		// w sees one GPU free on each site: it waits for x.
		name:  "one free on each of two sites",
		sites: []cluster.SiteSpec{spec("a", "", 1, 4), spec("b", "", 1, 4)},
		jobs:  []*job.Job{j("x", 0, 3, 100), j("y", 1, 3, 300), j("w", 2, 2, 50)},
		want:  map[string]float64{"w": 100},
	}, {
		// x's end frees 2 GPUs beside y's 1 free on the other site: w
		// waits for y.
		name:  "an end that frees too few on its site",
		sites: []cluster.SiteSpec{spec("a", "", 1, 4), spec("b", "", 1, 4)},
		jobs:  []*job.Job{j("x", 0, 2, 100), j("z", 1, 2, 1000), j("y", 2, 3, 200), j("w", 3, 3, 50)},
		want:  map[string]float64{"w": 202},
	}, {
		// w1 takes site a at x's end; w2 finds 1 and 2 free and waits for
		// y.
		name:  "the job ahead takes the site",
		sites: []cluster.SiteSpec{spec("a", "", 1, 4), spec("b", "", 1, 4)},
		jobs:  []*job.Job{j("x", 0, 4, 100), j("y", 1, 2, 300), j("w1", 2, 3, 500), j("w2", 3, 3, 50)},
		want:  map[string]float64{"w1": 100, "w2": 301},
	}, {
		// Three one-GPU edge servers, one free each, do not hold a job of
		// 2; the job of 1 behind it waits too (FIFO is strict).
		name:  "edge servers",
		sites: []cluster.SiteSpec{spec("a", "", 1, 2), spec("e", cluster.SiteEdge, 3, 1)},
		jobs:  []*job.Job{j("x", 0, 2, 100), j("w", 1, 2, 50), j("w1", 2, 1, 50)},
		want:  map[string]float64{"w": 100, "w1": 100},
	}, {
		// x (site b) and y (site a) end at the same time: the round then
		// sees both sites free, and w1 goes to site a, the first, leaving
		// site b to w3.
		name:  "ends at the same time",
		sites: []cluster.SiteSpec{spec("a", "", 1, 4), spec("b", "", 1, 4), spec("c", "", 1, 4)},
		jobs: []*job.Job{j("p", 0, 4, 50), j("x", 1, 3, 100), j("q", 2, 4, 1000), j("y", 51, 3, 50),
			j("w1", 52, 3, 500), j("w2", 53, 1, 500), j("w3", 54, 4, 500)},
		want: map[string]float64{"w1": 101, "w2": 101, "w3": 101},
	}, {
		// One site of two types: x's end frees a V100 beside y's K80;
		// w waits for k.
		name:  "one site of two types",
		sites: []cluster.SiteSpec{twoTypes},
		jobs:  []*job.Job{j("x", 0, 1, 100), j("v", 1, 1, 400), j("y", 2, 1, 100), j("k", 3, 1, 250), j("w", 4, 2, 50)},
		want:  map[string]float64{"w": 253},
	}, {
		// The K80s run at a quarter of the speed. x and v go to the K80s
		// (the greedy pass's best fit, K80 first on a tie), ending at 100
		// and 401; y and k to the V100s, ending at 102 and 253. w starts
		// on the V100s at 253 and runs 50 s; w2 takes them at 303, before
		// the K80s are both free. Priced on a K80, w would end at 453 and
		// w2 be predicted at 401.
		name:  "a type that runs slower",
		sites: []cluster.SiteSpec{twoTypes},
		model: slowK80,
		jobs:  []*job.Job{j("x", 0, 1, 25), j("v", 1, 1, 100), j("y", 2, 1, 100), j("k", 3, 1, 250), j("w", 4, 2, 50), j("w2", 5, 2, 50)},
		want:  map[string]float64{"w": 253, "w2": 303},
	}, {
		name:  "random jobs on one site of two types",
		sites: []cluster.SiteSpec{{Name: "a", Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 4, GPU: "v100"}, {Count: 1, GPUs: 4, GPU: "k80"}}}},
		jobs:  randomJobs(60, 4),
	}, {
		name:  "random jobs on one site of two types, one slower",
		sites: []cluster.SiteSpec{{Name: "a", Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 4, GPU: "v100"}, {Count: 1, GPUs: 4, GPU: "k80"}}}},
		model: slowK80,
		jobs:  randomJobs(60, 4),
	}, {
		name: "random jobs on two sites of two types and edge servers",
		sites: []cluster.SiteSpec{
			{Name: "a", Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "v100"}, {Count: 1, GPUs: 2, GPU: "k80"}}},
			{Name: "b", Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "k80"}}},
			spec("e", cluster.SiteEdge, 2, 2)},
		model: slowK80,
		jobs:  randomJobs(60, 4),
	}, {
		name:  "an edge site alone",
		sites: []cluster.SiteSpec{spec("e", cluster.SiteEdge, 2, 2)},
		jobs:  []*job.Job{j("x", 0, 1, 100), j("v", 1, 1, 400), j("y", 2, 1, 100), j("k", 3, 1, 250), j("w", 4, 2, 50)},
		want:  map[string]float64{"w": 253},
	}, {
		name:  "random jobs on two sites and edge servers",
		sites: []cluster.SiteSpec{spec("a", "", 2, 4), spec("b", "", 1, 4), spec("e", cluster.SiteEdge, 2, 2)},
		jobs:  randomJobs(60, 4),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := (&cluster.Spec{Sites: tc.sites}).Build()
			if err != nil {
				t.Fatal(err)
			}
			p := &predictions{Policy: fam.Parse(t, "fifo", contract.Context{})}
			var model perf.Model = perf.Duration{}
			if tc.model != nil {
				model = tc.model
			}
			r, err := sim.Run(sim.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true}, tc.jobs)
			if err != nil {
				t.Fatal(err)
			}
			start := map[string]float64{}
			for _, rec := range r.Jobs {
				start[rec.ID] = rec.Start
			}
			for id, want := range tc.want {
				if start[id] != want {
					t.Fatalf("%s started at %g, want %g: the case no longer shows what it names", id, start[id], want)
				}
			}
			for _, g := range p.got {
				if math.Abs(g.at-start[g.job]) > 1e-6 {
					t.Errorf("t=%g %s: predicted to start at %g, started at %g", g.now, g.job, g.at, start[g.job])
				}
			}
			for _, n := range p.none {
				t.Errorf("no prediction: %s", n)
			}
			if len(p.got) == 0 {
				t.Error("no predictions at all")
			}
		})
	}
}

// randomJobs are n rigid jobs of 1 to most GPUs, 60 to 1,000 s each,
// arriving in bursts.
func randomJobs(n, most int) []*job.Job {
	rng := rand.New(rand.NewPCG(5, 7))
	var jobs []*job.Job
	at := 0.0
	for i := range n {
		if rng.IntN(4) == 0 {
			at += float64(rng.IntN(600))
		}
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).GPUs(1+rng.IntN(most)).Seconds(float64(60+rng.IntN(941))).Obj())
	}
	return jobs
}
