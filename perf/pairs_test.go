package perf_test

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
)

// TestPairsRatios: on a V100, A runs at 10 it/s alone and 6 beside B, B
// at 5 alone and 3 beside A (the table); timed in seconds on 1 GPU, A
// packed runs at 0.6 of its speed and B at 0.6. Step times reported live
// replace the table's ratio for the job that reported both, and a pair the
// table does not measure is measured once both members reported.
func TestPairsRatios(t *testing.T) {
	g, err := table.ParseGavel("pairs.json", []byte(`{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 3.0]},
 "('B', 1)": {"null": 5.0},
 "('C', 1)": {"null": 4.0}
}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := &perf.Pairs{Base: perf.Duration{}, Table: g}
	mk := func(id, typ string) *job.Job {
		return &job.Job{ID: id, Model: typ, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 100, Unit: job.Seconds}
	}
	a, b, c := mk("ja", "A"), mk("jb", "B"), mk("jc", "C")
	v100 := perf.Packed("v100", 1, 4)
	near := func(x, want float64) bool { return math.Abs(x-want) < 1e-12 }
	if r1, r2, ok := p.Shared(a, b, v100); !ok || !near(r1, 0.6) || !near(r2, 0.6) {
		t.Errorf("A with B from the table: %v, %v, %v; want 0.6, 0.6", r1, r2, ok)
	}
	if r1, r2, ok := p.Shared(b, a, v100); !ok || !near(r1, 0.6) || !near(r2, 0.6) {
		t.Errorf("B with A from the table: %v, %v, %v; want 0.6, 0.6", r1, r2, ok)
	}
	if _, _, ok := p.Shared(a, b, perf.Packed("k80", 1, 4)); ok {
		t.Error("A with B on a K80, which the table does not measure: ok")
	}
	if _, _, ok := p.Shared(a, c, v100); ok {
		t.Error("A with C, not measured anywhere: ok")
	}
	// A reports 0.1 s steps alone and 0.2 s beside B: half its speed.
	p.Observe("ja", "", "V100", 0.1)
	p.Observe("ja", "jb", "v100", 0.2)
	if r1, r2, ok := p.Shared(a, b, v100); !ok || !near(r1, 0.5) || !near(r2, 0.6) {
		t.Errorf("A measured at half speed beside B: %v, %v, %v; want 0.5 (measured), 0.6 (table)", r1, r2, ok)
	}
	p.Observe("ja", "jc", "v100", 0.125)
	if _, _, ok := p.Shared(a, c, v100); ok {
		t.Error("A with C, measured for A only: ok")
	}
	p.Observe("jc", "", "v100", 1)
	p.Observe("jc", "ja", "v100", 2.5)
	if r1, r2, ok := p.Shared(a, c, v100); !ok || !near(r1, 0.8) || !near(r2, 0.4) {
		t.Errorf("A with C measured live: %v, %v, %v; want 0.8, 0.4", r1, r2, ok)
	}
	// Two GPUs of a one-GPU job: Base (duration) doubles its rate.
	if r1, _, ok := p.Shared(a, c, perf.Packed("v100", 2, 4)); !ok || !near(r1, 1.6) {
		t.Errorf("A with C on 2 GPUs: %v, %v; want 1.6", r1, ok)
	}
	p.Forget("ja")
	if r1, _, ok := p.Shared(a, b, v100); !ok || !near(r1, 0.6) {
		t.Errorf("A forgotten: %v, %v; want the table's 0.6", r1, ok)
	}
	p.Observe("jb", "", "v100", 0) // ignored
	p.Observe("jb", "ja", "v100", -1)
	if _, r2, _ := p.Shared(a, b, v100); !near(r2, 0.6) {
		t.Errorf("B after bad step times: %v, want the table's 0.6", r2)
	}
	if _, _, ok := (&perf.Pairs{Base: perf.Duration{}}).Shared(a, b, v100); ok {
		t.Error("no table, nothing measured: ok")
	}
}
