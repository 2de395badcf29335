package gavel

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver"
)

// TestGavelEdgeNoStall: on a cluster with an edge site (one-GPU V100
// servers that come and go) every job finishes under each Gavel policy.
// gavel-fifo keeps the type a job is given until it finishes; it used to
// count every V100, up or not, as one pool, so it gave a job a type it
// could never be placed on (three GPUs on one-GPU servers, servers all
// down), or left a job holding V100 after its servers went down, and the
// job waited forever on an idle cluster (the simulator aborts such a run).
// pick=gavel gives the first job the last type in name order, v100, so it
// fails without the fix whatever the draws; pick=random over a few seeds.
// "then partly back" checks that a job moved off the edge still finishes
// when servers return. The last case has no edge site: a job asking for
// p100 was given v100 (pick=gavel) or drew it (pick=random), was skipped
// for it, and was never given a type again.
func TestGavelEdgeNoStall(t *testing.T) {
	edge := func(at float64, up int) capacity.Change {
		return capacity.Change{T: at, Site: "edge", Available: up, Inference: -1}
	}
	withEdge := enginetest.MultiSite(1, 4, 4, 0) // cloud 1 x 4 a100, edge 4 x 1 v100
	cases := []struct {
		name    string
		cluster *cluster.Cluster
		changes []capacity.Change
		jobs    []*job.Job
	}{
		{"bigger than any edge server", withEdge, nil,
			[]*job.Job{enginetest.Job("big").GPUs(3).Seconds(600).Obj()}},
		{"bigger than any edge server, behind a small job", withEdge, nil,
			[]*job.Job{enginetest.Job("a").Seconds(600).Obj(), enginetest.Job("big").At(10).GPUs(2).Seconds(600).Obj()}},
		{"edge down from the start", withEdge, []capacity.Change{edge(0, 0)},
			[]*job.Job{enginetest.Job("a").Seconds(600).Obj()}},
		{"edge goes down under its job", withEdge, []capacity.Change{edge(500, 0)},
			[]*job.Job{enginetest.Job("a").Seconds(1000).Obj()}},
		{"edge goes down, then partly back", withEdge, []capacity.Change{edge(500, 0), edge(900, 1)},
			[]*job.Job{enginetest.Job("a").Seconds(1000).Obj(), enginetest.Job("b").Seconds(1000).Obj()}},
		{"no edge site, a job pinned to a type", enginetest.Cluster("1x1:v100,1x1:p100"), nil,
			[]*job.Job{enginetest.Job("a").Type("p100").Seconds(600).Obj()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allFinish(t, tc.cluster, tc.changes, tc.jobs, gavelSpecs())
		})
	}
}

// gavelSpecs are the Gavel policies the no-stall tests run: gavel-fifo
// under both picks and a few seeds (its draws decide the type a job gets),
// fifo-perf, and the LP policies where a solver is available.
func gavelSpecs() []string {
	specs := []string{"gavel-fifo:pick=gavel", "gavel-fifo", "gavel-fifo:seed=1", "gavel-fifo:seed=2", "gavel-fifo:seed=3", "fifo-perf"}
	if solver.Available() == nil {
		specs = append(specs, "gavel-las", "gavel-ftf", "gavel-makespan", "gavel-throughput")
	}
	return specs
}

// allFinish simulates jobs on c, with the sites' capacity changes, under
// each of specs and fails t for a run that errs (a job left waiting for
// ever on an idle cluster aborts it) or leaves a job unfinished.
func allFinish(t *testing.T, c *cluster.Cluster, changes []capacity.Change, jobs []*job.Job, specs []string) {
	t.Helper()
	for _, spec := range specs {
		r, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{},
			Policy: fam.Parse(t, spec, contract.Context{}), Placer: place.Pack{}, Round: 360,
			Sites: &sim.Sites{Changes: changes}}, jobs)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if unfinished := policytest.Unfinished(r); len(unfinished) > 0 {
			t.Errorf("%s: jobs %s never finished", spec, strings.Join(unfinished, ", "))
		}
	}
}
