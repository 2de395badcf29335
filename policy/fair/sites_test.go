package fair

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// siteCase is one round on a cluster of several sites: its jobs, a site
// whose GPUs are all down or taken by inference (Snapshot.Down; "" for
// none), and the plan wanted (policytest.Runs).
type siteCase struct {
	name    string
	cluster *cluster.Cluster
	down    string
	jobs    []policytest.JobState
	want    []string
}

// cloudAndInfer is a cloud site beside an inference site.
func cloudAndInfer(t *testing.T, cloud, infer []cluster.NodeSpec) *cluster.Cluster {
	t.Helper()
	c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "cloud", Nodes: cloud},
		{Name: "infer", Kind: cluster.SiteInference, Nodes: infer},
	}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pinnedTo is x asking for GPU type typ.
func pinnedTo(x policytest.JobState, typ string) policytest.JobState { x.Job.GPUType = typ; return x }

// runSiteCases plans each case's round under spec and compares the plan,
// sorted first when sorted is set.
func runSiteCases(t *testing.T, spec string, sorted bool, cases []siteCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := policytest.Snap(t, 1000, tc.cluster, tc.jobs...)
			if tc.down != "" {
				s.Down = make([]bool, tc.cluster.TotalGPUs())
				for _, n := range tc.cluster.Nodes {
					if n.Site == tc.down {
						for i := range n.GPUs {
							s.Down[n.First+cluster.GPUID(i)] = true
						}
					}
				}
			}
			got := policytest.Runs(fam.Parse(t, spec, contract.Context{}).Schedule(s))
			if sorted {
				slices.Sort(got)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("plan %v, want %v", got, tc.want)
			}
		})
	}
}
