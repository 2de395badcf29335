package table

import (
	"math"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// MaxRate implements perf.Bounder: the highest rate, iterations/s, j runs
// at on any allocation in s, alone (Rate) or sharing its GPUs with a job of
// its scale factor (Shared). That is the most of
//
//   - its consolidated rate on s.GPUType, when some allocation of s on one
//     node holds j.GPUs GPUs;
//   - the rate Rate reads for a placement on two nodes or more (the
//     "_unconsolidated" table's, which beats the consolidated one for some
//     job types: V100 ResNet-50 at batch size 128 on 8 GPUs 13.94 against
//     10.29), when some allocation of s spans two nodes or more and holds
//     j.GPUs GPUs;
//   - its rate beside each partner of its scale factor measured on
//     s.GPUType, as PairRate reads it, when some allocation of s holds
//     j.GPUs GPUs;
//
// and 0 when no allocation of s holds j.GPUs GPUs. The rates are constant:
// until is +Inf. ok is always true.
func (g *Gavel) MaxRate(j *job.Job, s perf.Span, p float64) (rate, until float64, ok bool) {
	inf := math.Inf(1)
	n := max(s.MinGPUs, j.GPUs, 1) // the fewest GPUs of s that can run j
	if j.GPUs < 1 || n > s.MaxGPUs {
		return 0, inf, true
	}
	// Rate reads only a's GPU type, GPU count and node count.
	if s.PerNode <= 0 || n <= s.PerNode {
		rate, _ = g.Rate(j, perf.Alloc{GPUType: s.GPUType, PerNode: []int{n}}, p)
	}
	if m := max(n, 2); m <= s.MaxGPUs && s.Nodes != 1 && (s.PerNode <= 0 || s.Nodes <= 0 || m <= s.PerNode*s.Nodes) {
		r, _ := g.Rate(j, perf.Alloc{GPUType: s.GPUType, PerNode: []int{m - 1, 1}}, p)
		rate = math.Max(rate, r)
	}
	if gt := g.types[gpuKey(s.GPUType)]; gt != nil {
		rate = math.Max(rate, gt.bestPair[JobType{j.Model, j.GPUs}])
	}
	return rate, inf, true
}

var _ perf.Bounder = (*Gavel)(nil)

// bestPairs fills gt.bestPair: each job type's highest throughput beside a
// partner of its scale factor, as PairRate reads it (the entry in the
// job's own order, else the other's swapped).
func (gt *gavelType) bestPairs() {
	gt.bestPair = map[JobType]float64{}
	note := func(jt JobType, r float64) {
		if r > gt.bestPair[jt] {
			gt.bestPair[jt] = r
		}
	}
	for a, m := range gt.pairs {
		for b, pr := range m {
			if a.ScaleFactor != b.ScaleFactor {
				continue // Shared pairs equal scale factors only
			}
			note(a, pr[0])
			if _, both := gt.pairs[b][a]; !both {
				note(b, pr[1])
			}
		}
	}
}
