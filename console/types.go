package console

import (
	"errors"
	"time"
)

// Principal is who a request comes from: a tenant, or the admin.
type Principal struct {
	Tenant string `json:"tenant"`
	Admin  bool   `json:"admin"`
}

// sees reports whether p may see the jobs of tenant.
func (p Principal) sees(tenant string) bool { return p.Admin || p.Tenant == tenant }

// Source is what the console shows: tide serve's state or tide kube's. It
// must be safe for concurrent use.
type Source interface {
	// Auth checks an API token (the same tokens as the API's).
	Auth(token string) (Principal, bool)
	// Snapshot is the state now, every job included (the console filters
	// what a principal may see). It returns ErrClosed once the source has
	// shut down. The console does not modify it.
	Snapshot() (*Snapshot, error)
	// Detail is one job's history and log tail, or ErrNotFound when p may
	// not see it.
	Detail(p Principal, id string) (*Detail, error)
}

// Actor is a Source on which owners may act on their jobs. Actions lists
// the actions it supports ("cancel", "hold", "release").
type Actor interface {
	Actions() []string
	Act(p Principal, id, action string) error
}

// Replayer is a Source whose queue can be replayed forward in the
// simulator (the what-if view).
type Replayer interface {
	Replay() (*Replay, error)
}

// Errors a Source returns.
var (
	ErrClosed   = errors.New("console: the source has shut down")
	ErrNotFound = errors.New("no such job")
)

// ActionError is a refused action (a job already over, say); the console
// answers 409 with its message.
type ActionError struct{ Msg string }

func (e *ActionError) Error() string { return e.Msg }

// Snapshot is the state of a cluster and its queue at one instant.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Kind is the source: "tide serve" or "tide kube".
	Kind   string `json:"kind"`
	Policy string `json:"policy"`
	Placer string `json:"placer,omitempty"`
	Rounds int    `json:"rounds"`
	Nodes  []Node `json:"-"`
	// Jobs are the active jobs and the ended ones the source still knows.
	Jobs []Job `json:"-"`
	// Quotas are the tenants' guaranteed GPUs (none when empty).
	Quotas map[string]int `json:"-"`
	// Unquoted says what a tenant without a quota may use: false, none of
	// its own (what it holds is borrowed: tide kube's quotas); true, every
	// GPU (tide serve's max_gpus limits only the tenants that have one).
	Unquoted bool `json:"-"`
	// Tenants are every tenant known, with or without jobs.
	Tenants []string `json:"-"`
}

// Node is one machine and its GPUs.
type Node struct {
	Name string `json:"name"`
	// Site is the node's site name; SiteKind cloud, edge or inference.
	Site     string `json:"site"`
	SiteKind string `json:"site_kind"`
	GPUType  string `json:"gpu_type"`
	GPUs     []GPU  `json:"gpus"`
}

// GPU is one device.
type GPU struct {
	// Label names it on its node (the CUDA index on tide serve).
	Label string `json:"label"`
	// Down: not usable (failed, cordoned); Reclaimed: taken back by its
	// owner (an inference pool reclaiming lent GPUs).
	Down      bool `json:"down,omitempty"`
	Reclaimed bool `json:"reclaimed,omitempty"`
	// Why says why it is down or taken back ("node n1 was cordoned").
	Why    string `json:"why,omitempty"`
	Job    string `json:"job,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// Job states (the API's).
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StatePreempted = "preempted"
	StateHeld      = "held"
)

// Job is one job as the console lists it.
type Job struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Tenant   string `json:"tenant"`
	State    string `json:"state"`
	GPUs     int    `json:"gpus"` // requested
	MinGPUs  int    `json:"min_gpus,omitempty"`
	MaxGPUs  int    `json:"max_gpus,omitempty"`
	GPUType  string `json:"gpu_type,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// Held is the GPUs it holds now; Working whether its process runs on
	// them (GPUs held by a job still launching or backing off are
	// allocated but not useful).
	Held    int  `json:"held"`
	Working bool `json:"working,omitempty"`
	// Position is its 1-based place in the policy's order (0: none);
	// Reason the policy's explanation of its last decision.
	Position  int        `json:"position,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// RemainingS is the run time left at its requested GPUs, s, as the
	// scheduler estimates it; PredictedStart the policy's prediction.
	RemainingS     float64    `json:"remaining_s"`
	PredictedStart *time.Time `json:"predicted_start,omitempty"`
	// Forecast marks a predicted start that comes from the console's
	// replay of the queue in the simulator, not from the policy.
	Forecast bool `json:"forecast,omitempty"`
	// PredictedFinish and Risk are filled by the console.
	PredictedFinish *time.Time `json:"predicted_finish,omitempty"`
	Risk            string     `json:"risk,omitempty"`
	Progress        float64    `json:"progress"`
	Throughput      float64    `json:"throughput,omitempty"`
	Preemptions     int        `json:"preemptions,omitempty"`
	Restarts        int        `json:"restarts,omitempty"`
	Message         string     `json:"message,omitempty"`
}

// Active reports whether the job is not over.
func (j *Job) Active() bool {
	switch j.State {
	case StatePending, StateRunning, StatePreempted, StateHeld:
		return true
	}
	return false
}

// Waiting reports whether the job waits for GPUs.
func (j *Job) Waiting() bool { return j.State == StatePending || j.State == StatePreempted }

// Detail is one job's page: its row, history and log tail.
type Detail struct {
	Job    Job     `json:"job"`
	Events []Event `json:"events"`
	// Attempts are its launches: when, on which GPUs, how they ended.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Goodput is the fitted model's predicted speedup by GPU count.
	Goodput []GoodputPoint `json:"goodput,omitempty"`
	LogTail string         `json:"log_tail,omitempty"`
	Command []string       `json:"command,omitempty"`
}

// Event is one entry of a job's history.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message,omitempty"`
}

// Attempt is one launch.
type Attempt struct {
	N       int        `json:"n"`
	GPUs    []int      `json:"gpus"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Outcome string     `json:"outcome"`
}

// GoodputPoint is the predicted throughput and speedup on GPUs GPUs.
type GoodputPoint struct {
	GPUs       int     `json:"gpus"`
	Throughput float64 `json:"throughput"`
	Speedup    float64 `json:"speedup"`
}
