// Package perf holds the performance models: how fast a job progresses on a
// given allocation, and what starting, preempting or resizing it costs.
//
// The same Model advances jobs in the simulator and answers policies'
// predictions, so a policy can never see a different world from the one the
// simulator runs. Progress is measured in the model's own unit (Model.Work
// says how much a job needs); a job finishes when its progress reaches Work.
package perf

import (
	"fmt"
	"math"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/goodput"
)

// Alloc is the shape of an allocation that matters for speed.
type Alloc struct {
	GPUType string
	// PerNode holds the GPUs used on each node the job spans, in placement
	// order. Its sum is the GPU count; its length the node count.
	PerNode []int
	// LocalBsz and AccumSteps, when LocalBsz > 0, are the batch
	// configuration an adaptive job's agent chose for this allocation
	// (per-GPU batch of one pass, extra accumulation passes). Zero means
	// the model derives them from the job's own batch size.
	LocalBsz, AccumSteps int
}

// Observer is a Model that can stand in for a job's agent in simulation:
// it says what the job would measure on an allocation, so the agent can fit
// its goodput model from observations as a live job does.
type Observer interface {
	Model
	// Observe returns the compute and step time the job would measure on a
	// (with a's batch configuration, or the job's own when a.LocalBsz is
	// 0) and its gradient statistics at progress p; ok is false when the
	// job cannot run on a.
	Observe(j *job.Job, a Alloc, p float64) (obs goodput.Observation, grad goodput.Grad, ok bool)
	// Limits are the job's batch-size limits.
	Limits(j *job.Job) goodput.Limits
}

// Span is every allocation of one GPU type a job may be given: from MinGPUs
// to MaxGPUs GPUs on at most Nodes nodes of at most PerNode GPUs each
// (PerNode <= 0: no limit per node), in any placement.
type Span struct {
	GPUType          string
	MinGPUs, MaxGPUs int
	PerNode, Nodes   int
}

// Bounder is a Model that can bound a job's rate over a whole Span, for a
// no-contention lower bound on its completion time that no schedule can
// beat: a job's rate can depend on the shape of its placement (not only on
// its GPU count) and, for an adaptive job (job.AdaptBatch), on the batch
// configuration its agent chooses (Alloc.LocalBsz, AccumSteps). A model
// that is no Bounder, or whose MaxRate says !ok, is taken to run a job no
// faster on any placement than on the packed one (Packed) of its GPU count
// and type, with the job's own batch.
type Bounder interface {
	Model
	// MaxRate is at least j's Rate at progress p on every allocation in s
	// (every placement, and when j.AdaptBatch every batch configuration
	// its agent may choose), and the progress up to which that holds
	// (> p; +Inf when it never changes); 0 when nothing in s runs j. ok
	// is false when the model has no such bound (a wrapper of a model
	// that is no Bounder): rate and until are then meaningless, and the
	// caller prices packed allocations instead.
	MaxRate(j *job.Job, s Span, p float64) (rate, until float64, ok bool)
}

// MaxRate is m's MaxRate when m is a Bounder with a bound for j over s; ok
// is false otherwise (rate and until are then 0 and +Inf). Wrappers of a
// Model implement their MaxRate with it.
func MaxRate(m Model, j *job.Job, s Span, p float64) (rate, until float64, ok bool) {
	if b, is := m.(Bounder); is {
		if r, u, ok := b.MaxRate(j, s, p); ok {
			return r, u, true
		}
	}
	return 0, math.Inf(1), false
}

// GPUs is the total GPU count of a.
func (a Alloc) GPUs() int {
	n := 0
	for _, g := range a.PerNode {
		n += g
	}
	return n
}

// Nodes is the number of nodes a spans.
func (a Alloc) Nodes() int { return len(a.PerNode) }

// Packed is the most consolidated allocation of n GPUs of type t on nodes of
// perNode GPUs: full nodes first, the remainder on one more node.
func Packed(t string, n, perNode int) Alloc {
	if perNode <= 0 {
		perNode = n
	}
	var p []int
	for n > 0 {
		k := min(n, perNode)
		p = append(p, k)
		n -= k
	}
	return Alloc{GPUType: t, PerNode: p}
}

