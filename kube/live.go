package kube

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// Live is what a driver standing in for the training processes gives tide
// kube: the live scenario runner (kubetest's TestLiveScenario,
// scripts/live-scenario.sh) runs a scenario's trace as TideJobs and
// advances each worker's progress at the rate the scenario's performance
// model gives its allocation. With it the engine plans with the policy and
// model the simulator uses for the same file, and each TideJob is the
// trace's job. Config.Clock is then the driver's (compressed) clock, and
// the times Job sets are in it.
type Live struct {
	// Policy is used instead of parsing Config.Policy (built as the
	// simulator builds it: assemble.Inputs.Build).
	Policy engine.Policy
	// Model is the engine's performance model (default perf.Duration).
	Model perf.Model
	// Job edits the job tide made of a workload (key "tidejob/NS/NAME")
	// before the engine gets it: the trace's model, work, GPU range,
	// submission and deadline. Called again for the same workload, it
	// must make the same job.
	Job func(key string, j *job.Job)
	// Progress is the progress of a workload's job in its model's unit;
	// false leaves the engine's own estimate.
	Progress func(key string) (float64, bool)
	// Placer, when set, places the engine's plans instead of tide's
	// worker placer (the simulator's placer for the same file): a resized
	// job is placed anew, as the simulator places it, rather than keeping
	// its surviving workers, and plans are not placed on trial against
	// the nodes' room (the driver's nodes hold only GPUs).
	Placer engine.Placer
	// Checkpoint, when set, is the seconds job j's checkpoint takes (the
	// simulator's sim.Migration.Checkpoint for the same file): a policy
	// without a reclaim cost of its own then has tide take inference GPUs
	// back from the jobs whose checkpoints cost least, as the simulator
	// does, rather than by the grace period alone.
	Checkpoint func(j *job.Job) float64
	// Paced: the driver paces tide. Run watches the API server but runs
	// no round of its own, periodic or on changes; the driver steps
	// Config.Clock (an engine clock it owns) and calls Round once tide's
	// caches hold what it wrote (Cached). API, informer and kubelet
	// latency then cost no engine time, and rounds fall at the times the
	// simulator's do (docs/kubernetes.md, "Live scenarios").
	Paced bool
}

// paced: a driver runs the rounds (Live.Paced).
func (s *Scheduler) paced() bool { return s.cfg.Live != nil && s.cfg.Live.Paced }

// Cached returns the annotation key of an object as tide's caches hold it
// now, and whether they hold the object: kind is "pod", "node" or
// "tidejob" (ns is ignored for a node). An informer applies one kind's
// changes in the order the API server made them, so a driver that writes
// a fence object of each kind last and waits until Cached returns the
// value it wrote knows tide's next round sees all its earlier writes.
func (s *Scheduler) Cached(kind, ns, name, key string) (string, bool) {
	if !s.health.synced.Load() {
		return "", false // the listers are being set up (watch)
	}
	var obj metav1.Object
	switch kind {
	case "pod":
		if s.pods != nil {
			if p, err := s.pods.Pods(ns).Get(name); err == nil {
				obj = p
			}
		}
	case "node":
		if s.nodes != nil {
			if n, err := s.nodes.Get(name); err == nil {
				obj = n
			}
		}
	case "tidejob":
		if s.tjs != nil {
			if o, err := s.tjs.ByNamespace(ns).Get(name); err == nil {
				if u, ok := o.(*unstructured.Unstructured); ok {
					obj = u
				}
			}
		}
	}
	if obj == nil {
		return "", false
	}
	return obj.GetAnnotations()[key], true
}

// Settle is a round without a decision: the engine keeps the plan of the
// last round and tide binds and evicts toward it. A paced driver runs it
// at the same instant after a round whose binds waited for evicted pods'
// room, as the simulator applies a plan at once: a second decision at the
// same instant would run the policy twice where the simulator runs it
// once (a policy that counts rounds or keeps timers would part).
func (s *Scheduler) Settle(ctx context.Context) error { return s.round(ctx, false) }

