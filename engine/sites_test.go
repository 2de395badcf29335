package engine_test

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

func sitesCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "cloud", Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 2, GPU: "a100"}}},
		{Name: "edge", Kind: cluster.SiteEdge, Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 2, GPU: "a100"}}},
	}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newSitesEngine(t *testing.T, p engine.Policy, pl engine.Placer) (*engine.Engine, *manual) {
	t.Helper()
	clk := &manual{}
	e, err := engine.New(engine.Config{Cluster: sitesCluster(t), Model: perf.Duration{}, Policy: p, Placer: pl, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return e, clk
}

func TestSitePlacement(t *testing.T) {
	tests := []struct {
		name string
		a    engine.Assignment
		want []int // nodes used; nil = not placed
	}{
		{"cloud by name", engine.Assignment{Job: "a", GPUs: 3, Site: "cloud"}, []int{0, 1}},
		{"edge job on one server", engine.Assignment{Job: "a", GPUs: 2, Site: "edge"}, []int{2}},
		{"edge job too big for a server", engine.Assignment{Job: "a", GPUs: 3, Site: "edge"}, nil},
		{"no site: never across sites", engine.Assignment{Job: "a", GPUs: 4}, []int{0, 1}},
		{"no site: too big for any site", engine.Assignment{Job: "a", GPUs: 5}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := planFunc(func(s *engine.Snapshot) engine.Plan { return engine.Plan{Run: []engine.Assignment{tc.a}} })
			for _, pl := range []engine.Placer{place.Pack{}, place.MostFree{}} {
				e, _ := newSitesEngine(t, pol, pl)
				if _, err := e.Submit(enginetest.Job("a").Elastic(1, 1, 5).Seconds(10).Obj()); err != nil {
					t.Fatal(err)
				}
				if _, err := e.Schedule(); err != nil {
					t.Fatal(err)
				}
				var nodes []int
				for _, g := range e.Job("a").GPUs {
					n := e.Snapshot().Cluster.NodeOf(g).ID
					if len(nodes) == 0 || nodes[len(nodes)-1] != n {
						nodes = append(nodes, n)
					}
				}
				if len(nodes) != len(tc.want) || (len(nodes) > 0 && nodes[0] != tc.want[0]) {
					t.Errorf("%s: nodes %v, want %v", pl.Name(), nodes, tc.want)
				}
			}
		})
	}
}

func TestSetDownPreemptsAndHides(t *testing.T) {
	pol := planFunc(func(s *engine.Snapshot) engine.Plan {
		var p engine.Plan
		for _, st := range s.Jobs {
			p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: 2, Site: "cloud"})
		}
		return p
	})
	e, _ := newSitesEngine(t, pol, place.Pack{})
	for _, id := range []string{"a", "b"} {
		if _, err := e.Submit(enginetest.Job(id).GPUs(2).Seconds(10).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	victim := e.Job("a").GPUs[0]
	ch, err := e.SetDown([]cluster.GPUID{victim}, true)
	if err != nil || len(ch) != 1 || ch[0].Kind != engine.Preempt || ch[0].Status.Job.ID != "a" {
		t.Fatalf("set down: %v %+v", err, ch)
	}
	s := e.Snapshot()
	if s.Up(victim) || s.Available("cloud", "") != 3 || s.Available("", "a100") != 7 || s.Largest("a100") != 3 {
		t.Fatalf("snapshot: up %v, cloud %d, all %d, largest %d", s.Up(victim), s.Available("cloud", ""), s.Available("", "a100"), s.Largest("a100"))
	}
	// The placer never hands out the down GPU: a cannot run on the cloud.
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if len(e.Job("a").GPUs) != 0 || len(e.Job("b").GPUs) != 2 {
		t.Fatalf("a holds %v, b %v", e.Job("a").GPUs, e.Job("b").GPUs)
	}
	if _, err := e.SetDown([]cluster.GPUID{victim}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if len(e.Job("a").GPUs) != 2 || e.Snapshot().Down != nil {
		t.Fatalf("after repair a holds %v", e.Job("a").GPUs)
	}
	if _, err := e.SetDown([]cluster.GPUID{99}, true); err == nil {
		t.Error("a GPU that does not exist went down")
	}
}

func TestDecline(t *testing.T) {
	e, _ := newSitesEngine(t, planFunc(func(s *engine.Snapshot) engine.Plan {
		return engine.Plan{Decline: []string{"a"}, Run: []engine.Assignment{{Job: "b", GPUs: 1}}}
	}), place.Pack{})
	for _, id := range []string{"a", "b"} {
		if _, err := e.Submit(enginetest.Job(id).GPUs(1).Seconds(10).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := e.Schedule()
	if err != nil || len(ch) != 2 || ch[0].Kind != engine.Decline || ch[1].Kind != engine.Start {
		t.Fatalf("changes %+v, %v", ch, err)
	}
	if e.Job("a").State != job.Declined || len(e.Active()) != 1 {
		t.Fatalf("a is %s, %d active", e.Job("a").State, len(e.Active()))
	}
	// Declining a job that ran, or one that is also run, is refused.
	for _, plan := range []engine.Plan{
		{Decline: []string{"b"}},
		{Decline: []string{"c"}, Run: []engine.Assignment{{Job: "c", GPUs: 1}}},
		{Decline: []string{"zz"}},
	} {
		e, _ := newSitesEngine(t, planFunc(func(s *engine.Snapshot) engine.Plan { return plan }), place.Pack{})
		for _, id := range []string{"b", "c"} {
			_, _ = e.Submit(enginetest.Job(id).GPUs(1).Seconds(10).Obj())
		}
		if plan.Decline[0] == "b" {
			// Make b run first.
			e2, _ := newSitesEngine(t, planFunc(func(s *engine.Snapshot) engine.Plan {
				if s.Round == 0 {
					return engine.Plan{Run: []engine.Assignment{{Job: "b", GPUs: 1}}}
				}
				return plan
			}), place.Pack{})
			_, _ = e2.Submit(enginetest.Job("b").GPUs(1).Seconds(10).Obj())
			if _, err := e2.Schedule(); err != nil {
				t.Fatal(err)
			}
			e = e2
		}
		if _, err := e.Schedule(); err == nil || !strings.Contains(err.Error(), "declines") && !strings.Contains(err.Error(), "runs and declines") {
			t.Errorf("plan %+v: error %v", plan, err)
		}
	}
}

// badSitePlacer puts every job across both sites.
type badSitePlacer struct{}

func (badSitePlacer) Name() string { return "bad" }
func (badSitePlacer) Place(c *cluster.Cluster, _ map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	return map[string][]cluster.GPUID{run[0].Job: {0, 4}}
}

func TestRejectsSpanningPlacement(t *testing.T) {
	for _, site := range []string{"", "edge"} {
		e, _ := newSitesEngine(t, planFunc(func(s *engine.Snapshot) engine.Plan {
			return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 2, Site: site}}}
		}), badSitePlacer{})
		_, _ = e.Submit(enginetest.Job("a").GPUs(2).Seconds(10).Obj())
		if _, err := e.Schedule(); err == nil || !strings.Contains(err.Error(), "site") {
			t.Errorf("site %q: error %v", site, err)
		}
	}
}

// TestSubmitPerSite: Submit refuses a job that no one site (one server on
// an edge site) could ever hold, naming it and why, as sim.Fits, tide
// serve and tide kube do: it counted the cluster's GPUs of the job's type,
// so a job of 6 on two sites of 4 was accepted and waited for ever.
func TestSubmitPerSite(t *testing.T) {
	build := func(ss ...cluster.SiteSpec) *cluster.Cluster {
		c, err := (&cluster.Spec{Sites: ss}).Build()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a100 := func(count, gpus int) []cluster.NodeSpec {
		return []cluster.NodeSpec{{Count: count, GPUs: gpus, GPU: "a100"}}
	}
	twoSites := build(cluster.SiteSpec{Name: "a", Nodes: a100(1, 4)}, cluster.SiteSpec{Name: "b", Nodes: a100(1, 4)})
	edge := build(cluster.SiteSpec{Name: "e", Kind: cluster.SiteEdge, Nodes: a100(2, 2)})
	for _, tc := range []struct {
		c    *cluster.Cluster
		j    *job.Job
		want string // "": accepted
	}{
		{twoSites, enginetest.Job("j6").GPUs(6).Seconds(10).Obj(), "job j6: needs at least 6 GPUs of one type on one site (a job never mixes types or spans sites), the most the cluster has is 4"},
		{twoSites, enginetest.Job("t6").GPUs(6).Type("a100").Seconds(10).Obj(), "job t6: needs at least 6 a100 GPUs on one site"},
		{twoSites, enginetest.Job("j4").GPUs(4).Seconds(10).Obj(), ""},
		{twoSites, enginetest.Job("el").Elastic(2, 4, 8).Seconds(10).Obj(), ""}, // its least fits a site
		{twoSites, enginetest.Job("el5").Elastic(5, 5, 8).Seconds(10).Obj(), "job el5: needs at least 5 GPUs"},
		{edge, enginetest.Job("e3").GPUs(3).Seconds(10).Obj(), "job e3: needs at least 3 GPUs of one type on one site (a job never mixes types or spans sites), the most the cluster has is 2"},
		{edge, enginetest.Job("e2").GPUs(2).Seconds(10).Obj(), ""},
		{sitesCluster(t), enginetest.Job("c5").GPUs(5).Seconds(10).Obj(), "the most the cluster has is 4"},
	} {
		e, err := engine.New(engine.Config{Cluster: tc.c, Model: perf.Duration{}, Policy: planFunc(func(*engine.Snapshot) engine.Plan { return engine.Plan{} }), Placer: place.Pack{}, Clock: &manual{}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Submit(tc.j)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.j.ID, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.j.ID, err, tc.want)
		case tc.want != "" && e.Job(tc.j.ID) != nil:
			t.Errorf("%s: refused but kept", tc.j.ID)
		}
	}
}
