package perf

import (
	"fmt"
	"math"

	"github.com/tide-sched/tide/job"
)

// Duration is the model of traces that carry only a run time: a job's work
// is its Duration seconds on its requested GPU count, and it runs at
// n/GPUs of that speed on n GPUs (linear scaling, the assumption of the
// Tiresias and Philly replays). Any GPU type runs it at the same speed.
type Duration struct {
	Cost CostTable
}

// Name implements Model.
func (Duration) Name() string { return "duration" }

// Check implements Model.
func (Duration) Check(j *job.Job) error {
	if j.Unit != job.Seconds {
		return fmt.Errorf("job %s: the duration model needs work in seconds, got %q", j.ID, j.Unit)
	}
	return nil
}

// Work implements Model: seconds on the requested GPUs.
func (Duration) Work(j *job.Job) float64 { return j.Work }

// Rate implements Model.
func (Duration) Rate(j *job.Job, a Alloc, p float64) (float64, float64) {
	n := a.GPUs()
	if n < j.MinGPUs || n == 0 {
		return 0, math.Inf(1)
	}
	return float64(n) / float64(j.GPUs), math.Inf(1)
}

// Costs implements Model.
func (d Duration) Costs(j *job.Job) Costs { return d.Cost.For(j.Model) }
