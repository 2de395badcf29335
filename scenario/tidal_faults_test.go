package scenario

import (
	"testing"

	"github.com/tide-sched/tide/report"
)

// TestTidalAboveEdgeFlowUnderFaults: on the whole ITP deadline trace, at
// the faults tuning points where tidal's defaults before 28 Nov 2026 met
// exactly EdgeFlow's deadlines (faults-seed2 and -seed4 at MTBF 4 d, 2 d
// and 1 d; docs/tidal.md, eighth pass), tidal's defaults meet strictly
// more, and the old defaults (swap=off, admit_cloud=now) still tie: the
// gain is the admission rules', not a change elsewhere. Needs
// ../shared/data.
func TestTidalAboveEdgeFlowUnderFaults(t *testing.T) {
	needITPTrace(t)
	if testing.Short() {
		t.Skip("runs three policies on six points of 195 jobs")
	}
	const old = "tidal:swap=off:admit_cloud=now:admit_quantile=0.5"
	for _, file := range []string{"../scenarios/edgeflow-faults-seed2.yaml", "../scenarios/edgeflow-faults-seed4.yaml"} {
		for _, p := range metAt(t, file, []float64{345600, 172800, 86400}, "edgeflow", "tidal", old) {
			sc, r, met := p.name, p.res, p.met
			if met["tidal"] <= met["edgeflow"] {
				t.Errorf("%s %s=%v: tidal met %d, EdgeFlow %d: want strictly more", sc, r.Param, r.Value, met["tidal"], met["edgeflow"])
			}
			if met[old] != met["edgeflow"] {
				t.Errorf("%s %s=%v: the old defaults met %d, EdgeFlow %d: this case no longer shows the admission rules' gain", sc, r.Param, r.Value, met[old], met["edgeflow"])
			}
		}
	}
}

// TestTidalHoldBusyUnderFrequentFaults: at MTBF 6 h on faults-seed20 and
// -seed22 (held-out draws whose 6 h losses the fourteenth pass saw before
// it wrote hold_busy; docs/tidal.md), tidal's defaults meet strictly more
// deadlines than EdgeFlow, and with hold_busy=0:swap_batch=0 (the
// twelfth pass's defaults) strictly fewer: the re-trial's quantile on a cloud often
// down is what turns the loss into a gain. Needs ../shared/data.
func TestTidalHoldBusyUnderFrequentFaults(t *testing.T) {
	needITPTrace(t)
	if testing.Short() {
		t.Skip("runs three policies on two points of 195 jobs")
	}
	const off = "tidal:hold_busy=0:swap_batch=0"
	for _, file := range []string{"../scenarios/edgeflow-faults-seed20.yaml", "../scenarios/edgeflow-faults-seed22.yaml"} {
		for _, p := range metAt(t, file, []float64{21600}, "edgeflow", "tidal", off) {
			sc, r, met := p.name, p.res, p.met
			if met["tidal"] <= met["edgeflow"] {
				t.Errorf("%s %s=%v: tidal met %d, EdgeFlow %d: want strictly more", sc, r.Param, r.Value, met["tidal"], met["edgeflow"])
			}
			if met[off] >= met["edgeflow"] {
				t.Errorf("%s %s=%v: hold_busy=0 met %d, EdgeFlow %d: this case no longer shows what hold_busy changes", sc, r.Param, r.Value, met[off], met["edgeflow"])
			}
		}
	}
}

// pointMet is one sweep point of metAt: the scenario's name, the point,
// and the deadlines each policy met there.
type pointMet struct {
	name string
	res  Result
	met  map[string]int
}

// metAt runs policies on file at the sweep values given and returns the
// deadlines each met at each point (logged as it goes).
func metAt(t *testing.T, file string, values []float64, policies ...string) []pointMet {
	t.Helper()
	sc, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.SetSweepValues(values); err != nil {
		t.Fatal(err)
	}
	sc.Policies = policies
	res, err := sc.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []pointMet
	for _, r := range res {
		met := map[string]int{}
		for _, run := range r.Runs {
			s := report.Summarize(run)
			met[s.Name] = int(*s.DeadlineMetFrac*float64(s.JobsWithDeadline) + 0.5)
		}
		t.Logf("%s %s=%v: %v", sc.Name, r.Param, r.Value, met)
		out = append(out, pointMet{sc.Name, r, met})
	}
	return out
}
