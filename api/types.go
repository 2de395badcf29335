package api

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Job states as the API shows them: the scheduler's (job.State) plus
// cancelled.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StatePreempted = "preempted"
	StateFinished  = "finished"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	// StateDeclined: the policy refused the job at admission (a deadline
	// policy such as elasticflow or edgeflow found it cannot finish in
	// time); it never runs.
	StateDeclined = "declined"
)

// Terminal reports whether a job in state s will never run again.
func Terminal(s string) bool {
	return s == StateFinished || s == StateFailed || s == StateCancelled || s == StateDeclined
}

// Job is the server's view of one job.
type Job struct {
	ID     string  `json:"id"`
	Name   string  `json:"name,omitempty"`
	Tenant string  `json:"tenant"`
	State  string  `json:"state"`
	Spec   JobSpec `json:"spec"`
	// GPUs are the device indices the job holds now (CUDA_VISIBLE_DEVICES).
	GPUs      []int      `json:"gpus,omitempty"`
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"` // first start
	Ended     *time.Time `json:"ended,omitempty"`
	// Restarts counts launches after the first (preemptions, resizes and
	// retries); Failures counts non-zero exits and lost processes.
	Restarts    int `json:"restarts"`
	Failures    int `json:"failures"`
	Preemptions int `json:"preemptions"`
	// Progress is the fraction of its work the job last reported, 0..1.
	Progress   float64    `json:"progress"`
	Throughput float64    `json:"throughput,omitempty"`
	Message    string     `json:"message,omitempty"` // the job's last report message
	ReportedAt *time.Time `json:"reported_at,omitempty"`
	// Reason says why a job failed, was cancelled or was declined; for a
	// job waiting (or preempted, or shrunk), the policy's explanation in its
	// own terms ("queue 2 of 3, attained 0.50 GPU-h; 4 job(s) ahead; ...").
	Reason string `json:"reason,omitempty"`
	// QueuePosition is a waiting job's 1-based position in the policy's
	// order in the last round; absent when the policy keeps no order.
	QueuePosition int `json:"queue_position,omitempty"`
	// PredictedStart is when the policy expects a waiting job to start,
	// assuming no new arrivals; absent when it cannot tell.
	PredictedStart *time.Time `json:"predicted_start,omitempty"`
	// Held: the job does not start until released; Waiting says why a
	// waiting job may not start yet (held, or a dependency unfinished).
	Held    bool   `json:"held,omitempty"`
	Waiting string `json:"waiting,omitempty"`
	// Requeues counts the times the job was put back in the queue (tide
	// requeue); each requeue starts a new run: attempts go on numbering,
	// failures count again from 0.
	Requeues int       `json:"requeues,omitempty"`
	Attempts []Attempt `json:"attempts,omitempty"`
	// Perf is what tide learned from the step times and gradient
	// statistics the job reported: the goodput model elastic policies
	// read. Absent until the job reports either; only GET /v1/jobs/{id}
	// includes it.
	Perf *JobPerf `json:"perf,omitempty"`
}

// JobPerf is the goodput model (Pollux's, package perf/goodput) fitted to
// a job's reports, as the scheduler sees it.
type JobPerf struct {
	// Observations are the configurations the job reported a step time
	// on, one each (the first report of a configuration counts).
	Observations []PerfObservation `json:"observations,omitempty"`
	// Model is the fitted throughput model's parameters; absent without
	// observations.
	Model *PerfModel `json:"model,omitempty"`
	// Predicted is what the fitted model predicts on one node, with the
	// job's batch size, for 1, 2, 4, ... GPUs up to the job's maximum and
	// for the GPU counts observed.
	Predicted []PerfPoint `json:"predicted,omitempty"`
	// GradSqr and GradVar are the latest gradient statistics reported;
	// NoiseScale is the gradient noise scale they imply, samples
	// (GradVar/GradSqr x the initial batch size): batches well below it
	// train as efficiently per sample as the initial one.
	GradSqr    float64 `json:"grad_sqr,omitempty"`
	GradVar    float64 `json:"grad_var,omitempty"`
	NoiseScale float64 `json:"noise_scale,omitempty"`
}

