package table

import (
	"bytes"
	"math"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// FuzzElasticFlowCSV: parsing never panics, and a table that parses gives
// finite, non-negative rates that never exceed its largest measured value.
func FuzzElasticFlowCSV(f *testing.F) {
	for _, s := range []string{
		smallCSV,
		from2CSV,
		"global_batch_size,1,2,4,8,16,32,64\n64,6.03,8.64,10.35,11.06,10.98,10.60,9.24\n",
		"global_batch_size,1,2\n32,3.0,\n64,nan,0\n",
		"\ufeffglobal_batch_size, 1\r\n 7 , 1e-300\r\n",
		"global_batch_size,1,1\n",
		"global_batch_size,1\n32,\"1\"x\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tb := NewTable()
		if err := tb.AddCSV("A100", "m", "fuzz.csv", bytes.NewReader(data)); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for _, interp := range []Interpolation{Linear, Floor} {
			tb.Interp = interp
			for _, bs := range tb.BatchSizes("m", "A100") {
				_, rates := tb.Measured("m", "A100", bs)
				best := 0.0
				for _, r := range rates {
					if !(r > 0) || math.IsInf(r, 0) {
						t.Fatalf("bs %d: measured rate %v", bs, r)
					}
					best = max(best, r)
				}
				j := &job.Job{ID: "f", Model: "m", BatchSize: bs, GPUs: 1, Work: 1, Unit: job.Iterations}
				for _, n := range []int{0, 1, 2, 3, 5, 8, 63, 64, 65, 1 << 20} {
					r, until := tb.Rate(j, perf.Packed("A100", n, 8), 0)
					if math.IsNaN(r) || r < 0 || r > best || !math.IsInf(until, 1) {
						t.Fatalf("bs %d on %d GPUs: rate %v (best %v), until %v", bs, n, r, best, until)
					}
				}
				_ = tb.Check(j)
				_ = tb.PeakGPUs("m", "A100", bs)
			}
		}
	})
}

// FuzzGavelJSON: parsing never panics, and a file that parses gives finite,
// non-negative isolated and co-located rates.
func FuzzGavelJSON(f *testing.F) {
	for _, s := range []string{
		smallGavel,
		`{"v100": {"('A', 1)": {"null": 1.5}}}`,
		`{"k80": {"(\"B's\", 2)": {"null": 0, "('A', 2)": [0.5, 1]}}, "k80_unconsolidated": {"('A', 2)": {"null": 3}}}`,
		`{"v100": {"('A\\x41', 1)": {"null": 1e308}}}`,
		`{"v100": {"('A', 1)": {"null": null}}}`,
		`{"v100": {"A": {}}}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGavel("fuzz.json", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		ok := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
		jts := g.JobTypes()
		for _, gpu := range g.GPUTypes() {
			for _, jt := range jts {
				if v, found := g.Isolated(jt.Name, jt.ScaleFactor, gpu); found && !ok(v) {
					t.Fatalf("isolated %v on %s: %v", jt, gpu, v)
				}
				j := &job.Job{ID: "f", Model: jt.Name, GPUs: jt.ScaleFactor, Work: 1, Unit: job.Iterations}
				if jt.ScaleFactor <= 64 {
					for _, a := range []perf.Alloc{perf.Packed(gpu, jt.ScaleFactor, 1), perf.Packed(gpu, jt.ScaleFactor, 8)} {
						if r, _ := g.Rate(j, a, 0); !ok(r) {
							t.Fatalf("rate %v on %+v: %v", jt, a, r)
						}
					}
				}
				_ = g.Check(j)
				for _, other := range jts {
					r1, r2, found := g.PairRate(jt.Name, jt.ScaleFactor, other.Name, other.ScaleFactor, gpu)
					if found && (!ok(r1) || !ok(r2)) {
						t.Fatalf("pair %v %v on %s: %v %v", jt, other, gpu, r1, r2)
					}
				}
			}
		}
	})
}
