package pollux

import (
	"math"
	"math/rand"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// TestMaxRateBoundsRate: MaxRate is at least Rate on random placements of
// a span (packed, spread, nodes fuller than the profiles measured), with
// the job's own batch and, for an adaptive job, with random batch
// configurations its agent may choose, at random progress; and a span of
// one placement gives that placement's rate exactly.
func TestMaxRateBoundsRate(t *testing.T) {
	m := artifact(t)
	rng := rand.New(rand.NewSource(1))
	for _, name := range m.ModelNames() {
		p := m.Profiles[name]
		for _, s := range []perf.Span{
			{GPUType: "t4", MinGPUs: 1, MaxGPUs: 64, PerNode: 4, Nodes: 16},
			{GPUType: "t4", MinGPUs: 3, MaxGPUs: 12, PerNode: 8, Nodes: 8},
			{GPUType: "t4", MinGPUs: 1, MaxGPUs: 6, PerNode: 2, Nodes: 3},
		} {
			for _, adapt := range []bool{false, true} {
				j := &job.Job{ID: "j", Model: name, Unit: job.Epochs, BatchSize: p.InitBatch * (1 + rng.Intn(2)), AdaptBatch: adapt}
				for range 300 {
					n := s.MinGPUs + rng.Intn(s.MaxGPUs-s.MinGPUs+1)
					var pl []int
					for left := n; left > 0; {
						g := 1 + rng.Intn(min(left, s.PerNode))
						pl = append(pl, g)
						left -= g
					}
					if len(pl) > s.Nodes {
						continue
					}
					a := perf.Alloc{GPUType: "t4", PerNode: pl}
					if adapt && rng.Intn(4) > 0 {
						a.LocalBsz = 1 + rng.Intn(p.MaxLocalBsz)
						a.AccumSteps = rng.Intn(1 + p.MaxBatch/(n*a.LocalBsz))
					}
					x := rng.Float64() * m.Work(j)
					r, until := m.Rate(j, a, x)
					b, buntil, ok := m.MaxRate(j, s, x)
					if !ok || r > b || (r > 0 && until != buntil) {
						t.Errorf("%s on %v (batch %d+%d, adaptive %v) at %.3g: rate %v until %v, MaxRate %v until %v (ok %v)",
							name, pl, a.LocalBsz, a.AccumSteps, adapt, x, r, until, b, buntil, ok)
					}
				}
			}
		}
		for _, pl := range [][]int{{1}, {4}, {8}} {
			j := &job.Job{ID: "j", Model: name, Unit: job.Epochs, BatchSize: p.MaxBatch}
			s := perf.Span{GPUType: "t4", MinGPUs: pl[0], MaxGPUs: pl[0], PerNode: pl[0], Nodes: 1}
			for e := range p.MaxEpochs {
				x := p.progress[e]
				r, _ := m.Rate(j, perf.Alloc{GPUType: "t4", PerNode: pl}, x)
				if b, _, _ := m.MaxRate(j, s, x); b != r || math.IsNaN(b) {
					t.Fatalf("%s alone on %v, epoch %d: MaxRate %v, Rate %v", name, pl, e, b, r)
				}
			}
		}
	}
}

// TestClassCurveIsThroughput: the curves spanRates resolves once per class
// give throughput's step and sync times bit for bit.
func TestClassCurveIsThroughput(t *testing.T) {
	m := artifact(t)
	for _, name := range m.ModelNames() {
		p := m.Profiles[name]
		for _, s := range []perf.Span{{MinGPUs: 1, MaxGPUs: 64, PerNode: 4, Nodes: 16}, {MinGPUs: 1, MaxGPUs: 40, PerNode: 8, Nodes: 5}} {
			for _, c := range p.classes(s) {
				cc := p.classCurve(c)
				for b := 1; b <= p.MaxLocalBsz+3; b += 1 + b/7 {
					s0, y0 := p.classThroughput(c, float64(b))
					s1, y1 := cc.at(float64(b))
					if s0 != s1 || y0 != y1 {
						t.Fatalf("%s class %+v at %d: throughput %v %v, classCurve %v %v", name, c, b, s0, y0, s1, y1)
					}
				}
			}
		}
	}
}