// PerfObservation is one measured configuration: seconds per optimizer
// step and its compute part, on Replicas GPUs over Nodes nodes with
// LocalBsz samples per GPU.
type PerfObservation struct {
	Nodes       int     `json:"nodes"`
	Replicas    int     `json:"replicas"`
	LocalBsz    int     `json:"local_bsz"`
	StepTime    float64 `json:"step_time"`
	ComputeTime float64 `json:"compute_time"`
}

// PerfModel is the throughput model (goodput.Params), seconds:
// T_compute = alpha_c + beta_c x local batch; the network time is
// alpha_n + beta_n x (replicas-2) across nodes, alpha_r + beta_r x
// (replicas-2) on one node; gamma in [1, 10] is how much they overlap.
type PerfModel struct {
	AlphaC float64 `json:"alpha_c"`
	BetaC  float64 `json:"beta_c"`
	AlphaN float64 `json:"alpha_n"`
	BetaN  float64 `json:"beta_n"`
	AlphaR float64 `json:"alpha_r"`
	BetaR  float64 `json:"beta_r"`
	Gamma  float64 `json:"gamma"`
}

// PerfPoint is the fitted model's prediction on GPUs GPUs of one node,
// with the batch the job would run there: its own, or for a job whose
// batch the policy adapts, the one of highest predicted goodput.
type PerfPoint struct {
	GPUs       int     `json:"gpus"`
	BatchSize  int     `json:"batch_size"`
	LocalBsz   int     `json:"local_bsz"`
	AccumSteps int     `json:"accum_steps,omitempty"`
	StepTime   float64 `json:"step_time"`  // seconds per optimizer step
	Throughput float64 `json:"throughput"` // samples per second
	// Speedup is the goodput (throughput weighted by the statistical
	// efficiency of the batch) relative to one GPU's.
	Speedup float64 `json:"speedup"`
}

