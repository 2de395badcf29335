package flow

import (
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
)

// typedCluster is a cloud of cloudA100 nodes of 4 A100s and one node of 4
// V100s (the flow policies plan the cloud's first type, a100), edge
// one-V100 servers and an inference site of infer A100s.
func typedCluster(cloudA100, edge, infer int) *cluster.Cluster {
	spec := cluster.Spec{Sites: []cluster.SiteSpec{{Name: "cloud", Nodes: []cluster.NodeSpec{
		{Count: cloudA100, GPUs: 4, GPU: "a100"}, {Count: 1, GPUs: 4, GPU: "v100"}}}}}
	if edge > 0 {
		spec.Sites = append(spec.Sites, cluster.SiteSpec{Name: "edge", Kind: cluster.SiteEdge,
			Nodes: []cluster.NodeSpec{{Count: edge, GPUs: 1, GPU: "v100"}}})
	}
	if infer > 0 {
		spec.Sites = append(spec.Sites, cluster.SiteSpec{Name: "infer", Kind: cluster.SiteInference,
			Nodes: []cluster.NodeSpec{{Count: 1, GPUs: infer, GPU: "a100"}}})
	}
	c, err := spec.Build()
	if err != nil {
		panic(err)
	}
	return c
}

// TestFlowPinnedTypes: ElasticFlow, EdgeFlow and tidal plan the cloud as
// one GPU type (the one with the most GPUs, a100 here). A job pinned to that type
// is planned as any other; one pinned to another type is never given GPUs
// of the planned type (the engine refused every such plan, so one such job
// stopped every job): with a deadline it is declined at once, saying
// which types; without one it runs on GPUs of its own type the plan leaves
// idle, saying so. Edge servers (v100) take no job pinned to a100.
func TestFlowPinnedTypes(t *testing.T) {
	const declined = "deadline t=5000 s: the policy plans the cloud's a100 GPUs, the job asks for v100"
	cases := []struct {
		name string
		c    *cluster.Cluster
		jobs []*job.Job
		// want is each job's outcome (states), "" for any; reasons are
		// texts the first plan's reason of a job must contain.
		want    map[string]string
		reasons map[string]string
		// runs is a job the first plan runs, on GPUs of its type.
		runs string
	}{
		{
			name: "two cloud types",
			c:    typedCluster(2, 2, 0),
			jobs: []*job.Job{
				enginetest.Job("a-dl").Elastic(1, 2, 8).Seconds(1200).Deadline(5000).Type("a100").Obj(),
				enginetest.Job("a-be").Elastic(1, 2, 8).Seconds(600).Type("a100").Obj(),
				enginetest.Job("any-dl").Elastic(1, 2, 8).Seconds(900).Deadline(5000).Obj(),
				enginetest.Job("v-dl").Elastic(1, 2, 4).Seconds(600).Deadline(5000).Type("v100").Obj(),
				enginetest.Job("v-be").Elastic(1, 2, 4).Seconds(600).Type("v100").Obj(),
			},
			want: map[string]string{"a-dl": "met", "a-be": "met", "any-dl": "met", "v-dl": "declined", "v-be": "met"},
			reasons: map[string]string{
				"v-dl": declined,
				"v-be": "runs on 4 v100 GPUs the deadline plan leaves idle; asks for v100 GPUs, the policy plans the cloud's a100",
			},
			runs: "v-be",
		},
		{
			// "first" holds the four A100s until t=1000: "a-edge" (pinned
			// a100) meets its deadline only on a V100 edge server, where
			// EdgeFlow sent it; "u-edge" (the same, unpinned) may go there.
			name: "edge of another type",
			c:    typedCluster(1, 2, 0),
			jobs: []*job.Job{
				enginetest.Job("first").GPUs(4).Seconds(1000).Deadline(1100).Type("a100").Obj(),
				enginetest.Job("a-edge").At(1).Elastic(1, 1, 1).Seconds(500).Deadline(1200).Type("a100").Obj(),
				enginetest.Job("u-edge").At(1).Elastic(1, 1, 1).Seconds(500).Deadline(1200).Obj(),
				enginetest.Job("v-late").At(2).Elastic(1, 1, 4).Seconds(300).Type("v100").Obj(),
			},
			// Whether a-edge is declined or met depends on the policy
			// (tidal holds it and swaps it for "first"); it never runs on
			// the edge (below).
			want: map[string]string{"v-late": "met"},
		},
		{
			// "a-wait" (pinned a100) is admitted and waits for the A100s
			// "first" holds: tidal:park=true would park it on an idle
			// edge server, not one of these V100s.
			name: "waits for its share",
			c:    typedCluster(1, 2, 0),
			jobs: []*job.Job{
				enginetest.Job("first").GPUs(4).Seconds(1000).Deadline(1100).Type("a100").Obj(),
				enginetest.Job("a-wait").At(1).GPUs(1).Seconds(300).Deadline(3000).Type("a100").Obj(),
				enginetest.Job("u-wait").At(1).GPUs(1).Seconds(300).Deadline(3000).Obj(),
			},
			want: map[string]string{"first": "met", "a-wait": "met", "u-wait": "met"},
		},
		{
			// No deadlines: tidal lends GPUs by its knapsack over the
			// pools of every site and type, inference A100s included.
			name: "no deadlines",
			c:    typedCluster(1, 0, 4),
			jobs: []*job.Job{
				enginetest.Job("a-be").Elastic(1, 4, 8).Seconds(600).Type("a100").Obj(),
				enginetest.Job("u-be").Elastic(1, 4, 8).Seconds(600).Obj(),
				enginetest.Job("v-be").Elastic(1, 4, 8).Seconds(600).Type("v100").Obj(),
				enginetest.Job("v-be2").At(1).Elastic(1, 2, 8).Seconds(300).Type("v100").Obj(),
			},
			want: map[string]string{"a-be": "met", "u-be": "met", "v-be": "met", "v-be2": "met"},
		},
	}
	for _, spec := range []string{"elasticflow", "edgeflow", "tidal", "tidal:park=true"} {
		for _, tc := range cases {
			t.Run(spec+"/"+tc.name, func(t *testing.T) {
				// The first plan, on a snapshot of the jobs waiting.
				var js []policytest.JobState
				for _, j := range tc.jobs {
					js = append(js, policytest.JobState{Job: j})
				}
				s := policytest.Snap(t, 2, tc.c, js...)
				plan := fam.Parse(t, spec, contract.Context{}).Schedule(s)
				checkTypes(t, s, plan)
				if tc.runs != "" && !runsOn(plan, tc.runs) {
					t.Errorf("%s: the plan does not run %s: %v", spec, tc.runs, policytest.Runs(plan))
				}
				for id, want := range tc.reasons {
					if got := plan.Reasons[id].Text; !strings.Contains(got, want) {
						t.Errorf("%s: reason of %s %q, want it to say %q", spec, id, got, want)
					}
				}
				if tc.want["v-dl"] == "declined" && !slices.Contains(plan.Decline, "v-dl") {
					t.Errorf("%s: v-dl not declined at once: %v", spec, plan.Decline)
				}

				// The whole run: the engine refuses any plan that gives a
				// job GPUs of another type than it asks for.
				p := fam.Parse(t, spec, contract.Context{})
				r, err := sim.Run(sim.Config{Cluster: tc.c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{},
					OnEvents: true, Sites: &sim.Sites{}}, tc.jobs)
				if err != nil {
					t.Fatalf("%s: %v", spec, err)
				}
				got := map[string]string{}
				for _, j := range r.Jobs {
					switch {
					case j.State == string(job.Declined):
						got[j.ID] = "declined"
					case j.Finish >= 0 && (j.Deadline == 0 || j.Finish <= j.Deadline):
						got[j.ID] = "met"
					case j.Finish >= 0:
						got[j.ID] = "miss"
					default:
						got[j.ID] = "never ended"
					}
					if j.EdgeGPUSeconds > 0 && tc.jobs[slices.IndexFunc(tc.jobs, func(x *job.Job) bool { return x.ID == j.ID })].GPUType == "a100" {
						t.Errorf("%s: %s, pinned to a100, ran on the v100 edge", spec, j.ID)
					}
					if got[j.ID] == "declined" && tc.reasons[j.ID] != "" && !strings.Contains(j.Reason, tc.reasons[j.ID]) {
						t.Errorf("%s: %s declined with reason %q, want it to say %q", spec, j.ID, j.Reason, tc.reasons[j.ID])
					}
				}
				for id, want := range tc.want {
					if got[id] != want {
						t.Errorf("%s: %s %s, want %s (all: %v)", spec, id, got[id], want, got)
					}
				}
			})
		}
	}
}

