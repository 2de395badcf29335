package main

import (
	"fmt"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// dropUnfit checks that the cluster could ever run each job: enough GPUs
// (of the job's type, when it names one) for its smallest allocation. With
// skip (--skip-bad) a job that does not fit is left out with a warning,
// like a bad trace row; without, it is an error that says so.
func dropUnfit(jobs []*job.Job, c *cluster.Cluster, skip bool, warn func(string)) ([]*job.Job, error) {
	out := jobs[:0:0]
	for _, j := range jobs {
		need := j.MinGPUs
		if need == 0 {
			need = j.GPUs
		}
		have := c.GPUsOfType(j.GPUType)
		if need <= have {
			out = append(out, j)
			continue
		}
		what := "GPUs"
		if j.GPUType != "" {
			what = j.GPUType + " GPUs"
		}
		msg := fmt.Sprintf("job %s: needs at least %d %s, the cluster has %d", j.ID, need, what, have)
		if !skip {
			return nil, fmt.Errorf("%s (give a larger --cluster, or --skip-bad to skip such jobs with a warning)", msg)
		}
		warn("skipping " + msg)
	}
	return out, nil
}
