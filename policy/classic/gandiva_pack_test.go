package classic

import (
	"fmt"
	"math"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
)

// runEvents replays jobs under spec with 60 s rounds and a round at every
// arrival and completion.
func runEvents(t *testing.T, spec, c string, m perf.Model, jobs ...*job.Job) map[string]report.JobRecord {
	t.Helper()
	return fam.Records(t, spec, c, m, 60, true, jobs...)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// Worked by hand, on one V100 with policytest.PairTable (A 10 it/s alone, B 5,
// C 8; A+B packed 6 + 3, A+C packed 4 + 2).
func TestGandivaPacking(t *testing.T) {
	g, err := table.ParseGavel("pairs.json", []byte(policytest.PairTable))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := policytest.PairJob("a", "A", 1000), policytest.PairJob("b", "B", 400), policytest.PairJob("c", "C", 400)

	// Two jobs ask for two GPUs on one: oversubscribed, so A and B are
	// paired from t=0 and packing helps (6/10 + 3/5 = 1.2): B ends at
	// 400/3 = 133.3 s, A, rerated alone, 200 it later at 10 it/s.
	got := runEvents(t, "gandiva:pack=true", "1x1:v100", g, a, b)
	if !near(got["b"].Finish, 400.0/3) || !near(got["a"].Finish, 400.0/3+20) {
		t.Errorf("A+B packed: a ends at %v, b at %v; want %v and %v", got["a"].Finish, got["b"].Finish, 400.0/3+20, 400.0/3)
	}

	// A and C are paired too, run packed 0-60 s (A 240 it, C 120), and
	// the round at 60 s measures 4/10 + 2/8 = 0.65: split for good. Both
	// used their quantum; A (first submitted... same time, ID order) keeps
	// the GPU to 120 (840 it), C runs 120-155 (280 it at 8), A ends its
	// last 160 it at 171 s.
	got = runEvents(t, "gandiva:pack=true", "1x1:v100", g, a, c)
	if !near(got["c"].Finish, 155) || !near(got["a"].Finish, 171) {
		t.Errorf("A+C tried then split: a ends at %v, c at %v; want 171 and 155", got["a"].Finish, got["c"].Finish)
	}

	// Without pack (the default) and on an executor that cannot pack, A and
	// B only take turns: 1,000/10 + 400/5 = 180 s of work end to end.
	for _, x := range []struct {
		spec string
		m    perf.Model
	}{{"gandiva", g}, {"gandiva:pack=true", policytest.NotSharer{Model: g}}} {
		got := runEvents(t, x.spec, "1x1:v100", x.m, a, b)
		if last := max(got["a"].Finish, got["b"].Finish); !near(last, 180) {
			t.Errorf("%s on %s: last job ends at %v, want 180 (no packing)", x.spec, x.m.Name(), last)
		}
	}

	// Not oversubscribed (two GPUs): no packing even with pack=true.
	got = runEvents(t, "gandiva:pack=true", "2x1:v100", g, a, b)
	if !near(got["a"].Finish, 100) || !near(got["b"].Finish, 80) {
		t.Errorf("two GPUs: a ends at %v, b at %v; want 100 and 80 (alone)", got["a"].Finish, got["b"].Finish)
	}
}

// Grow-shrink, worked by hand with the duration model (linear scaling) on
// four GPUs: a (elastic 1-4, 400 s on one GPU) grows to all four at t=0;
// b (two GPUs, 100 s) arrives at 50, when a has done 200 s of work: a
// shrinks to the two GPUs b leaves (a resize) and both end at 150. Without
// grow a runs on one GPU to 400 s.
func TestGandivaGrowShrink(t *testing.T) {
	a := enginetest.Job("a").Elastic(1, 1, 4).Seconds(400).Obj()
	b := enginetest.Job("b").At(50).GPUs(2).Seconds(100).Obj()
	got := runEvents(t, "gandiva:grow=true", "1x4:t4", perf.Duration{}, a, b)
	if !near(got["a"].Finish, 150) || !near(got["b"].Finish, 150) || got["a"].Resizes != 1 {
		t.Errorf("grow: a ends at %v after %d resizes, b at %v; want 150 after 1, 150", got["a"].Finish, got["a"].Resizes, got["b"].Finish)
	}
	got = runEvents(t, "gandiva", "1x4:t4", perf.Duration{}, a, b)
	if !near(got["a"].Finish, 400) || got["a"].Resizes != 0 {
		t.Errorf("no grow: a ends at %v after %d resizes; want 400 after 0", got["a"].Finish, got["a"].Resizes)
	}
}

// TestGandivaGrowOneSite: on a cluster of several sites a job grows only
// to the GPUs of its type one site (or edge server) has up. Grown to
// every idle GPU of the cluster, a lone job of up to ten GPUs was given
// nine beside a cloud node of eight and an edge server of one, was never
// placed, and waited for ever on an idle cluster (found by a random search
// over workloads, seed 252, gandiva:grow=true).
func TestGandivaGrowOneSite(t *testing.T) {
	node := func(name, site, kind string, gpus int) cluster.Node {
		return cluster.Node{Name: name, Site: site, SiteKind: kind, GPUType: "v100", GPUs: gpus}
	}
	for _, tc := range []struct {
		name  string
		nodes []cluster.Node
		want  string
	}{
		{"a cloud node of eight and an edge server", []cluster.Node{node("c", "cloud", "", 8), node("e", "edge", cluster.SiteEdge, 1)}, "a:8"},
		{"two cloud sites of four", []cluster.Node{node("c", "cloud", "", 4), node("d", "cloud2", "", 4)}, "a:4"},
		{"three edge servers", []cluster.Node{node("c", "cloud", "", 1), node("e", "edge", cluster.SiteEdge, 2), node("f", "edge", cluster.SiteEdge, 2)}, "a:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cluster.New(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			s := policytest.Snap(t, 0, c, policytest.JobState{Job: enginetest.Job("a").Elastic(1, 1, 10).Seconds(100).Obj()})
			got := policytest.Runs(fam.Parse(t, "gandiva:grow=true", contract.Context{}).Schedule(s))
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("plan %v, want [%s]", got, tc.want)
			}
		})
	}
}

