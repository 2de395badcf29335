package table

import (
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// Shared implements perf.Sharer: the co-located ("packed") throughputs of
// (j1.Model, j1.GPUs) and (j2.Model, j2.GPUs) on a.GPUType, from the pair
// entries of the file (PairRate). Like Rate, it needs a to hold at least the
// jobs' scale factor of GPUs; Gavel measured pairs of equal scale factors only.
func (g *Gavel) Shared(j1, j2 *job.Job, a perf.Alloc) (r1, r2 float64, ok bool) {
	if j1.GPUs < 1 || j1.GPUs != j2.GPUs || a.GPUs() < j1.GPUs {
		return 0, 0, false
	}
	return g.PairRate(j1.Model, j1.GPUs, j2.Model, j2.GPUs, a.GPUType)
}

var _ perf.Sharer = (*Gavel)(nil)