// Attempt is one launch of a job's command.
type Attempt struct {
	N        int        `json:"n"`
	GPUs     []int      `json:"gpus"`
	PID      int        `json:"pid,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	// Outcome: running, finished, failed, preempted, resized, cancelled,
	// lost (gone without an exit code), interrupted (server shutdown).
	Outcome string `json:"outcome"`
	// BatchSize is the global batch the attempt was given (jobs with a
	// batch_size): LocalBsz per GPU in each pass, AccumSteps extra passes
	// accumulated per optimizer step.
	BatchSize  int `json:"batch_size,omitempty"`
	LocalBsz   int `json:"local_bsz,omitempty"`
	AccumSteps int `json:"accum_steps,omitempty"`
}

// JobList is GET /v1/jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
	// Next, when there are more jobs than the limit, is the value of
	// after that gets the next page.
	Next string `json:"next,omitempty"`
}

// Usage is GET /v1/usage: the GPU-hours each job used over [From, To)
// (jobs that used none are left out).
type Usage struct {
	From time.Time  `json:"from"`
	To   time.Time  `json:"to"`
	Jobs []JobUsage `json:"jobs"`
}

// JobUsage is one job's use of GPUs: GPUs held x hours its attempts ran.
type JobUsage struct {
	Job      string  `json:"job"`
	Name     string  `json:"name,omitempty"`
	Tenant   string  `json:"tenant"`
	State    string  `json:"state"`
	GPUHours float64 `json:"gpu_hours"`
}

// Cluster is GET /v1/cluster.
type Cluster struct {
	Policy    string `json:"policy"`
	Placer    string `json:"placer"`
	GPUs      []GPU  `json:"gpus"`
	Total     int    `json:"total"`
	Allocated int    `json:"allocated"`
	Queued    int    `json:"queued"`
	Running   int    `json:"running"`
	Rounds    int    `json:"rounds"`
}

// GPU is one device.
type GPU struct {
	Index     int     `json:"index"` // the CUDA index
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	MemoryGiB float64 `json:"memory_gib"`
	// Job holds it now: the job's ID when the caller may see that job,
	// "(other tenant)" otherwise; "" when free.
	Job string `json:"job,omitempty"`
	// Jobs, when several jobs share it (a packed pair, jobs holding parts
	// of it), are all of them as Job names one, in submission order;
	// Job is the first.
	Jobs []string `json:"jobs,omitempty"`
}

// Report is what a running job sends about itself to POST
// /v1/jobs/{id}/report (or writes, one JSON object a line, to
// $TIDE_REPORT_FILE). Every field is optional.
type Report struct {
	// Progress is the fraction of the job's work done, 0..1. Alternatively
	// Step and TotalSteps give it as Step/TotalSteps.
	Progress   *float64 `json:"progress,omitempty"`
	Step       float64  `json:"step,omitempty"`
	TotalSteps float64  `json:"total_steps,omitempty"`
	// Throughput in samples (or steps) per second, for display.
	Throughput float64 `json:"throughput,omitempty"`
	// One observation for the goodput model (Pollux): the seconds of one
	// optimizer step and of its compute part, on Replicas GPUs over Nodes
	// nodes with LocalBsz samples per GPU.
	StepTime    float64 `json:"step_time,omitempty"`
	ComputeTime float64 `json:"compute_time,omitempty"`
	LocalBsz    int     `json:"local_bsz,omitempty"`
	Replicas    int     `json:"replicas,omitempty"`
	Nodes       int     `json:"nodes,omitempty"`
	// Gradient statistics per sample of the initial batch: squared norm of
	// the true gradient and its variance (gradient noise scale).
	GradSqr float64 `json:"grad_sqr,omitempty"`
	GradVar float64 `json:"grad_var,omitempty"`
	// Message is a short status line shown by the CLI.
	Message string `json:"message,omitempty"`
}

// Validate checks a report's values.
func (r *Report) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, a ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	fin := func(name string, v float64) bool {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			add(name, "want a finite number >= 0, got %v", v)
			return false
		}
		return true
	}
	if r.Progress != nil && fin("progress", *r.Progress) && *r.Progress > 1 {
		add("progress", "want a fraction in [0, 1], got %v", *r.Progress)
	}
	fin("step", r.Step)
	if fin("total_steps", r.TotalSteps) && r.Step > 0 && r.TotalSteps == 0 {
		add("total_steps", "missing: step needs total_steps")
	}
	fin("throughput", r.Throughput)
	fin("step_time", r.StepTime)
	fin("compute_time", r.ComputeTime)
	fin("grad_sqr", r.GradSqr)
	fin("grad_var", r.GradVar)
	if r.LocalBsz < 0 || r.Replicas < 0 || r.Nodes < 0 {
		add("local_bsz", "local_bsz, replicas and nodes must be >= 0")
	}
	if len(r.Message) > 1024 || !printable(r.Message) {
		add("message", "at most 1024 bytes of printable UTF-8")
	}
	return errs
}

// Fraction is the progress the report gives, 0..1, and whether it gives one.
func (r *Report) Fraction() (float64, bool) {
	if r.Progress != nil {
		return *r.Progress, true
	}
	if r.TotalSteps > 0 {
		return min(1, r.Step/r.TotalSteps), true
	}
	return 0, false
}

// Tenant is an API user. Token is shown once, when the tenant is created.
type Tenant struct {
	Name    string    `json:"name"`
	Admin   bool      `json:"admin,omitempty"`
	Created time.Time `json:"created"`
	Token   string    `json:"token,omitempty"`
	// User is the Unix user the tenant's jobs run as (tide serve as root).
	User   string `json:"user,omitempty"`
	Limits Limits `json:"limits"`
	// Revoked: the tenant has no valid token until it is rotated.
	Revoked bool `json:"revoked,omitempty"`
}

// IdempotencyHeader is the request header of POST /v1/jobs that makes a
// submission safe to retry: a second request with the same key (from the
// same tenant) gets the job the first one created instead of a new one.
const IdempotencyHeader = "Idempotency-Key"

// CheckIdempotencyKey returns what is wrong with an idempotency key, or ""
// when it is valid (or empty: no key).
func CheckIdempotencyKey(key string) string {
	if len(key) > 255 {
		return fmt.Sprintf("at most 255 characters, got %d", len(key))
	}
	for _, r := range key {
		if r < '!' || r > '~' {
			return "want printable ASCII without spaces (a UUID, say)"
		}
	}
	return ""
}

// RequeueRequest is POST /v1/jobs/{id}/requeue's body (optional).
type RequeueRequest struct {
	// Hold requeues the job held: it waits until released (Slurm's
	// scontrol requeuehold).
	Hold bool `json:"hold,omitempty"`
}

// NewTenant is POST /v1/tenants.
type NewTenant struct {
	Name string `json:"name"`
	// User is the Unix user (login name, UID or UID:GID) the tenant's jobs
	// run as when tide serve runs as root.
	User   string  `json:"user,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
}