// fourPairTable: four models at 10 it/s alone on a V100, every pair packed
// at 6 + 6 (normalised 1.2: packing helps).
const fourPairTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 6.0], "('C', 1)": [6.0, 6.0], "('D', 1)": [6.0, 6.0]},
 "('B', 1)": {"null": 10.0, "('C', 1)": [6.0, 6.0], "('D', 1)": [6.0, 6.0]},
 "('C', 1)": {"null": 10.0, "('D', 1)": [6.0, 6.0]},
 "('D', 1)": {"null": 10.0}
}}`

// Four jobs on three GPUs, every pair helping: both presets pair all four
// (two pairs). Gavel's model runs both pairs packed, on two GPUs, the third
// idle; the paper's packing absorbs the one GPU of oversubscription with
// one pair, the other two jobs alone: three GPUs busy.
func TestGandivaPacksOnlyWhatOversubscriptionNeeds(t *testing.T) {
	g, err := table.ParseGavel("four.json", []byte(fourPairTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec             string
		packed, assigned int
	}{{"gandiva:pack=true", 2, 4}, {"gandiva:preset=gavel:pack=true", 4, 4}} {
		jobs := []*job.Job{policytest.PairJob("a", "A", 100), policytest.PairJob("b", "B", 100), policytest.PairJob("c", "C", 100), policytest.PairJob("d", "D", 100)}
		s := policytest.JobsSnap(enginetest.Cluster("3x1:v100"), g, jobs)
		plan := fam.Parse(t, c.spec, contract.Context{}).Schedule(s)
		packed := 0
		for _, a := range plan.Run {
			if a.PackWith != "" {
				packed++
			}
		}
		if packed != c.packed || len(plan.Run) != c.assigned {
			t.Errorf("%s: %d assignments, %d packed; want %d, %d packed (plan %+v)", c.spec, len(plan.Run), packed, c.assigned, c.packed, plan.Run)
		}
	}
}

// A pair found running that the policy did not form (an executor
// restarted without Gandiva's saved state re-adopts both members on
// their GPU): a fresh Gandiva keeps it as a pair, under both presets,
// rather than pairing the job that waits with one of its members, and the
// waiting job stays out (the one GPU holds the pair).
func TestGandivaKeepsAdoptedPair(t *testing.T) {
	g, err := table.ParseGavel("four.json", []byte(fourPairTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"gandiva:pack=true", "gandiva:preset=gavel:pack=true"} {
		for seed := 0; seed < 8; seed++ {
			jobs := []*job.Job{policytest.PairJob("a", "A", 100), policytest.PairJob("b", "B", 100), policytest.PairJob("c", "C", 100)}
			s := policytest.JobsSnap(enginetest.Cluster("1x1:v100"), g, jobs)
			for i, p := range []string{"b", "a"} {
				st := s.Jobs[i]
				st.State, st.GPUs, st.PackedWith = job.Running, []cluster.GPUID{0}, p
				st.Alloc = perf.Alloc{GPUType: "v100", PerNode: []int{1}}
				st.FirstStart, st.LastStart = 990, 990 // within its quantum
			}
			full := fmt.Sprintf("%s:seed=%d", spec, seed)
			plan := fam.Parse(t, full, contract.Context{}).Schedule(s)
			got := map[string]string{}
			for _, a := range plan.Run {
				got[a.Job] = a.PackWith
			}
			if len(got) != 2 || got["a"] != "b" || got["b"] != "a" {
				t.Errorf("%s: plan %+v; want a and b kept packed, c waiting", full, plan.Run)
			}
		}
	}
}