// Costs are the seconds a job loses, holding its GPUs without progress, when
// its allocation changes. They model checkpoint, relaunch and warm-up.
type Costs struct {
	Start   float64 `json:"start_s"`   // first launch
	Restart float64 `json:"restart_s"` // relaunch after a preemption
	Resize  float64 `json:"resize_s"`  // change of GPUs while running
}

// Model predicts progress. Implementations must be deterministic and safe for
// concurrent use by readers, and must not keep an Alloc's PerNode after a
// call returns (callers reuse it).
type Model interface {
	// Name identifies the model in reports ("pollux-profiles", "duration", ...).
	Name() string
	// Check reports whether the model can advance j (known model name, GPU
	// type, batch size within the measured range...). The error names the field.
	Check(j *job.Job) error
	// Work is the progress j needs to finish, in the model's unit (> 0).
	Work(j *job.Job) float64
	// Rate is j's progress per second at progress p on allocation a, and the
	// progress up to which that rate holds (> p; +Inf when it never changes).
	// A rate of 0 means j cannot run on a (wrong GPU type, too few GPUs).
	Rate(j *job.Job, a Alloc, p float64) (rate, until float64)
	// Costs are j's start, restart and resize costs.
	Costs(j *job.Job) Costs
}

// Remaining is the time j needs from progress p to finish on allocation a,
// ignoring restart costs; +Inf when a cannot run j.
func Remaining(m Model, j *job.Job, a Alloc, p float64) float64 {
	work := m.Work(j)
	t := 0.0
	for p < work {
		r, until := m.Rate(j, a, p)
		if !(r > 0) {
			return math.Inf(1)
		}
		end := math.Min(until, work)
		t += (end - p) / r
		p = end
	}
	return t
}

// CostTable gives per-model costs with a default, and can be overridden.
type CostTable struct {
	Default Costs
	PerKey  map[string]Costs // key: model name
}

// For returns the costs of model name.
func (t CostTable) For(name string) Costs {
	if c, ok := t.PerKey[name]; ok {
		return c
	}
	return t.Default
}

// PolluxArtifactCosts is the Pollux artifact simulator's rule: every change of
// allocation, the first start included, costs 30 s.
var PolluxArtifactCosts = Costs{Start: 30, Restart: 30, Resize: 30}

// MeasuredRestartCosts are per-model reallocation delays measured on T4 GPUs
// for DeepBoot (APPLICATIONS_DELAY in its simulator's applications.py), in
// seconds: a full checkpoint-restart, charged for every start, restart and
// resize. DeepBoot's much shorter fast-rescale times are not used.
var MeasuredRestartCosts = map[string]Costs{
	"bert":        {Start: 103, Restart: 103, Resize: 103},
	"cifar10":     {Start: 24, Restart: 24, Resize: 24},
	"ncf":         {Start: 25, Restart: 25, Resize: 25},
	"deepspeech2": {Start: 18, Restart: 18, Resize: 18},
	"yolov3":      {Start: 26, Restart: 26, Resize: 26},
	"imagenet":    {Start: 35, Restart: 35, Resize: 35},
}

// FastRescaleCosts keep MeasuredRestartCosts' full restarts for starts and
// restarts after a preemption, but charge a resize of a running job only
// DeepBoot's measured fast elastic-rescale time (its simulator's fast
// rescale option): bert 5 s, cifar10 3, ncf 2, deepspeech2 1, yolov3 3,
// imagenet 3.
var FastRescaleCosts = map[string]Costs{
	"bert":        {Start: 103, Restart: 103, Resize: 5},
	"cifar10":     {Start: 24, Restart: 24, Resize: 3},
	"ncf":         {Start: 25, Restart: 25, Resize: 2},
	"deepspeech2": {Start: 18, Restart: 18, Resize: 1},
	"yolov3":      {Start: 26, Restart: 26, Resize: 3},
	"imagenet":    {Start: 35, Restart: 35, Resize: 3},
}

// ErrUnknownModel is wrapped by Check when a job names a model that is not loaded.
var ErrUnknownModel = fmt.Errorf("unknown model")
