package alloc

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
)

// MaxGPUs is the most GPUs st may hold: its MaxGPUs, capped (as the Pollux
// artifact caps Optimus jobs) at batch / smallest per-GPU batch when its
// batch limits are known, from its hints or else from a model that knows
// them (perf.Observer); never below its MinGPUs.
func MaxGPUs(s *engine.Snapshot, st *engine.Status) int {
	j := st.Job
	var l goodput.Limits
	if h := st.Hints; h != nil && h.Limits.InitBatch > 0 {
		l = h.Limits
	} else if o, ok := s.Model.(perf.Observer); ok {
		l = o.Limits(j)
	}
	hi := j.MaxGPUs
	if l.InitBatch > 0 && l.MinLocal > 0 {
		batch := j.BatchSize
		if j.AdaptBatch {
			batch = l.MaxBatch
		}
		if batch <= 0 {
			batch = l.InitBatch
		}
		hi = min(hi, max(1, batch/l.MinLocal))
	}
	return max(hi, j.MinGPUs)
}
