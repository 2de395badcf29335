package alloc

import (
	"cmp"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
)

// Rate is st's progress rate on n packed GPUs of type t (0: cannot run
// there), at its progress now: it reads a running job's progress through
// the snapshot (engine.Snapshot.Progress, which pulls it from the
// executor), so a policy that reads progress only through Rate may be
// engine.ProgressOnDemand.
func Rate(s *engine.Snapshot, st *engine.Status, n int, t string) float64 {
	r, _ := s.Model.Rate(st.Job, perf.Packed(t, n, s.GPUsPerNode[t]), s.Progress(st))
	return r
}

// Runs reports whether st can run on n packed GPUs of type t: whether the
// model's rate there is positive. A zero rate says the allocation cannot
// run the job, whatever its progress (perf.Model), so Runs asks the model
// at progress 0 and reads no job's progress: a policy that only asks
// whether a job can run on a type pulls none (engine.ProgressOnDemand).
func Runs(s *engine.Snapshot, st *engine.Status, n int, t string) bool {
	r, _ := s.Model.Rate(st.Job, perf.Packed(t, n, s.GPUsPerNode[t]), 0)
	return r > 0
}

// TypesBySpeed orders the cluster's GPU types fastest first: by the mean,
// over the jobs, of each job's rate there relative to its best type. Ties
// keep the cluster's (alphabetical) order. On a cluster of one type it
// reads no rate (nor any job's progress): there is nothing to order.
func TypesBySpeed(s *engine.Snapshot, jobs []*engine.Status) []string {
	types := slices.Clone(s.Cluster.GPUTypes())
	if len(types) < 2 {
		return types
	}
	score := make(map[string]float64, len(types))
	for _, st := range jobs {
		best := 0.0
		rates := make([]float64, len(types))
		for i, t := range types {
			rates[i] = Rate(s, st, st.Job.GPUs, t)
			best = max(best, rates[i])
		}
		if best > 0 {
			for i, t := range types {
				score[t] += rates[i] / best
			}
		}
	}
	slices.SortStableFunc(types, func(a, b string) int { return -cmp.Compare(score[a], score[b]) })
	return types
}

// Speedup is the mean over jobs of rate on fast / rate on slow, leaving out
// jobs that cannot run on one of them; 1 when none is left.
func Speedup(s *engine.Snapshot, jobs []*engine.Status, fast, slow string) float64 {
	sum, n := 0.0, 0
	for _, st := range jobs {
		rf, rs := Rate(s, st, st.Job.GPUs, fast), Rate(s, st, st.Job.GPUs, slow)
		if rf > 0 && rs > 0 {
			sum += rf / rs
			n++
		}
	}
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}
