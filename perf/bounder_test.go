package perf_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/pollux"
)

// TestWrappersBoundRate: every wrapper of a perf.Model (SpeedFactors,
// Scaled, Pairs), wrapped around the Pollux profiles (a perf.Bounder whose
// rates depend on the placement and, for an adaptive job, on the batch
// configuration), has a MaxRate that is ok and at least the wrapper's own
// Rate on random placements and batch configurations of spans of each GPU
// type it treats apart (a scaled type, a type with a speed factor, one
// without: 0 under Strict), until the same progress. Around the duration
// model, which is no Bounder, each says it has no bound (ok false), so
// that the simulator prices packed allocations as it does for the
// duration model itself.
func TestWrappersBoundRate(t *testing.T) {
	pm, err := pollux.Load(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(base perf.Model) []perf.Bounder {
		return []perf.Bounder{
			perf.SpeedFactors{Base: base, Speed: map[string]float64{"t4": 1, "v100": 2.5}},
			perf.SpeedFactors{Base: base, Speed: map[string]float64{"v100": 0.5}, Strict: true},
			perf.Scaled{Model: base, Type: "k80", Ref: "t4", Lambda: 0.4},
			perf.Scaled{Model: perf.SpeedFactors{Base: base, Speed: map[string]float64{"t4": 3}}, Type: "k80", Ref: "t4", Lambda: 0.5},
			&perf.Pairs{Base: base},
		}
	}
	rng := rand.New(rand.NewSource(7))
	for _, w := range wrap(pm) {
		for _, name := range pm.ModelNames() {
			p := pm.Profiles[name]
			for _, typ := range []string{"t4", "V100", "k80", "a100"} {
				s := perf.Span{GPUType: typ, MinGPUs: 1, MaxGPUs: 12, PerNode: 4, Nodes: 6}
				for _, adapt := range []bool{false, true} {
					j := &job.Job{ID: "j", Model: name, Unit: job.Epochs, BatchSize: p.InitBatch, AdaptBatch: adapt}
					for range 60 {
						n := 1 + rng.Intn(s.MaxGPUs)
						var pl []int
						for left := n; left > 0; {
							g := 1 + rng.Intn(min(left, s.PerNode))
							pl = append(pl, g)
							left -= g
						}
						if len(pl) > s.Nodes {
							continue
						}
						a := perf.Alloc{GPUType: typ, PerNode: pl}
						if adapt && rng.Intn(2) > 0 {
							a.LocalBsz = 1 + rng.Intn(p.MaxLocalBsz)
							a.AccumSteps = rng.Intn(1 + p.MaxBatch/(n*a.LocalBsz))
						}
						x := rng.Float64() * w.Work(j)
						r, until := w.Rate(j, a, x)
						b, buntil, ok := w.MaxRate(j, s, x)
						if !ok {
							t.Fatalf("%s: MaxRate not ok around the Pollux profiles", w.Name())
						}
						if r > b*(1+1e-12) || (r > 0 && until != buntil) {
							t.Errorf("%s, %s on %s %v (batch %d+%d, adaptive %v) at %.3g: Rate %v until %v, MaxRate %v until %v",
								w.Name(), name, typ, pl, a.LocalBsz, a.AccumSteps, adapt, x, r, until, b, buntil)
						}
					}
				}
			}
		}
	}
	for _, w := range wrap(perf.Duration{}) {
		j := &job.Job{ID: "j", GPUs: 2, MinGPUs: 1, MaxGPUs: 4, Work: 100, Unit: job.Seconds}
		for _, typ := range []string{"t4", "v100", "k80"} {
			if _, _, ok := w.MaxRate(j, perf.Span{GPUType: typ, MinGPUs: 1, MaxGPUs: 4, PerNode: 4, Nodes: 1}, 0); ok {
				t.Errorf("%s on %s: MaxRate ok around the duration model, which has no bound", w.Name(), typ)
			}
		}
	}
}

// TestWrapperScalesBound: the wrappers scale the inner bound exactly as
// they scale rates, on a span where the inner bound is a known number
// (a model whose bound is the span's most GPUs, read on the type it is
// asked for): SpeedFactors by the span type's factor (0 for an unlisted
// type under Strict), Scaled by Lambda on its type, read on the reference
// type's span, Pairs not at all.
func TestWrapperScalesBound(t *testing.T) {
	base := typeBound{}
	s := perf.Span{GPUType: "V100", MinGPUs: 1, MaxGPUs: 6, PerNode: 4, Nodes: 2}
	k80 := s
	k80.GPUType = "k80"
	for _, c := range []struct {
		m    perf.Bounder
		s    perf.Span
		want float64
	}{
		{perf.SpeedFactors{Base: base, Speed: map[string]float64{"v100": 2.5}}, s, 2.5 * 6 * 100},
		{perf.SpeedFactors{Base: base, Speed: map[string]float64{"k80": 2}}, s, 6 * 100},
		{perf.SpeedFactors{Base: base, Speed: map[string]float64{"k80": 2}, Strict: true}, s, 0},
		{perf.Scaled{Model: base, Type: "v100", Ref: "a100", Lambda: 0.5}, s, 0.5 * 6 * 1000},
		{perf.Scaled{Model: base, Type: "v100", Ref: "a100", Lambda: 0.5}, k80, 6 * 10},
		{&perf.Pairs{Base: base}, k80, 6 * 10},
	} {
		r, until, ok := c.m.MaxRate(&job.Job{ID: "j"}, c.s, 0)
		if !ok || r != c.want || !math.IsInf(until, 1) {
			t.Errorf("%s on %s: MaxRate %v, %v, %v; want %v, +Inf, true", c.m.Name(), c.s.GPUType, r, until, ok, c.want)
		}
	}
}

// typeBound's bound is a span's most GPUs times 1000 on a100, 100 on
// v100 and 10 on any other type.
type typeBound struct{ perf.Duration }

func (typeBound) MaxRate(_ *job.Job, s perf.Span, _ float64) (float64, float64, bool) {
	per := map[string]float64{"a100": 1000, "v100": 100, "V100": 100}[s.GPUType]
	if per == 0 {
		per = 10
	}
	return float64(s.MaxGPUs) * per, math.Inf(1), true
}
