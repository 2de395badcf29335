package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/sim"
)

// TestFitsPartsPerSite: a job asking for part of each GPU fits only where
// one site (one server on an edge site) has enough GPUs of one type whose
// memory holds its part; sim.Fits, the engine at submission and Run refuse
// it up front, naming it. Seed 654 of a random search over workloads: a
// 2-GPU V100 job of MIG 2g.20gb beside two 16 GiB V100s in the cloud and
// four 1-GPU edge servers of 32 GiB V100s was accepted (four GPUs hold its
// part, over the cluster) and waited on an idle cluster until the
// simulator failed the run, blaming the policy.
func TestFitsPartsPerSite(t *testing.T) {
	nodes := []cluster.Node{
		{Name: "a0", GPUType: "a100", GPUs: 1},
		{Name: "a1", GPUType: "a100", GPUs: 1},
		{Name: "v", GPUType: "v100", GPUs: 2, GPUMem: 16},
	}
	for i := range 4 {
		nodes = append(nodes, cluster.Node{Name: fmt.Sprintf("e%d", i), Site: "edge", SiteKind: cluster.SiteEdge, GPUType: "v100", GPUs: 1})
	}
	c, err := cluster.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	// Seed 681's cluster: 16 T4s (16 GiB) and two 80 GiB V100s, one site.
	c2, err := cluster.New([]cluster.Node{{Name: "t", GPUType: "t4", GPUs: 16}, {Name: "v", GPUType: "v100", GPUs: 2, GPUMem: 80}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *cluster.Cluster
		j    *job.Job
		want string // "" fits
	}{
		{c, enginetest.Job("j8").GPUs(2).Type("v100").MIG("2g.20gb").Seconds(10).Obj(), "job j8: needs at least 2 v100 GPUs that hold its part of a GPU (mig 2g.20gb) on one site (a job never mixes types or spans sites), the most the cluster has is 1"},
		{c, enginetest.Job("one").Type("v100").MIG("2g.20gb").Seconds(10).Obj(), ""},
		{c, enginetest.Job("small").GPUs(2).Type("v100").MIG("1g.10gb").Seconds(10).Obj(), ""},
		{c, enginetest.Job("whole").GPUs(2).Type("v100").Seconds(10).Obj(), ""},
		{c, enginetest.Job("any").GPUs(3).GPUMem(30).Seconds(10).Obj(), "job any: needs at least 3 GPUs of one type that hold its part of a GPU (gpu_mem_gib 30) on one site (a job never mixes types or spans sites), the most the cluster has is 2"},
		{c2, enginetest.Job("u").GPUs(3).GPUMem(20).Seconds(10).Obj(), "job u: needs at least 3 GPUs of one type that hold its part of a GPU (gpu_mem_gib 20) on one site (a job never mixes types or spans sites), the most the cluster has is 2"},
		{c2, enginetest.Job("u2").GPUs(2).MIG("3g.40gb").Seconds(10).Obj(), ""},
		{c2, enginetest.Job("s").GPUs(16).Share(0.5).Seconds(10).Obj(), ""},
	} {
		err := sim.Fits(tc.c, tc.j)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want it to fit", tc.j.ID, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.j.ID, err, tc.want)
		}
		e, err := engine.New(engine.Config{Cluster: tc.c, Model: perf.Duration{}, Policy: &classic.FIFO{}, Placer: place.Pack{}, Clock: zeroClock{}, Sharing: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Submit(tc.j); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: engine Submit: %v, want %q (sim.Fits' rule)", tc.j.ID, err, tc.want)
		}
		if _, err := sim.Run(sim.Config{Cluster: tc.c, Model: perf.Duration{}, Policy: &classic.FIFO{}, Placer: place.Pack{}}, []*job.Job{tc.j}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run: %v, want %q", tc.j.ID, err, tc.want)
		}
	}
}

type zeroClock struct{}

func (zeroClock) Now() float64 { return 0 }
