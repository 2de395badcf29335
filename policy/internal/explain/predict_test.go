package explain_test

import (
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/internal/race"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestPredictPerSite: on a cluster of several sites FIFO's predicted
// starts (PredictStarts) count the free GPUs and the running jobs' ends
// per set of GPUs one job may take together, as the simulator runs them
// (classic.TestFIFOPredictsOnSites plays them out). Counted over the
// whole cluster, one GPU free on each of two sites started a job of 2 now
// (no prediction), and an end that freed 2 GPUs on one site beside 1 on
// another started a job of 3 then. The GPU types of one site are sets
// apart too, and so are the servers of an edge site alone. On one site of
// one type the predictions are what they always were. Each running job holds the GPUs from the first listed
// (at) on; the plan runs every running job and starts none.
func TestPredictPerSite(t *testing.T) {
	twoSites := sites(t, site("a", "", nodes(1, 4, "a100")), site("b", "", nodes(1, 4, "a100")))
	// first is the first GPU each running job holds (it holds those from
	// there on): one map for every case, so a job's ID names one place.
	first := map[string]int{}
	hold := func(id string, submit float64, gpus int, seconds float64, at int) policytest.JobState {
		first[id] = at
		return policytest.Hold(id, submit, gpus, seconds)
	}
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		jobs []policytest.JobState
		want map[string]float64 // predicted starts; 0 none
	}{{
		name: "one free on each of two sites",
		c:    twoSites,
		jobs: []policytest.JobState{
			hold("x", 0, 3, 100, 0), // site a, ends at 110
			hold("y", 1, 3, 300, 4), // site b, ends at 310
			policytest.Wait("w", 2, 2, 50),
		},
		want: map[string]float64{"w": 110}, // was none: "starts now"
	}, {
		name: "an end that frees too few on its site",
		c:    twoSites,
		jobs: []policytest.JobState{
			hold("x", 0, 2, 100, 0),  // site a, ends at 110
			hold("z", 1, 2, 1000, 2), // site a
			hold("y", 2, 3, 200, 4),  // site b, ends at 210
			policytest.Wait("w", 3, 3, 50),
		},
		want: map[string]float64{"w": 210}, // was 110
	}, {
		name: "the job ahead takes the site",
		c:    twoSites,
		jobs: []policytest.JobState{
			hold("x", 0, 4, 100, 0), // site a, ends at 110
			hold("y", 1, 2, 300, 4), // site b, ends at 310
			policytest.Wait("w1", 2, 3, 500),
			policytest.Wait("w2", 3, 3, 50),
		},
		want: map[string]float64{"w1": 110, "w2": 310}, // w2 was 110
	}, {
		name: "edge servers",
		c:    sites(t, site("a", "", nodes(1, 2, "a100")), site("e", cluster.SiteEdge, nodes(3, 1, "a100"))),
		jobs: []policytest.JobState{
			hold("x", 0, 2, 100, 0), // site a, ends at 110
			policytest.Wait("w", 1, 2, 50),
			policytest.Wait("w1", 2, 1, 50), // FIFO is strict: it waits behind w
		},
		want: map[string]float64{"w": 110, "w1": 110}, // were none
	}, {
		name: "a part of a GPU held: none rather than a guess",
		c:    twoSites,
		jobs: []policytest.JobState{
			hold("x", 0, 3, 100, 0), // site a, ends at 110
			{Job: enginetest.Job("f").At(1).GPUs(1).Share(0.5).Seconds(300).Obj(), Held: 1}, // GPU 3: site a
			hold("y", 2, 1, 300, 4), // site b, ends at 310
			policytest.Wait("w", 3, 4, 50),
		},
		// It starts at 310 (site a keeps part of GPU 3 busy); was 110.
		want: map[string]float64{"w": 0},
	}, {
		// One site of two types: counted over the cluster, a V100 and a
		// K80 freed at 110 started a job of 2 then.
		name: "one site of two types",
		c:    sites(t, site("a", "", nodes(1, 2, "v100"), nodes(1, 2, "k80"))),
		jobs: []policytest.JobState{
			hold("x", 0, 1, 100, 0),  // v100, ends at 110
			hold("v", 1, 1, 400, 1),  // v100, ends at 410
			hold("k1", 2, 1, 100, 2), // k80, ends at 110
			hold("k2", 3, 1, 250, 3), // k80, ends at 260
			policytest.Wait("w", 4, 2, 50),
		},
		want: map[string]float64{"w": 260}, // was 110
	}, {
		name: "an edge site alone",
		c:    sites(t, site("e", cluster.SiteEdge, nodes(2, 2, "a100"))),
		jobs: []policytest.JobState{
			hold("x", 0, 1, 100, 0),  // server 1, ends at 110
			hold("v", 1, 1, 400, 1),  // server 1, ends at 410
			hold("e1", 2, 1, 100, 2), // server 2, ends at 110
			hold("e2", 3, 1, 250, 3), // server 2, ends at 260
			policytest.Wait("w", 4, 2, 50),
		},
		want: map[string]float64{"w": 260}, // was 110
	}, {
		name: "one site: the free GPUs of the whole cluster, as always",
		c:    enginetest.Cluster("2x4:a100"),
		jobs: []policytest.JobState{
			hold("x", 0, 3, 100, 0),
			hold("y", 1, 3, 300, 4),
			policytest.Wait("w", 2, 2, 50),
			policytest.Wait("w3", 3, 3, 50),
		},
		want: map[string]float64{"w": 0, "w3": 110}, // w starts now
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := policytest.Snap(t, 10, tc.c, tc.jobs...)
			var order []*engine.Status
			plan := engine.Plan{Reasons: map[string]engine.Reason{}}
			for _, st := range s.Jobs {
				if len(st.GPUs) > 0 {
					if at, ok := first[st.Job.ID]; ok {
						for i := range st.GPUs {
							st.GPUs[i] = cluster.GPUID(at + i)
						}
					}
					plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: len(st.GPUs)})
					order = append(order, st)
				}
			}
			for _, st := range s.Jobs {
				if len(st.GPUs) == 0 {
					order = append(order, st)
					plan.Reasons[st.Job.ID] = engine.Reason{Text: "waits"}
				}
			}
			var sc explain.Scratch
			endOf := func(st *engine.Status, a engine.Assignment) float64 { return explain.ModelEnd(s, st, a) }
			sc.PredictStarts(s, &plan, order, true, endOf)
			for id, want := range tc.want {
				if got := plan.Reasons[id].PredictedStart; got != want {
					t.Errorf("%s: predicted start %g, want %g", id, got, want)
				}
			}
			// Again, in the memory the first call grew, with the ends
			// known (FIFO caches them): nothing allocated.
			if race.Enabled {
				return
			}
			ends := map[string]float64{}
			for _, st := range s.Jobs {
				ends[st.Job.ID] = endOf(st, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
			}
			known := func(st *engine.Status, _ engine.Assignment) float64 { return ends[st.Job.ID] }
			if n := testing.AllocsPerRun(5, func() { sc.PredictStarts(s, &plan, order, true, known) }); n != 0 {
				t.Errorf("a second call allocates %v times", n)
			}
		})
	}
}