// TenantUpdate is PATCH /v1/tenants/{name}: the fields given replace the
// tenant's (Limits as a whole).
type TenantUpdate struct {
	User   *string `json:"user,omitempty"`
	Limits *Limits `json:"limits,omitempty"`
}

// Limits bound what one tenant may use; 0 means no limit (for
// MaxLogBytes: the server's --max-log-bytes).
type Limits struct {
	// MaxGPUs is a quota: the most GPUs the tenant's jobs hold at once.
	// Jobs beyond it wait (reason: quota), they are not refused.
	MaxGPUs int `json:"max_gpus,omitempty"`
	// MaxQueued is the most unfinished jobs the tenant may have waiting to
	// run; a submission beyond it is refused (429).
	MaxQueued int `json:"max_queued,omitempty"`
	// SubmitRate is the submissions per second a token may make (bursts of
	// up to max(1, SubmitRate)); beyond it POST /v1/jobs answers 429 with
	// Retry-After.
	SubmitRate float64 `json:"submit_rate,omitempty"`
	// MaxLogBytes is the size a job's output log may reach; output beyond
	// it is dropped, after a marker line.
	MaxLogBytes int64 `json:"max_log_bytes,omitempty"`
}

// Validate checks the limits' values.
func (l *Limits) Validate() []FieldError {
	var errs []FieldError
	if l == nil {
		return nil
	}
	if l.MaxGPUs < 0 || l.MaxGPUs > maxGPUs {
		errs = append(errs, FieldError{Field: "limits.max_gpus", Message: fmt.Sprintf("want 0 (no limit) to %d, got %d", maxGPUs, l.MaxGPUs)})
	}
	if l.MaxQueued < 0 {
		errs = append(errs, FieldError{Field: "limits.max_queued", Message: fmt.Sprintf("want >= 0 (0: no limit), got %d", l.MaxQueued)})
	}
	if math.IsNaN(l.SubmitRate) || math.IsInf(l.SubmitRate, 0) || l.SubmitRate < 0 {
		errs = append(errs, FieldError{Field: "limits.submit_rate", Message: fmt.Sprintf("want a finite number >= 0 (0: no limit), got %v", l.SubmitRate)})
	}
	if l.MaxLogBytes < 0 || (l.MaxLogBytes > 0 && l.MaxLogBytes < 1024) {
		errs = append(errs, FieldError{Field: "limits.max_log_bytes", Message: fmt.Sprintf("want 0 (the server's default) or at least 1024, got %d", l.MaxLogBytes)})
	}
	return errs
}

// Event is one entry of a job's event log.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Job     string    `json:"job,omitempty"`
	Kind    string    `json:"kind"`
	Attempt int       `json:"attempt,omitempty"`
	Message string    `json:"message,omitempty"`
}

// Error is every error response: a message and, for bad input, one entry
// per bad field.
type Error struct {
	Status  int          `json:"-"`
	Message string       `json:"error"`
	Fields  []FieldError `json:"fields,omitempty"`
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d: ", e.Status)
	}
	b.WriteString(e.Message)
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}
