package engine

import (
	"fmt"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// Adopt puts a waiting job on GPUs it already runs on, outside a round: a
// live executor that restarts after a crash finds the job's process still
// alive and keeps it rather than restarting it. No Change is emitted and no
// launch is counted (Starts is unchanged). It fails, changing nothing,
// unless the job is waiting (pending or preempted) and the GPUs exist, are
// distinct, are free, are of the job's type (when it names one) and their
// count lies in the job's [MinGPUs, MaxGPUs]. With Config.Sharing, GPUs
// that one running whole-GPU job holds, all of them and no others, are
// free enough when the model rates the two jobs packed there: the job is
// adopted as that job's partner (space sharing; the two processes ran
// there as a pair).
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
	partner, err := e.adoptPartner(st, gpus)
	if err != nil {
		return err
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
		if o := e.owner[g]; o != nil && o != partner {
			return fmt.Errorf("adopt: job %s on GPU %d, which %s holds", id, g, o.Job.ID)
		}
		if t := e.cfg.Cluster.NodeOf(g).GPUType; st.Job.GPUType != "" && t != st.Job.GPUType {
			return fmt.Errorf("adopt: job %s asks for %s GPUs, GPU %d is %s", id, st.Job.GPUType, g, t)
		}
	}
	now := e.cfg.Clock.Now()
	e.accountJob(st, now)
	e.touch(st)
	gs := append([]cluster.GPUID(nil), gpus...)
	for _, g := range gs {
		e.hold(g, st)
	}
	st.endSegment()
	st.GPUs, st.Alloc = gs, e.shape(gs)
	if partner != nil {
		st.PackedWith, partner.PackedWith = partner.Job.ID, st.Job.ID
		e.touch(partner)
	}
	st.beginSegment()
	st.State = job.Running
	if st.FirstStart < 0 {
		st.FirstStart = now
	}
	st.LastStart = now
	return nil
}

// adoptPartner is the job st is adopted beside on gpus (see Adopt), nil
// when gpus are not all held by one job.
func (e *Engine) adoptPartner(st *Status, gpus []cluster.GPUID) (*Status, error) {
	if !e.cfg.Sharing || st.Job.Fractional() || len(gpus) == 0 {
		return nil, nil
	}
	g0 := gpus[0]
	if g0 < 0 || int(g0) >= len(e.owner) {
		return nil, nil // Adopt says why
	}
	o := e.owner[g0]
	if o == nil || o.Job.Fractional() || len(o.GPUs) != len(gpus) {
		return nil, nil
	}
	for _, g := range gpus {
		if !slices.Contains(o.GPUs, g) {
			return nil, nil
		}
	}
	if o.PackedWith != "" {
		return nil, fmt.Errorf("adopt: job %s on GPUs %v, which %s and %s share", st.Job.ID, gpus, o.Job.ID, o.PackedWith)
	}
	sh, ok := e.cfg.Model.(perf.Sharer)
	if ok {
		_, _, ok = sh.Shared(o.Job, st.Job, e.shape(o.GPUs))
	}
	if !ok {
		return nil, fmt.Errorf("adopt: job %s on GPUs %v beside %s: the %s model has no throughput for the pair there", st.Job.ID, gpus, o.Job.ID, e.cfg.Model.Name())
	}
	return o, nil
}
