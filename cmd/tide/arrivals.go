package main

import (
	"fmt"
	"math"

	"github.com/tide-sched/tide/job"
)

// scaleArrivals multiplies every submission time by f (0.25: arrivals four
// times denser, the same jobs in the same order) and moves each deadline by
// as much as its job's submission moved, so a job keeps its time to deadline.
// The jobs are copied: a parsed trace stays as read.
func scaleArrivals(jobs []*job.Job, f float64) ([]*job.Job, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return nil, fmt.Errorf("--arrival-scale %v: want a factor > 0 (0.25 makes arrivals four times denser)", f)
	}
	if f == 1 {
		return jobs, nil
	}
	out := make([]*job.Job, len(jobs))
	for i, j := range jobs {
		c := *j
		shift := j.Submit*f - j.Submit
		c.Submit = j.Submit * f
		if c.Deadline > 0 {
			c.Deadline += shift
		}
		if j.Utility != nil {
			u := job.Utility{Deadlines: make([]float64, len(j.Utility.Deadlines)), Values: j.Utility.Values}
			for k, d := range j.Utility.Deadlines {
				u.Deadlines[k] = d + shift
			}
			c.Utility = &u
		}
		if t := max(c.Submit, c.Deadline); t > job.MaxTime {
			return nil, fmt.Errorf("--arrival-scale %v: job %s would arrive or be due at %.3g s, past %g s (about 317 years)", f, j.ID, t, float64(job.MaxTime))
		}
		out[i] = &c
	}
	return out, nil
}
