package explain_test

import (
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// sites builds a cluster of the given sites (policytest.Snap hands held
// GPUs out from GPU 0 up, so the sites' order places the jobs).
func sites(t *testing.T, ss ...cluster.SiteSpec) *cluster.Cluster {
	t.Helper()
	c, err := (&cluster.Spec{Sites: ss}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func site(name, kind string, nodes ...cluster.NodeSpec) cluster.SiteSpec {
	return cluster.SiteSpec{Name: name, Kind: kind, Nodes: nodes}
}

func nodes(count, gpus int, typ string) cluster.NodeSpec {
	return cluster.NodeSpec{Count: count, GPUs: gpus, GPU: typ}
}

// TestFreePerSite: on a cluster of several sites a waiting job's reason
// counts the free GPUs it could take together (one type on one site, one
// edge server, of its type, holding its part), not those of the whole
// cluster: a job of 2 beside one free GPU on each of two sites was told
// "needs 2 GPUs, 2 free". On one site the text is today's. Each reason is
// PlanAppend's, and the pieces (AppendWaits, AppendHeld with PlanFree)
// write the same. The GPU types of one site are sets apart as well, and
// so are the servers of an edge site alone.
func TestFreePerSite(t *testing.T) {
	twoSites := sites(t, site("a", "", nodes(1, 4, "a100")), site("b", "", nodes(1, 4, "a100")))
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		jobs []policytest.JobState
		run  []engine.Assignment
		want map[string]string // job: its reason's needs
	}{{
		name: "one free on each of two sites",
		c:    twoSites,
		jobs: []policytest.JobState{
			policytest.Hold("a", 0, 3, 500),   // GPUs 0-2, site a
			policytest.Hold("pad", 1, 1, 500), // GPU 3, site a: preempted
			policytest.Hold("b", 2, 3, 500),   // GPUs 4-6, site b
			policytest.Wait("w2", 3, 2, 100),
		},
		run: []engine.Assignment{{Job: "a", GPUs: 3}, {Job: "b", GPUs: 3}},
		want: map[string]string{
			"w2":  "waits; needs 2 GPUs, at most 1 free on any one site (2 across 2 sites)",
			"pad": "preempted; needs 1 GPUs, 2 free", // either site holds it
		},
	}, {
		name: "a new job counted on the first site with room",
		c:    twoSites,
		jobs: []policytest.JobState{
			policytest.Wait("w3", 0, 3, 100),
			policytest.Wait("w5", 1, 5, 100),
		},
		run:  []engine.Assignment{{Job: "w3", GPUs: 3}},
		want: map[string]string{"w5": "waits; needs 5 GPUs, at most 4 free on any one site (5 across 2 sites)"},
	}, {
		name: "a job named on a site counted there",
		c:    sites(t, site("a", "", nodes(1, 4, "a100")), site("b", "", nodes(1, 6, "a100"))),
		jobs: []policytest.JobState{
			policytest.Wait("w3", 0, 3, 100),
			policytest.Wait("w8", 1, 8, 100),
		},
		run: []engine.Assignment{{Job: "w3", GPUs: 3, Site: "b"}},
		// Unnamed, it would be counted on site a: at most 6 free.
		want: map[string]string{"w8": "waits; needs 8 GPUs, at most 4 free on any one site (7 across 2 sites)"},
	}, {
		name: "a running job that grows takes its room in its own site",
		c:    twoSites,
		jobs: []policytest.JobState{
			policytest.Hold("g", 0, 2, 500), // GPUs 0-1, site a
			policytest.Wait("w5", 1, 5, 100),
		},
		run:  []engine.Assignment{{Job: "g", GPUs: 3}},
		want: map[string]string{"w5": "waits; needs 5 GPUs, at most 4 free on any one site (5 across 2 sites)"},
	}, {
		name: "a typed job counts its type",
		c: sites(t, site("a", "", nodes(1, 4, "a100"), nodes(1, 2, "v100")),
			site("b", "", nodes(1, 2, "v100"))),
		jobs: []policytest.JobState{
			policytest.Hold("a", 0, 2, 500), // GPUs 0-1: a100, site a
			policytest.Hold("v", 1, 3, 500), // GPUs 2-3 a100, 4 v100: kept (a test's shape, not a placer's)
			policytest.Hold("v2", 2, 1, 500),
			{Job: enginetest.Job("wv").At(3).GPUs(3).Type("v100").Seconds(100).Obj()},
			policytest.Wait("wany", 4, 3, 100),
			{Job: enginetest.Job("wv2").At(5).GPUs(2).Type("v100").Seconds(100).Obj()},
		},
		run: []engine.Assignment{{Job: "a", GPUs: 2}, {Job: "v", GPUs: 3}},
		// Free: site a's second v100 (GPU 5, v2 preempted), site b's two.
		want: map[string]string{
			"wv":   "waits; needs 3 v100 GPUs, at most 2 free on any one site (3 across 2 sites)",
			"wany": "waits; needs 3 GPUs, at most 2 free on any one site (3 across 2 sites)",
			"wv2":  "waits; needs 2 v100 GPUs, 3 free", // site b holds it
		},
	}, {
		name: "types on one site are sets apart",
		c: sites(t, site("a", "", nodes(1, 2, "a100"), nodes(1, 2, "v100")),
			site("b", "", nodes(1, 2, "v100"))),
		jobs: []policytest.JobState{
			policytest.Hold("x", 0, 1, 500), // GPU 0: a100, site a
			policytest.Hold("y", 1, 1, 500), // GPU 1: a100, site a; preempted
			policytest.Hold("z", 2, 1, 500), // GPU 2: v100, site a
			policytest.Hold("q", 3, 1, 500), // GPU 3: v100, site a; preempted
			policytest.Hold("r", 4, 1, 500), // GPU 4: v100, site b
			policytest.Wait("w3", 5, 3, 100),
			{Job: enginetest.Job("wv").At(6).GPUs(2).Type("v100").Seconds(100).Obj()},
		},
		run: []engine.Assignment{{Job: "x", GPUs: 1}, {Job: "z", GPUs: 1}, {Job: "r", GPUs: 1}},
		want: map[string]string{
			"w3": "waits; needs 3 GPUs, at most 1 free of one type on any one site (3 across 3 such sets)",
			"wv": "waits; needs 2 v100 GPUs, at most 1 free on any one site (2 across 2 sites)",
		},
	}, {
		name: "edge servers are sets apart",
		c:    enginetest.MultiSite(1, 4, 3, 0), // 4 a100 in the cloud, 3 one-GPU edge servers
		jobs: []policytest.JobState{
			policytest.Hold("c", 0, 4, 500),
			policytest.Wait("w2", 1, 2, 100),
			{Job: enginetest.Job("wa").At(2).GPUs(1).Type("a100").Seconds(100).Obj()},
		},
		run: []engine.Assignment{{Job: "c", GPUs: 4}},
		want: map[string]string{
			"w2": "waits; needs 2 GPUs, at most 1 free on any one edge server (3 across 3 servers)",
			"wa": "waits; needs 1 a100 GPUs, 0 free",
		},
	}, {
		name: "a part of a GPU counts the GPUs that hold it",
		c:    sites(t, site("a", "", nodes(1, 2, "a100")), site("b", "", nodes(1, 2, "t4"))),
		jobs: []policytest.JobState{
			policytest.Hold("x", 0, 1, 500), // GPU 0: a100, site a
			{Job: enginetest.Job("mig").At(1).GPUs(2).MIG("3g.40gb").Seconds(100).Obj()},
			policytest.Wait("w", 2, 3, 100),
		},
		run: []engine.Assignment{{Job: "x", GPUs: 1}},
		want: map[string]string{
			"mig": "waits; needs 2 GPUs, 1 free", // a T4's 16 GiB do not hold 40
			"w":   "waits; needs 3 GPUs, at most 2 free on any one site (3 across 2 sites)",
		},
	}, {
		// A one-site cluster of two GPU types: a job of 4 beside two free
		// V100s and two free K80s was told "needs 4 GPUs, 4 free".
		name: "one site of two types: the types are sets apart",
		c:    sites(t, site("a", "", nodes(1, 4, "v100"), nodes(1, 4, "k80"))),
		jobs: []policytest.JobState{
			policytest.Hold("v", 0, 2, 500), // GPUs 0-1: v100
			policytest.Hold("k", 1, 2, 500), // GPUs 2-3: v100; kept (a test's shape)
			policytest.Hold("k2", 2, 2, 500),
			policytest.Wait("w4", 3, 4, 100),
			{Job: enginetest.Job("wk").At(4).GPUs(3).Type("k80").Seconds(100).Obj()},
			policytest.Wait("w2", 5, 2, 100),
		},
		run: []engine.Assignment{{Job: "v", GPUs: 2}, {Job: "k", GPUs: 2}},
		// Free: no v100 (v and k hold them), the four k80s (k2 preempted).
		want: map[string]string{
			"w4": "waits; needs 4 GPUs, 4 free", // the k80s hold it
			"wk": "waits; needs 3 k80 GPUs, 4 free",
		},
	}, {
		name: "one site of two types: none holds it",
		c:    sites(t, site("a", "", nodes(1, 4, "v100"), nodes(1, 4, "k80"))),
		jobs: []policytest.JobState{
			policytest.Hold("v", 0, 2, 500), // GPUs 0-1: v100
			policytest.Hold("k", 1, 4, 500), // GPUs 2-3 v100, 4-5 k80: kept
			policytest.Wait("w4", 2, 4, 100),
			{Job: enginetest.Job("wv").At(3).GPUs(1).Type("v100").Seconds(100).Obj()},
		},
		run: []engine.Assignment{{Job: "v", GPUs: 2}, {Job: "k", GPUs: 4}},
		want: map[string]string{
			"w4": "waits; needs 4 GPUs, 2 free", // the two k80s left, in one set
			"wv": "waits; needs 1 v100 GPUs, 0 free",
		},
	}, {
		name: "one site of two types: free on both, neither holds it",
		c:    sites(t, site("a", "", nodes(1, 4, "v100"), nodes(1, 4, "k80"))),
		jobs: []policytest.JobState{
			policytest.Hold("v", 0, 2, 500), // GPUs 0-1: v100
			policytest.Hold("pad", 1, 2, 500),
			policytest.Hold("k", 2, 2, 500), // GPUs 4-5: k80
			policytest.Wait("w4", 3, 4, 100),
		},
		run: []engine.Assignment{{Job: "v", GPUs: 2}, {Job: "k", GPUs: 2}},
		want: map[string]string{
			"w4": "waits; needs 4 GPUs, at most 2 free of any one type (4 across 2 types)",
		},
	}, {
		// An edge site alone: its servers are sets as beside a cloud.
		name: "an edge site alone: its servers are sets apart",
		c:    sites(t, site("e", cluster.SiteEdge, nodes(3, 2, "v100"))),
		jobs: []policytest.JobState{
			policytest.Hold("x", 0, 1, 500), // GPU 0: server 1
			policytest.Hold("y", 1, 1, 500), // GPU 1: server 1
			policytest.Wait("w3", 2, 3, 100),
		},
		run: []engine.Assignment{{Job: "x", GPUs: 1}, {Job: "y", GPUs: 1}},
		want: map[string]string{
			"w3": "waits; needs 3 GPUs, at most 2 free on any one edge server (4 across 2 servers)",
		},
	}, {
		name: "one site: the free GPUs of the whole cluster, as always",
		c:    enginetest.Cluster("2x4:a100"),
		jobs: []policytest.JobState{
			policytest.Hold("a", 0, 3, 500),
			policytest.Hold("pad", 1, 1, 500),
			policytest.Hold("b", 2, 3, 500),
			policytest.Wait("w2", 3, 2, 100),
		},
		run: []engine.Assignment{{Job: "a", GPUs: 3}, {Job: "b", GPUs: 3}},
		want: map[string]string{
			"w2":  "waits; needs 2 GPUs, 2 free",
			"pad": "preempted; needs 1 GPUs, 2 free",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := policytest.Snap(t, 100, tc.c, tc.jobs...)
			plan := engine.Plan{Run: tc.run}
			explain.PlanAppend(s, &plan, nil, nil)
			for id, want := range tc.want {
				if got := plan.Reasons[id].Text; got != want {
					t.Errorf("%s: %q, want %q", id, got, want)
				}
			}
			// The pieces a policy that explains when read uses say the same.
			free := explain.PlanFree(s, &engine.Plan{Run: tc.run}, 0)
			given := map[string]int{}
			for _, a := range tc.run {
				given[a.Job] = a.GPUs
			}
			for _, st := range s.Jobs {
				g, runs := given[st.Job.ID]
				var got string
				switch {
				case len(st.GPUs) > 0 && (!runs || g < len(st.GPUs)):
					got = string(explain.AppendHeld(nil, st, g, nil, free))
				case runs:
					continue
				default:
					got = string(explain.AppendWaits(nil, st, nil, free))
				}
				if want := plan.Reasons[st.Job.ID].Text; got != want {
					t.Errorf("%s: pieces %q, PlanAppend %q", st.Job.ID, got, want)
				}
			}
		})
	}
}

// TestLastRoundsFreeOnSites: a Queue and a Waits read the last round's
// reasons during the next with the free GPUs of that round, on several
// sites too, after the next round is recorded. The rounds swap at Next:
// the counts each kept were the struct's own, so the last round's reasons
// were read from the next round's counts (a handed-over run's reasons
// differed from a plain one's, sim.TestStateHandover/sites).
func TestLastRoundsFreeOnSites(t *testing.T) {
	c := sites(t, site("a", "", nodes(1, 4, "a100")), site("b", "", nodes(1, 4, "a100")))
	s := policytest.Snap(t, 100, c,
		policytest.Wait("w3", 0, 3, 100),
		policytest.Wait("w2", 1, 2, 100),
		policytest.Wait("w8", 2, 8, 100))
	for i, st := range s.Jobs {
		st.Slot = i
	}
	order := s.Jobs
	plans := []engine.Plan{
		{Run: []engine.Assignment{{Job: "w3", GPUs: 3}, {Job: "w2", GPUs: 2}}}, // 1 and 2 free
		{Run: []engine.Assignment{{Job: "w3", GPUs: 3}}},                       // 1 and 4 free
	}
	w8 := s.Jobs[2]
	var want []string
	for _, p := range plans {
		full := engine.Plan{Run: p.Run}
		explain.PlanAppend(s, &full, order, nil)
		want = append(want, full.Reasons["w8"].Text)
	}
	if want[0] == want[1] {
		t.Fatalf("the rounds' reasons are the same, %q: a test that shows nothing", want[0])
	}
	var q explain.Queue
	var w explain.Waits
	for i, p := range plans {
		s.Round = 7 + i
		q.Next(s.Round)
		w.Next(s.Round)
		given, ok := q.Given(order, p.Run)
		if !ok || !q.Record(s, &engine.Plan{Run: p.Run}, &explain.Order{Jobs: order, Given: given}) {
			t.Fatalf("round %d: Queue refused the greedy pass", i)
		}
		if !w.Record(s, &engine.Plan{Run: p.Run}, func(*engine.Status) float64 { return 0 }, [2]int{}, nil) {
			t.Fatalf("round %d: Waits refused a plan without declines", i)
		}
	}
	for i := range plans {
		if got := q.Reason(w8, 7+i).Text; got != want[i] {
			t.Errorf("Queue, round %d: %q, want %q", i, got, want[i])
		}
	}
	// Waits has no order: its text is PlanAppend's without the jobs ahead.
	for i, p := range plans {
		full := engine.Plan{Run: p.Run}
		explain.PlanAppend(s, &full, nil, nil)
		if got, want := w.Reason(w8, 7+i).Text, full.Reasons["w8"].Text; got != want {
			t.Errorf("Waits, round %d: %q, want %q", i, got, want)
		}
	}
}
