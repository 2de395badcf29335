package fair

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

func TestAlloX(t *testing.T) {
	// One v100, one k80; a and b are "fast" jobs, 4x slower on the k80:
	// a 100 s (v100) or 400 s (k80), b 200 or 800. Sums of k x p:
	// both on the v100, a first: 2x100 + 200 = 400; a v100, b k80: 100 +
	// 800 = 900; b v100, a k80: 200 + 400 = 600. So both queue on the v100:
	// a starts, b waits though the k80 is free.
	a, b := policytest.Wait("a", 0, 1, 100), policytest.Wait("b", 0, 1, 200)
	a.Job.Model, b.Job.Model = "fast", "fast"
	s := policytest.Snap(t, 1000, enginetest.Cluster("1x1:v100,1x1:k80"), a, b)
	s.Model = k80Slowdown{}
	if got, want := policytest.Runs(fam.Parse(t, "allox", contract.Context{}).Schedule(s)), []string{"a:1:v100"}; !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	// A running job keeps its GPU (no preemption): b runs on the v100,
	// so a starts nowhere (its slot is the v100) until b is done.
	b.Held = 1
	s = policytest.Snap(t, 1000, enginetest.Cluster("1x1:v100,1x1:k80"), b, a)
	s.Model = k80Slowdown{}
	if got, want := policytest.Runs(fam.Parse(t, "allox", contract.Context{}).Schedule(s)), []string{"b:1:v100"}; !slices.Equal(got, want) {
		t.Errorf("running: plan %v, want %v", got, want)
	}
}

func TestAlloXFairness(t *testing.T) {
	// One GPU. Tenant x has attained 1000 GPU-s, y none. With alpha=0.5
	// only y's jobs are matched first: y's long job starts before x's
	// short one, which plain AlloX (alpha=1) would start first.
	x1, y1 := policytest.Wait("x1", 0, 1, 10), policytest.Wait("y1", 0, 1, 500)
	x1.Job.Tenant, y1.Job.Tenant, x1.Attained = "x", "y", 1000
	s := policytest.Snap(t, 1000, enginetest.Cluster("1x1:t4"), x1, y1)
	if got := policytest.Runs(fam.Parse(t, "allox", contract.Context{}).Schedule(s)); !slices.Equal(got, []string{"x1:1"}) {
		t.Errorf("alpha=1: plan %v, want x1 (shortest first)", got)
	}
	if got := policytest.Runs(fam.Parse(t, "allox:alpha=0.5", contract.Context{}).Schedule(s)); !slices.Equal(got, []string{"y1:1"}) {
		t.Errorf("alpha=0.5: plan %v, want y1 (least attained tenant first)", got)
	}
}

// TestAlloXMatchIsOptimal compares the matching's total cost with a brute
// force over every assignment of jobs to types (each type's queue ordered
// longest last, which is optimal on one machine) on small random cases.
func TestAlloXMatchIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := &AlloX{Alpha: 1}
	for trial := range 40 {
		var jobs []policytest.JobState
		n := 1 + rng.IntN(5)
		for i := range n {
			j := policytest.Wait(fmt.Sprintf("j%d", i), 0, 1, float64(10+rng.IntN(90)))
			if rng.IntN(2) == 0 {
				j.Job.Model = "fast"
			}
			jobs = append(jobs, j)
		}
		s := policytest.Snap(t, 0, enginetest.Cluster("1x1:v100,1x1:k80"), jobs...)
		s.Model = k80Slowdown{}
		slot := x.Match(s, s.Jobs)
		got := 0.0
		for _, st := range s.Jobs {
			sl, ok := slot[st]
			if !ok {
				t.Fatalf("trial %d: job %s unmatched", trial, st.Job.ID)
			}
			got += float64(sl.k) * sl.p
		}
		best := math.Inf(1)
		for mask := 0; mask < 1<<n; mask++ {
			var q [2][]float64
			for i, st := range s.Jobs {
				typ := []string{"k80", "v100"}[mask>>i&1]
				q[mask>>i&1] = append(q[mask>>i&1], s.Remaining(st, 1, typ))
			}
			cost := 0.0
			for _, ps := range q {
				slices.Sort(ps) // shortest first: the k-th from the end weighs k
				for i, p := range ps {
					cost += float64(len(ps)-i) * p
				}
			}
			best = math.Min(best, cost)
		}
		if math.Abs(got-best) > 1e-6 {
			t.Errorf("trial %d: matching costs %v, brute force %v", trial, got, best)
		}
	}
}

// TestAlloXOneSite checks that AlloX matches a job only to a type one site
// (or edge server) has enough GPUs of up: a job never spans sites, and a
// job matched to a type no placement honours started on no other and
// waited for ever beside idle GPUs (seed 635 of the random clusters).
func TestAlloXOneSite(t *testing.T) {
	// cloud {3x2 a100, 1x8 v100} and an inference site {1x4 a100}: 10
	// a100 in all, 6 in the cloud. The types tie on speed.
	cloud := func() *cluster.Cluster {
		return cloudAndInfer(t, []cluster.NodeSpec{{Count: 3, GPUs: 2, GPU: "a100"}, {Count: 1, GPUs: 8, GPU: "v100"}},
			[]cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "a100"}})
	}
	runSiteCases(t, "allox", true, []siteCase{
		{name: "a100s of two sites hold no job of 8", cluster: cloud(),
			jobs: []policytest.JobState{policytest.Wait("j", 0, 8, 1000)},
			want: []string{"j:8:v100"}},
		{name: "a job of 6 fits the cloud's a100s", cluster: cloud(),
			jobs: []policytest.JobState{policytest.Wait("j", 0, 6, 1000), policytest.Wait("k", 1, 8, 1000)},
			want: []string{"j:6:a100", "k:8:v100"}},
		{name: "inference took its a100s", cluster: cloud(), down: "infer",
			jobs: []policytest.JobState{policytest.Wait("j", 0, 8, 1000), policytest.Wait("k", 1, 6, 1000)},
			want: []string{"j:8:v100", "k:6:a100"}},
		// The cloud's nodes down: the inference site's a100s hold a job of
		// 4, no job of 5, and the v100s none.
		{name: "what is down never counts", cluster: cloud(), down: "cloud",
			jobs: []policytest.JobState{policytest.Wait("j", 0, 5, 1000), policytest.Wait("k", 1, 4, 1000)},
			want: []string{"k:4:a100"}},
		{name: "a pinned job too large for a site waits, the next one runs", cluster: cloud(),
			jobs: []policytest.JobState{pinnedTo(policytest.Wait("j", 0, 8, 1000), "a100"), policytest.Wait("k", 1, 1, 1000)},
			want: []string{"k:1:a100"}},
		// cloud {1x2 a100}, edge {3x1 v100}: edge servers never pool.
		{name: "edge servers hold one GPU each", cluster: enginetest.MultiSite(1, 2, 3, 0),
			jobs: []policytest.JobState{policytest.Wait("j", 0, 3, 1000), policytest.Wait("k", 1, 2, 1000)},
			want: []string{"k:2:a100"}},
		// One site: a type's GPUs pool over its nodes, as ever.
		{name: "one site pools its nodes", cluster: enginetest.Cluster("3x2:a100,1x4:v100"),
			jobs: []policytest.JobState{policytest.Wait("j", 0, 6, 1000)},
			want: []string{"j:6:a100"}},
	})
}
