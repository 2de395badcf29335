package classic

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// TestGandivaGavelAgreement replays Gavel's generated_seed0_lam3600.trace
// on 8 V100 + 8 P100 + 8 K80 (one GPU per server) in 360 s rounds under
// gandiva:preset=gavel and compares the average JCT of jobs 100 to 199
// with Gavel's own simulator running its Gandiva policy
// (scheduler/policies/gandiva.py, randomised pairing, seed 0): 61,145 s, as
// reported in this project's issue 6 for
// scripts/drivers/simulate_scheduler_with_trace.py -c 8:8:8
// --num_gpus_per_server 1:1:1 -s 100 -e 200 --seed 0 with
// simulation_throughputs.json. tide must come within 10%. It reads
// ../shared/data/gavel and skips without it.
func TestGandivaGavelAgreement(t *testing.T) {
	dir := enginetest.SharedData(t) + "/gavel/"
	tr, err := trace.ReadFile(dir+"generated_seed0_lam3600.trace", "", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := table.LoadGavel(dir + "simulation_throughputs.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("8x1:v100,8x1:p100,8x1:k80"), Model: m,
		Policy: fam.Parse(t, "gandiva:preset=gavel", contract.Context{}), Placer: place.Pack{}, Round: 360}, tr.Jobs)
	if err != nil {
		t.Fatal(err)
	}
	r.Window = [2]int{100, 200}
	const gavel = 61145.0
	got := report.Summarize(r).AvgJCT
	if dev := math.Abs(got-gavel) / gavel; dev > 0.10 {
		t.Errorf("average JCT of jobs 100-199: %.0f s, Gavel's Gandiva %.0f s (%.1f%% off, want <= 10%%)", got, gavel, 100*dev)
	} else {
		t.Logf("average JCT of jobs 100-199: %.0f s, Gavel's Gandiva %.0f s (%.1f%% off)", got, gavel, 100*dev)
	}
}
