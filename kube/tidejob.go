package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and version of tide's custom resources.
const (
	Group   = "tide-sched.io"
	Version = "v1alpha1"
)

// TideJobResource names the TideJob resource for dynamic clients.
var TideJobResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "tidejobs"}

// TideJob is a training job run by tide: workers made from one pod template,
// between MinWorkers and MaxWorkers of them, each holding GPUsPerWorker GPUs
// on one node. tide's controller creates and deletes the worker pods as the
// scheduler resizes, preempts and restarts the job, and reports progress in
// Status.
type TideJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TideJobSpec   `json:"spec"`
	Status TideJobStatus `json:"status,omitempty"`
}

// TideJobSpec is what the user asks for.
type TideJobSpec struct {
	// Template is the worker pod. tide sets its labels, owner and the
	// nvidia.com/gpu limit of its first container. Its schedulerName picks
	// the tide instance that runs the job (empty: "tide").
	Template corev1.PodTemplateSpec `json:"template"`
	// MinWorkers is the gang: the job runs on at least this many workers,
	// all placed together, or not at all. Default 1.
	MinWorkers int `json:"minWorkers,omitempty"`
	// MaxWorkers is the most workers the job can use; above MinWorkers the
	// job is elastic. Default MinWorkers.
	MaxWorkers int `json:"maxWorkers,omitempty"`
	// GPUsPerWorker is each worker's GPU count, all on one node. Default 1.
	GPUsPerWorker int `json:"gpusPerWorker,omitempty"`
	// GPUFraction ("0.25", "25%") and GPUMemory (a quantity, "8Gi") ask
	// for part of one GPU per worker instead (share.go, docs/sharing.md).
	GPUFraction string `json:"gpuFraction,omitempty"`
	GPUMemory   string `json:"gpuMemory,omitempty"`
	// JobType is what the job trains, as named in the pair-throughput
	// table tide kube was started with (--pair-throughputs): with one, a
	// job of a type the table knows is packable, and the packing
	// policies may run it on the same GPUs as another (sharepairs.go,
	// docs/sharing.md). Empty: the job never shares its GPUs.
	JobType string `json:"jobType,omitempty"`
	// GPUType restricts the job to nodes whose GPU type label has this
	// value (lower-cased); empty means any type.
	GPUType string `json:"gpuType,omitempty"`
	// Deadline is when the job should have finished (deadline-aware
	// policies read it).
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Priority: larger is more important. Default 0.
	Priority int `json:"priority,omitempty"`
	// Queue is the tenant whose quota the job uses; default its namespace.
	Queue string `json:"queue,omitempty"`
	// Duration is the user's estimate of the job's run time on MinWorkers
	// workers, as a Go duration ("90m"); policies that predict (SRTF,
	// deadline policies, predicted finish) use it. Default 1h.
	Duration string `json:"duration,omitempty"`
}

// Phases of a TideJob.
const (
	PhasePending   = "Pending"
	PhaseRunning   = "Running"
	PhasePreempted = "Preempted"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
	// PhaseInvalid: tide refuses the spec; condition Valid says which
	// field and what it expects. Fixing the spec makes the job Pending.
	PhaseInvalid = "Invalid"
	// PhaseDeclined: the policy refused the job at admission (a deadline
	// policy that cannot meet its deadline); Message says why. It stays
	// declined until made anew or its deadline changes.
	PhaseDeclined = "Declined"
)

// Condition types of a TideJob's status.
const (
	// CondValid: the spec is one tide can run (False names the field).
	CondValid = "Valid"
	// CondAdmitted: the scheduler's engine holds the job (False: it can
	// never be placed, or it backs off after refused workers).
	CondAdmitted = "Admitted"
	// CondRunning: at least minWorkers workers are bound.
	CondRunning = "Running"
	// CondFailed: a worker failed on its own, and the job with it.
	CondFailed = "Failed"
)

// TideJobStatus is what tide reports.
type TideJobStatus struct {
	Phase string `json:"phase,omitempty"`
	// Workers is the number of worker pods bound now.
	Workers int `json:"workers"`
	// Restarts counts relaunches after preemption.
	Restarts int `json:"restarts"`
	// Resizes counts changes of the worker count while running.
	Resizes int `json:"resizes"`
	// Succeeded is how many workers tide has seen succeeded: the
	// succeeded pods it lists, or the count it wrote before when that is
	// more (pods deleted since). Once it is not 0 the job finishes on
	// the workers it has and gets no new ones.
	Succeeded int `json:"succeeded,omitempty"`
	// PredictedFinish is the scheduler's estimate of the finish time at
	// the current allocation, from Spec.Duration and time run so far.
	PredictedFinish *metav1.Time `json:"predictedFinish,omitempty"`
	// QueuePosition is the job's 1-based place in the policy's order
	// while it waits; 0 when running or when the policy has no order.
	QueuePosition int `json:"queuePosition,omitempty"`
	// PredictedStart is when the policy expects a waiting job to start,
	// when it can tell.
	PredictedStart *metav1.Time `json:"predictedStart,omitempty"`
	// DeadlineOutcome is DeadlineMet or DeadlineMissed for a job with a
	// deadline once that is known (deadline.go); empty before.
	DeadlineOutcome string `json:"deadlineOutcome,omitempty"`
	// Message says why the job is where it is.
	Message string `json:"message,omitempty"`
	// Conditions: Valid, Admitted, Running, Failed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyInto copies j into out.
func (j *TideJob) DeepCopyInto(out *TideJob) {
	*out = *j
	out.TypeMeta = j.TypeMeta
	j.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	j.Spec.Template.DeepCopyInto(&out.Spec.Template)
	if j.Spec.Deadline != nil {
		out.Spec.Deadline = j.Spec.Deadline.DeepCopy()
	}
	if j.Status.PredictedFinish != nil {
		out.Status.PredictedFinish = j.Status.PredictedFinish.DeepCopy()
	}
	if j.Status.PredictedStart != nil {
		out.Status.PredictedStart = j.Status.PredictedStart.DeepCopy()
	}
	if j.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(j.Status.Conditions))
		for i := range j.Status.Conditions {
			j.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a deep copy of j.
func (j *TideJob) DeepCopy() *TideJob {
	if j == nil {
		return nil
	}
	out := new(TideJob)
	j.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (j *TideJob) DeepCopyObject() runtime.Object { return j.DeepCopy() }
