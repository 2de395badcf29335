package engine

import (
	"fmt"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// Adopt puts a waiting job on GPUs it already runs on, outside a round: a
// live executor that restarts after a crash finds the job's process still
// alive and keeps it rather than restarting it. No Change is emitted and no
// launch is counted (Starts is unchanged). It fails, changing nothing,
// unless the job is waiting (pending or preempted) and the GPUs exist, are
// distinct, are free, are of the job's type (when it names one) and their
// count lies in the job's [MinGPUs, MaxGPUs].
func (e *Engine) Adopt(id string, gpus []cluster.GPUID) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("adopt: unknown job %s", id)
	}
	if !st.State.Waiting() {
		return fmt.Errorf("adopt: job %s is %s, not waiting", id, st.State)
	}
	if n := len(gpus); n < st.Job.MinGPUs || n > st.Job.MaxGPUs {
		return fmt.Errorf("adopt: job %s on %d GPUs, outside its [%d, %d]", id, n, st.Job.MinGPUs, st.Job.MaxGPUs)
	}
	seen := make(map[cluster.GPUID]bool, len(gpus))
	for _, g := range gpus {
		if g < 0 || int(g) >= len(e.owner) {
			return fmt.Errorf("adopt: job %s on GPU %d, which does not exist", id, g)
		}
		if seen[g] {
			return fmt.Errorf("adopt: job %s lists GPU %d twice", id, g)
		}
		seen[g] = true
		if err := e.adoptable(g, st); err != nil {
			return err
		}
		if o := e.owner[g]; o != nil {
			return fmt.Errorf("adopt: job %s on GPU %d, which %s holds", id, g, o.Job.ID)
		}
		if t := e.cfg.Cluster.NodeOf(g).GPUType; st.Job.GPUType != "" && t != st.Job.GPUType {
			return fmt.Errorf("adopt: job %s asks for %s GPUs, GPU %d is %s", id, st.Job.GPUType, g, t)
		}
	}
	now := e.cfg.Clock.Now()
	e.accountJob(st, now)
	gs := append([]cluster.GPUID(nil), gpus...)
	for _, g := range gs {
		e.hold(g, st)
	}
	st.endSegment()
	st.GPUs, st.Alloc = gs, e.shape(gs)
	st.beginSegment()
	st.State = job.Running
	if st.FirstStart < 0 {
		st.FirstStart = now
	}
	st.LastStart = now
	return nil
}