// checkTypes fails t for every assignment of plan that gives a job GPUs of
// another type than it asks for, by the type named or the nodes.
func checkTypes(t *testing.T, s *engine.Snapshot, plan engine.Plan) {
	t.Helper()
	for _, a := range plan.Run {
		var st *engine.Status
		for _, x := range s.Jobs {
			if x.Job.ID == a.Job {
				st = x
			}
		}
		want := st.Job.GPUType
		if want == "" {
			continue
		}
		if a.GPUType != want {
			t.Errorf("plan gives %s %s GPUs, it asks for %s", a.Job, a.GPUType, want)
		}
		for _, n := range a.Nodes {
			if got := s.Cluster.Nodes[n.Node].GPUType; got != want {
				t.Errorf("plan places %s on node %d of %s, it asks for %s", a.Job, n.Node, got, want)
			}
		}
	}
}

// runsOn reports whether plan runs job id.
func runsOn(plan engine.Plan, id string) bool {
	for _, a := range plan.Run {
		if a.Job == id {
			return true
		}
	}
	return false
}

// TestFlowPlansTheMostGPUs: on a cloud of several GPU types the flow
// policies plan the type with the most GPUs, not the first node's: a
// cloud listing one A100 node before two V100 nodes (in tide kube, the
// nodes' names put them so) planned every job that names no type on the
// four A100s, the eight V100s idle.
func TestFlowPlansTheMostGPUs(t *testing.T) {
	build := func(nodes ...cluster.NodeSpec) *cluster.Cluster {
		c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{{Name: "cloud", Nodes: nodes}}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		want string
	}{
		{"more nodes of the second type", build(cluster.NodeSpec{Count: 1, GPUs: 4, GPU: "a100"}, cluster.NodeSpec{Count: 2, GPUs: 4, GPU: "v100"}), "v100"},
		{"GPUs, not nodes", build(cluster.NodeSpec{Count: 2, GPUs: 2, GPU: "v100"}, cluster.NodeSpec{Count: 1, GPUs: 8, GPU: "a100"}), "a100"},
		{"a tie: the first node's", build(cluster.NodeSpec{Count: 1, GPUs: 4, GPU: "v100"}, cluster.NodeSpec{Count: 1, GPUs: 4, GPU: "a100"}), "v100"},
	} {
		for _, spec := range []string{"elasticflow", "edgeflow", "tidal"} {
			t.Run(spec+"/"+tc.name, func(t *testing.T) {
				s := policytest.Snap(t, 2, tc.c,
					policytest.JobState{Job: enginetest.Job("dl").Elastic(1, 4, 4).Seconds(600).Deadline(5000).Obj()},
					policytest.JobState{Job: enginetest.Job("be").Elastic(1, 4, 4).Seconds(600).Obj()})
				plan := fam.Parse(t, spec, contract.Context{}).Schedule(s)
				checkTypes(t, s, plan)
				if len(plan.Run) != 2 {
					t.Fatalf("the plan runs %v, want both jobs", policytest.Runs(plan))
				}
				for _, a := range plan.Run {
					if a.GPUType != tc.want {
						t.Errorf("%s planned on %q, want %s", a.Job, a.GPUType, tc.want)
					}
				}
			})
		}
	}
}