// TakenBack reports whether tide's last round took the GPUs of the job of
// workload key ("tidejob/NS/NAME") back for their owner (tidal.go): the
// Preempted Event on its evicted workers says so too. A driver playing
// the kubelets tells a reclaim, whose workers checkpoint first, from the
// policy's moves by it.
func (s *Scheduler) TakenBack(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.ids[key]
	return ok && s.reclaimWhy(id) != ""
}

// MakingRoom returns the node where tide's last round made room (took
// GPUs back from training, or kept idle ones) for pod ns/name of another
// scheduler, pending on a lent site, or "" (tidal.go, reserveFor). A
// driver playing that scheduler binds the pod there, as kube-scheduler
// binds a pod to the node it nominated after preempting for it.
func (s *Scheduler) MakingRoom(ns, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.tidal.reserve {
		if r.pod.Namespace == ns && r.pod.Name == name {
			return r.node
		}
	}
	return ""
}

// Waiting returns why tide's last round did not run the job of workload
// key ("pods/NS/JOB" for a gang, "pods/NS/POD" for a pod alone,
// "tidejob/NS/NAME"): the reason its pods' PodScheduled condition carries
// (which tide rewrites at most every explainGap), "" when the job runs,
// is about to be bound, or is not one the last round saw. A driver that
// ends a run reads it to tell a job the policy declined, or that cannot
// run, from one tide left waiting.
func (s *Scheduler) Waiting(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || s.eng == nil || s.seen.work[key] == nil {
		return ""
	}
	return s.tideReason(s.seen.work[key])
}

// workOrder is the order workloads go to the engine (submitted, or again
// on a rebuild): by creation, or under a live driver by the submission
// times its jobs have (Live.Job), so that the engine lists them as the
// simulator's engine does, in arrival order, whatever the wall-clock
// second each TideJob was created in. A policy that breaks ties by that
// order then plans alike.
func (s *Scheduler) workOrder(m map[string]*workload) []*workload {
	ws := sortedWork(m)
	if l := s.cfg.Live; l != nil && l.Job != nil {
		sub := make(map[*workload]float64, len(ws))
		for _, w := range ws {
			sub[w] = s.jobOf(w, w.key).Submit
		}
		sort.SliceStable(ws, func(a, b int) bool { return sub[ws[a]] < sub[ws[b]] })
	}
	return ws
}

// enginePlacer is the engine's placer: the driver's (Live.Placer), or
// tide's worker placer.
func (s *Scheduler) enginePlacer() engine.Placer {
	if l := s.cfg.Live; l != nil && l.Placer != nil {
		return l.Placer
	}
	return s.placer()
}

// model is the engine's performance model: the driver's, else durations,
// rating pairs with the pair-throughput table when one is given
// (sharepairs.go).
func (s *Scheduler) model() perf.Model {
	if l := s.cfg.Live; l != nil && l.Model != nil {
		return l.Model
	}
	if s.pairs != nil {
		return s.pairs
	}
	return perf.Duration{}
}

// jobOf is the engine's job for workload w as job id.
func (s *Scheduler) jobOf(w *workload, id string) *job.Job {
	j := w.job(id)
	if l := s.cfg.Live; l != nil && l.Job != nil {
		l.Job(w.key, j)
		j.ID = id
	}
	return j
}

// liveProgress reports the driver's progress of every job it knows; it
// returns false when there is no driver.
func (s *Scheduler) liveProgress() bool {
	l := s.cfg.Live
	if l == nil || l.Progress == nil {
		return false
	}
	for _, st := range s.eng.Active() {
		w := s.work[st.Job.ID]
		if w == nil {
			continue
		}
		if p, ok := l.Progress(w.key); ok {
			_ = s.eng.Report(st.Job.ID, p)
		}
	}
	return true
}

// sameAdmission: a declined job b is the one a was made from anew (same
// submission and deadline), so it stays declined.
func sameAdmission(a, b *job.Job) bool { return a.Submit == b.Submit && a.Deadline == b.Deadline }
