// Package job holds what a user asks for (Job) and where a job is in its
// lifecycle (State).
//
// All times are seconds. In a simulation they count from the start of the
// trace; in a live system from the Unix epoch. tide never mixes the two.
package job

import (
	"fmt"
	"math"
	"time"
)

// Unit is the unit of a job's amount of work.
type Unit string

// Work units. Seconds means "seconds of running on the requested GPUs": the
// work of traces that carry only a duration.
const (
	Iterations Unit = "iterations"
	Samples    Unit = "samples"
	Epochs     Unit = "epochs"
	Seconds    Unit = "seconds"
)

// Job is a training job as submitted. It is immutable once accepted.
type Job struct {
	ID       string  // unique within a trace or server
	Submit   float64 // submission time, s
	Tenant   string  // owner (user, team, virtual cluster); "" means default
	Priority int     // larger is more important; 0 is the default

	// GPU request. A rigid job has MinGPUs == MaxGPUs. An elastic job can run
	// on any count in [MinGPUs, MaxGPUs]. GPUs is the count a non-elastic
	// policy gives it (the trace's request), within [MinGPUs, MaxGPUs].
	GPUs    int
	MinGPUs int
	MaxGPUs int
	GPUType string // "" = any type

	// Part of each GPU, for a job that does not need whole ones (GPU
	// sharing, fraction.go); all zero for whole GPUs. Share is the part of
	// each GPU's compute, in (0, 1); GPUMemGiB the GPU memory it needs on
	// each, GiB; MIG a MIG profile such as "1g.10gb", which fixes both.
	Share     float64
	GPUMemGiB float64
	MIG       string

	// CPUs and MemGiB are the host CPU cores and memory the whole job needs
	// beside its GPUs (not per GPU); 0 = not given. Multi-resource policies
	// (DRF) then charge it the cluster's CPUs and memory per GPU times its
	// GPU count. Nothing else reads them.
	CPUs   float64
	MemGiB float64

	Model     string // model / profile name, e.g. "cifar10"; "" for duration-only jobs
	BatchSize int    // global batch size, samples; 0 = model default
	// AdaptBatch lets the job's agent choose its batch size for each
	// allocation, maximising goodput (Pollux); BatchSize is then ignored.
	AdaptBatch bool

	Work float64 // amount of work, in WorkUnit (> 0)
	Unit Unit

	// Deadline is the absolute time by which the job should finish, s; 0 = none.
	Deadline float64
	// Utility, for a soft-deadline job (Chronus), lists later deadlines that
	// still earn something; nil when Deadline is the only one. It is a
	// pointer so that Job stays comparable.
	Utility *Utility
	// Duration is the job's run time on GPUs GPUs as recorded by the trace, s
	// (0 when unknown). Oracle policies (SRTF) may read it; others must not.
	Duration float64
}

// Utility is a soft-deadline job's deadline options: finishing by
// Deadlines[i] (absolute, s) earns Values[i]. Deadlines ascend, the first is
// Job.Deadline, and Values do not increase.
type Utility struct {
	Deadlines []float64
	Values    []float64
}

// Elastic reports whether the job can run on more than one GPU count.
func (j *Job) Elastic() bool { return j.MinGPUs < j.MaxGPUs }

// MaxTime bounds a job's times and durations, in seconds: about 317
// years, past any trace (Unix times included, to the year 2286). Past it a
// float64 second loses its microseconds, and a simulation that had to reach
// such a time would not end: a trace's 1e300 once hung tide sim.
const MaxTime = 1e10

