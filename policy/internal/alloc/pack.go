package alloc

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
)

// PackGain is r1/T1 + r2/T2 for a and b packed on n GPUs of type t; ok is false
// when the pair was not measured there or a member cannot run there.
func PackGain(s *engine.Snapshot, sh perf.Sharer, a, b *engine.Status, t string) (float64, bool) {
	alloc := perf.Packed(t, a.Job.GPUs, s.GPUsPerNode[t])
	r1, r2, ok := sh.Shared(a.Job, b.Job, alloc)
	t1, t2 := Rate(s, a, a.Job.GPUs, t), Rate(s, b, b.Job.GPUs, t)
	if !ok || r1 <= 0 || r2 <= 0 || t1 <= 0 || t2 <= 0 {
		return 0, false
	}
	return r1/t1 + r2/t2, true
}

// Grow gives idle GPUs to the planned elastic jobs when no job waits, as
// far as the model says more GPUs make each faster; packed jobs keep
// their size. When jobs wait, run is returned as planned, so grown jobs
// shrink back to their requested count. On a cluster of several sites no
// job grows past the GPUs of its type one site (or edge server) has up
// (Snapshot.Largest): a job never spans sites, and one grown past them
// was never placed and waited for ever on an idle cluster.
func Grow(s *engine.Snapshot, run []engine.Assignment) []engine.Assignment {
	if len(run) < len(s.Jobs) {
		return run // some job waits: everyone at its requested count
	}
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	one := len(s.Cluster.GPUTypes()) == 1
	multiSite := len(s.Cluster.Sites()) > 1
	free := map[string]int{}
	for _, t := range s.Cluster.GPUTypes() {
		free[t] = s.Available("", t)
	}
	typeOf := func(a engine.Assignment) string {
		if a.GPUType == "" && one {
			return s.Cluster.GPUTypes()[0]
		}
		return a.GPUType
	}
	for _, a := range run {
		if t := typeOf(a); t != "" && (a.PackWith == "" || a.Job < a.PackWith) {
			free[t] -= a.GPUs
		}
	}
	for i := range run {
		a := &run[i]
		st, t := byID[a.Job], typeOf(*a)
		if t == "" || a.PackWith != "" || len(a.Nodes) > 0 || a.GPUs >= st.Job.MaxGPUs {
			continue
		}
		n, most := a.GPUs, st.Job.MaxGPUs
		if multiSite {
			most = min(most, s.Largest(t))
		}
		for n < most && free[t] > 0 && Rate(s, st, n+1, t) > Rate(s, st, n, t) {
			n++
			free[t]--
		}
		a.GPUs = n
	}
	return run
}

// PairKey names a pair of job IDs, in order.
func PairKey(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "\x00" + b
}
