package bound_test

import (
	"os"
	"testing"

	"github.com/tide-sched/tide/scenario"
	"github.com/tide-sched/tide/solver/solvertest"
)

// BenchmarkScenarioPoint: one point of a shipped scenario's deadline bound
// as tide sim --scenario FILE --bound computes it (scenario.Bounds: the
// point's jobs, model, sites and realised capacity, then Deadlines):
// edgeflow-faults at MTBF 6 h (195 jobs, ElasticFlow tables, a cloud of 4x8
// A100 and 8 one-V100 edge servers at half speed, both with faults). Needs
// ../shared/data (skips without it) and GLPK.
func BenchmarkScenarioPoint(b *testing.B) {
	const file = "../scenarios/edgeflow-faults.yaml"
	sc, err := scenario.Load(file)
	if err != nil {
		if _, serr := os.Stat("../../shared/data"); serr != nil {
			b.Skip("../shared/data absent: ", serr)
		}
		b.Fatal(err)
	}
	solvertest.Require(b)
	if err := sc.SetSweepValues([]float64{21600}); err != nil {
		b.Fatal(err)
	}
	var res []scenario.PointBound
	for b.Loop() {
		if res, err = sc.Bounds(nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res[0].Bound), "bound")
	b.ReportMetric(float64(res[0].Windows), "windows")
}