// Unix is t in seconds since the Unix epoch, the time base of the live
// executors, exact for any year: float64(t.UnixNano()) overflows outside
// 1678-2262, and turned a deadline in 9999 into no deadline at all.
func Unix(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// LiveTime is Unix(t) for a time a live job gives (a deadline), or an
// error when it falls outside what a job's times may be: before 1970 or
// past MaxTime.
func LiveTime(t time.Time) (float64, error) {
	s := Unix(t)
	if s < 0 || s > MaxTime {
		return 0, fmt.Errorf("want a time from %s to %s, got %s", time.Unix(0, 0).UTC().Format(time.RFC3339),
			time.Unix(MaxTime, 0).UTC().Format(time.RFC3339), t.Format(time.RFC3339))
	}
	return s, nil
}

// Validate checks the fields a scheduler relies on and fills defaults:
// MinGPUs/MaxGPUs default to GPUs and GPUs to MaxGPUs.
func (j *Job) Validate() error {
	if j.ID == "" {
		return fmt.Errorf("job: id: missing")
	}
	if !(j.Submit >= 0 && j.Submit <= MaxTime) {
		return fmt.Errorf("job %s: submit time: want seconds in [0, %g], got %v", j.ID, float64(MaxTime), j.Submit)
	}
	if j.GPUs == 0 {
		j.GPUs = j.MaxGPUs
	}
	if j.MinGPUs == 0 {
		j.MinGPUs = j.GPUs
	}
	if j.MaxGPUs == 0 {
		j.MaxGPUs = j.GPUs
	}
	if j.GPUs <= 0 {
		return fmt.Errorf("job %s: gpus: want at least 1 GPU, got %d", j.ID, j.GPUs)
	}
	if j.MinGPUs <= 0 {
		return fmt.Errorf("job %s: min gpus: want at least 1 GPU, got %d", j.ID, j.MinGPUs)
	}
	if j.MinGPUs > j.MaxGPUs {
		return fmt.Errorf("job %s: min gpus %d > max gpus %d", j.ID, j.MinGPUs, j.MaxGPUs)
	}
	if j.GPUs < j.MinGPUs || j.GPUs > j.MaxGPUs {
		return fmt.Errorf("job %s: gpus %d outside [min %d, max %d]", j.ID, j.GPUs, j.MinGPUs, j.MaxGPUs)
	}
	if !(j.Work > 0) || math.IsInf(j.Work, 0) {
		return fmt.Errorf("job %s: work: want a finite number > 0, got %v", j.ID, j.Work)
	}
	if j.Unit == Seconds && j.Work > MaxTime {
		return fmt.Errorf("job %s: work: want at most %g seconds, got %v", j.ID, float64(MaxTime), j.Work)
	}
	switch j.Unit {
	case Iterations, Samples, Epochs, Seconds:
	case "":
		return fmt.Errorf("job %s: work unit: missing", j.ID)
	default:
		return fmt.Errorf("job %s: work unit %q: want iterations, samples, epochs or seconds", j.ID, j.Unit)
	}
	if j.BatchSize < 0 {
		return fmt.Errorf("job %s: batch size: want >= 0, got %d", j.ID, j.BatchSize)
	}
	if !(j.Deadline >= 0 && j.Deadline <= MaxTime) {
		return fmt.Errorf("job %s: deadline: want seconds in [0, %g], got %v", j.ID, float64(MaxTime), j.Deadline)
	}
	if u := j.Utility; u != nil {
		if err := u.check(j.Deadline); err != nil {
			return fmt.Errorf("job %s: utility: %w", j.ID, err)
		}
	}
	if j.CPUs < 0 || math.IsNaN(j.CPUs) || math.IsInf(j.CPUs, 0) {
		return fmt.Errorf("job %s: cpus: want a finite number >= 0, got %v", j.ID, j.CPUs)
	}
	if j.MemGiB < 0 || math.IsNaN(j.MemGiB) || math.IsInf(j.MemGiB, 0) {
		return fmt.Errorf("job %s: mem_gib: want a finite number >= 0, got %v", j.ID, j.MemGiB)
	}
	if err := j.validateFraction(); err != nil {
		return err
	}
	if !(j.Duration >= 0 && j.Duration <= MaxTime) {
		return fmt.Errorf("job %s: duration: want seconds in [0, %g], got %v", j.ID, float64(MaxTime), j.Duration)
	}
	return nil
}

// State is where a job is in its lifecycle.
//
//	pending ──start──▶ running ──finish──▶ finished
//	   │  ▲               │  ╲──fail────▶ failed
//	   │  └──restart── preempted ◀─preempt─┘
//	   └──admission refused──▶ declined
type State string

// Lifecycle states.
const (
	Pending   State = "pending"
	Running   State = "running"
	Preempted State = "preempted"
	Finished  State = "finished"
	Failed    State = "failed"
	Declined  State = "declined"
)

// Terminal reports whether a job in state s will never run again.
func (s State) Terminal() bool { return s == Finished || s == Failed || s == Declined }

// Waiting reports whether a job in state s wants GPUs but has none.
func (s State) Waiting() bool { return s == Pending || s == Preempted }

// Moved returns a copy of u with every deadline mapped by fn (for a trace
// whose times are shifted or scaled, so the options move with the job's
// Deadline); nil stays nil.
func (u *Utility) Moved(fn func(d float64) float64) *Utility {
	if u == nil {
		return nil
	}
	out := &Utility{Deadlines: make([]float64, len(u.Deadlines)), Values: append([]float64(nil), u.Values...)}
	for i, d := range u.Deadlines {
		out.Deadlines[i] = fn(d)
	}
	return out
}

func (u *Utility) check(deadline float64) error {
	if len(u.Deadlines) == 0 || len(u.Deadlines) != len(u.Values) {
		return fmt.Errorf("want as many values as deadlines, at least one; got %d and %d", len(u.Deadlines), len(u.Values))
	}
	if u.Deadlines[0] != deadline {
		return fmt.Errorf("first deadline %v is not the job's deadline %v", u.Deadlines[0], deadline)
	}
	for i, d := range u.Deadlines {
		v := u.Values[i]
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || math.IsNaN(d) || math.IsInf(d, 0) {
			return fmt.Errorf("option %d: deadline %v, value %v: want finite numbers, value >= 0", i, d, v)
		}
		if i > 0 && (d <= u.Deadlines[i-1] || v > u.Values[i-1]) {
			return fmt.Errorf("option %d: deadlines must ascend and values not increase", i)
		}
	}
	return nil
}
