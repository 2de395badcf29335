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
	// WaitSeconds is the time the job spent waiting, holding no GPUs
	// (pending before its first start, and preempted later), from its
	// submission to its finish, or to the end of the run when it did not
	// finish. Start - Submit is the part before the first start.
	WaitSeconds float64 `json:"wait_seconds"`
	// LowerBound is the job's JCT alone on the cluster at its best allocation
	// (start cost included, no queueing), s; 0 when unknown.
	LowerBound float64 `json:"lower_bound"`

	// Multi-site runs (sim.Config.Sites) only; zero otherwise.
	CrossSiteMoves      int     `json:"cross_site_moves,omitempty"`      // moves between sites (cloud <-> edge), through remote storage
	IntraSiteMoves      int     `json:"intra_site_moves,omitempty"`      // moves to other GPUs of the same site while running, through memory
	MigrationSeconds    float64 `json:"migration_seconds,omitempty"`     // seconds lost to those moves (inside RestartSeconds)
	Reclaims            int     `json:"reclaims,omitempty"`              // times its GPUs were taken back (inference, a busy edge server)
	Faults              int     `json:"faults,omitempty"`                // times a node it ran on failed
	EdgeGPUSeconds      float64 `json:"edge_gpu_seconds,omitempty"`      // GPU-seconds held on edge sites
	InferenceGPUSeconds float64 `json:"inference_gpu_seconds,omitempty"` // GPU-seconds held on inference pools
	Priority            int     `json:"priority,omitempty"`

	// SharedGPUSeconds is the GPU-seconds the job did not hold because it
	// shared its GPUs: half of a packed pair's, the rest of each GPU a
	// fractional job held part of (docs/sharing.md).
	SharedGPUSeconds float64 `json:"shared_gpu_seconds,omitempty"`

	// The policy's explanation the last time it left the job waiting,
	// preempted, shrank or declined it (engine.Reason); empty when it never
	// did, or gave none.
	Reason         string  `json:"reason,omitempty"`
	QueuePosition  int     `json:"queue_position,omitempty"`  // 1-based position in the policy's order then; 0 unknown
	PredictedStart float64 `json:"predicted_start,omitempty"` // the start the policy predicted then, s; 0 unknown
}

// WarningCount is how many rounds a policy raised one warning in a run.
type WarningCount struct {
	Kind   string  `json:"kind"` // engine.Warning.Kind, "fallback" for a fallback
	Reason string  `json:"reason"`
	Rounds int     `json:"rounds"`
	First  float64 `json:"first"` // time of the first, s
}

// SiteUsage is one site's use over a multi-site run.
type SiteUsage struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	GPUs int    `json:"gpus"`
	// UpGPUSeconds integrates the GPUs available to training over the run;
	// AllocGPUSeconds the GPUs jobs held.
	UpGPUSeconds    float64 `json:"up_gpu_seconds"`
	AllocGPUSeconds float64 `json:"alloc_gpu_seconds"`
}

// Sample is the cluster's state from time T until the next sample. Its
// counts are 32-bit (32 bytes a sample: a run of millions of jobs keeps
// millions of samples).
type Sample struct {
	T         float64 `json:"t"`
	Allocated int32   `json:"allocated_gpus"` // GPUs held by jobs
	Useful    int32   `json:"useful_gpus"`    // GPUs held by jobs that are making progress
	Queued    int32   `json:"queued"`         // jobs submitted and waiting (pending or preempted)
	Running   int32   `json:"running"`        // jobs holding GPUs
	// Tenants is how many entries of the run's TenantLog are in effect
	// from this sample on: the GPUs each tenant holds (Run.TenantsAt,
	// TenantReplay). A log, not a map per sample: a run of millions of
	// jobs changes some tenant's GPUs at nearly every sample.
	Tenants int32 `json:"tenant_log_len,omitempty"`
	// Fragmented is the free GPUs no waiting job fits (see Fragmented).
	Fragmented int32 `json:"fragmented_gpus,omitempty"`
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
	// TenantNames and TenantLog record the GPUs held per tenant ("" =
	// jobs with no tenant) over time, when the trace has more than one
	// tenant (nil otherwise): each entry sets one tenant's count, and a
	// sample's Tenants says how many entries are in effect from it on.
	TenantNames []string       `json:"tenant_names,omitempty"`
	TenantLog   []TenantChange `json:"tenant_log,omitempty"`
	Events      int            `json:"events"` // simulated events processed
	Rounds      int            `json:"rounds"` // scheduling rounds run
	// Window, when Hi > Lo, restricts the metrics to jobs Lo..Hi-1 in trace
	// order (Gavel's -s/-e). Zero means all jobs.
	Window [2]int `json:"window,omitempty"`

	// Multi-site runs only.
	Sites []SiteUsage `json:"sites,omitempty"`
	// InferenceWaits counts the times inference had to wait for training
	// jobs to checkpoint before it got GPUs back; InferenceWaitSeconds sums
	// those waits.
	InferenceWaits       int     `json:"inference_waits,omitempty"`
	InferenceWaitSeconds float64 `json:"inference_wait_seconds,omitempty"`

	// Warnings counts the policy's warnings by kind and reason, in the
	// order first seen; absent when it raised none.
	Warnings []WarningCount `json:"warnings,omitempty"`
}

// Fallbacks is the number of rounds in which the policy fell back to a
// simpler rule (warnings of kind "fallback").
func (r *Run) Fallbacks() int {
	n := 0
	for _, w := range r.Warnings {
		if w.Kind == "fallback" {
			n += w.Rounds
		}
	}
	return n
}

// TenantChange sets the GPUs one tenant (an index in Run.TenantNames)
// holds.
type TenantChange struct {
	Tenant int32 `json:"tenant"`
	GPUs   int32 `json:"gpus"`
}

// TenantReplay walks a run's tenant log forward, sample by sample.
type TenantReplay struct {
	r    *Run
	next int   // log entries applied
	gpus []int // by tenant index
}

// TenantReplay returns a replay of r's tenant log from its start.
func (r *Run) TenantReplay() *TenantReplay {
	return &TenantReplay{r: r, gpus: make([]int, len(r.TenantNames))}
}

// At returns the GPUs each tenant (by index in TenantNames) holds at
// sample s, one of the run's; the slice is the replay's, valid until the
// next call. Samples taken in time order cost only the log between them.
func (p *TenantReplay) At(s *Sample) []int {
	if int(s.Tenants) < p.next {
		p.next = 0
		clear(p.gpus)
	}
	for ; p.next < int(s.Tenants) && p.next < len(p.r.TenantLog); p.next++ {
		c := p.r.TenantLog[p.next]
		p.gpus[c.Tenant] = int(c.GPUs)
	}
	return p.gpus
}

// TenantsAt returns the GPUs each tenant holding some holds at sample
// i, by name (nil without tenants).
func (r *Run) TenantsAt(i int) map[string]int {
	if len(r.TenantNames) == 0 {
		return nil
	}
	m := map[string]int{}
	for k, n := range r.TenantReplay().At(&r.Timeline[i]) {
		if n > 0 {
			m[r.TenantNames[k]] = n
		}
	}
	return m
}
