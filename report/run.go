// Package report turns simulation runs into the numbers and pictures people
// act on: summary metrics, side-by-side tables, JSON, per-job CSV and a
// self-contained HTML page with plots.
package report

// JobRecord is what a run recorded about one job. Times are seconds from the
// start of the trace; -1 means "never" (never started, never finished).
type JobRecord struct {
	ID       string  `json:"id"`
	Tenant   string  `json:"tenant,omitempty"`
	Model    string  `json:"model,omitempty"`
	GPUs     int     `json:"gpus"`   // GPUs requested (the trace's count)
	Submit   float64 `json:"submit"` // submission time
	Start    float64 `json:"start"`  // first start, -1 if never started
	Finish   float64 `json:"finish"` // completion, -1 if not finished
	Deadline float64 `json:"deadline,omitempty"`
	State    string  `json:"state"` // final lifecycle state (job.State)

	Preemptions int `json:"preemptions"` // times taken off all its GPUs
	Restarts    int `json:"restarts"`    // launches after the first (after preemption or resize)
	Resizes     int `json:"resizes"`     // changes of GPU count while running

	GPUSeconds       float64 `json:"gpu_seconds"`        // GPU-seconds allocated
	UsefulGPUSeconds float64 `json:"useful_gpu_seconds"` // GPU-seconds spent making progress
	RestartSeconds   float64 `json:"restart_seconds"`    // seconds lost to start/restart/resize costs
	// LowerBound is the job's JCT alone on the cluster at its best allocation
	// (start cost included, no queueing), s; 0 when unknown.
	LowerBound float64 `json:"lower_bound"`
}

// Sample is the cluster's state from time T until the next sample.
type Sample struct {
	T         float64 `json:"t"`
	Allocated int     `json:"allocated_gpus"` // GPUs held by jobs
	Useful    int     `json:"useful_gpus"`    // GPUs held by jobs that are making progress
	Queued    int     `json:"queued"`         // jobs submitted and waiting (pending or preempted)
	Running   int     `json:"running"`        // jobs holding GPUs
}

// Run is one policy replayed over one trace.
type Run struct {
	Policy    string      `json:"policy"`
	Trace     string      `json:"trace"`
	Cluster   string      `json:"cluster"`
	TotalGPUs int         `json:"total_gpus"`
	Seed      int64       `json:"seed"`
	Jobs      []JobRecord `json:"jobs"`     // in trace order
	Timeline  []Sample    `json:"timeline"` // in time order, one per change
	Events    int         `json:"events"`   // simulated events processed
	Rounds    int         `json:"rounds"`   // scheduling rounds run
	// Window, when Hi > Lo, restricts the metrics to jobs Lo..Hi-1 in trace
	// order (Gavel's -s/-e). Zero means all jobs.
	Window [2]int `json:"window,omitempty"`
}
