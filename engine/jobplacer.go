package engine

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// JobPlacer is an optional Placer interface for placers that must know
// whose jobs they place: HiveD reads a job's tenant (its virtual cluster)
// and priority (guaranteed or opportunistic). The engine calls PlaceJobs
// instead of Place, with the same contract; jobOf returns an assignment's
// job, or nil for the engine's own pseudo-assignments (GPUs that are down).
type JobPlacer interface {
	Placer
	PlaceJobs(c *cluster.Cluster, held map[string][]cluster.GPUID, run []Assignment,
		jobOf func(id string) *job.Job) map[string][]cluster.GPUID
}

// callPlacer runs the placer, through PlaceJobs when it is a JobPlacer.
func (e *Engine) callPlacer(held map[string][]cluster.GPUID, run []Assignment) map[string][]cluster.GPUID {
	if jp, ok := e.cfg.Placer.(JobPlacer); ok {
		return jp.PlaceJobs(e.cfg.Cluster, held, run, func(id string) *job.Job {
			if st := e.jobs[id]; st != nil {
				return st.Job
			}
			return nil
		})
	}
	return e.cfg.Placer.Place(e.cfg.Cluster, held, run)
}
