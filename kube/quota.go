package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy"
)

// TideQueueResource names the TideQueue resource (cluster-scoped) for
// dynamic clients.
var TideQueueResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "tidequeues"}

// TideQueue is one tenant's quota, edited live: its name is the tenant (a
// namespace, or the queue a TideJob or pod names). deploy/crd-tidequeue.yaml
// defines it; the API server validates its fields, and tide checks them
// again and against the cluster, reporting in Status.Conditions.
type TideQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TideQueueSpec   `json:"spec"`
	Status TideQueueStatus `json:"status,omitempty"`
}

// TideQueueSpec is a tenant's share.
type TideQueueSpec struct {
	// GuaranteedGPUs the tenant's jobs always get when they ask for them.
	GuaranteedGPUs int `json:"guaranteedGPUs"`
	// BorrowLimit is the most GPUs the tenant may borrow beyond its
	// guarantee while others leave them idle (taken back by preemption
	// when their owners need them); nil means no limit, 0 no borrowing.
	BorrowLimit *int `json:"borrowLimit,omitempty"`
	// Weight orders lending: idle GPUs go first to the tenant with the
	// fewest borrowed GPUs per unit of weight. Default 1.
	Weight int `json:"weight,omitempty"`
}

// TideQueueStatus is what tide reports about a queue.
type TideQueueStatus struct {
	// Conditions: Accepted (True when the spec in force is this
	// generation's; False with a reason and a message when tide refused
	// the edit and keeps the last accepted one).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// GPUs the tenant's jobs hold now, and how many of them are borrowed.
	GPUs     int `json:"gpus"`
	Borrowed int `json:"borrowed"`
}

// liveQuota is the policy wrapper whose quotas change between rounds: the
// flags' quotas (Config.Quotas) overlaid with the TideQueues accepted so
// far. Without any quota it is the inner policy itself.
//
// With fill (Config.FillIdle) and no quota, every job is a borrower: the
// GPUs the policy's plan leaves idle go to the jobs it left out, in
// submission order, until its next plan claims them. Policies that re-plan
// only every few minutes (Gavel's rounds) then start newly arrived work on
// idle GPUs at once.
type liveQuota struct {
	inner engine.Policy
	fill  bool
	mu    sync.Mutex
	q     *policy.Quota // nil: no quotas
}

func (l *liveQuota) Name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q == nil {
		return l.inner.Name()
	}
	return l.q.Name()
}

func (l *liveQuota) Schedule(s *engine.Snapshot) engine.Plan {
	l.mu.Lock()
	q := l.q
	l.mu.Unlock()
	if q == nil {
		return l.inner.Schedule(s)
	}
	return q.Schedule(s)
}

// Unwrap implements engine.Wrapper: the quota wrapper in force, or the
// inner policy without one, so that the policy's state (engine.Stateful)
// and reclaim costs are found through it.
func (l *liveQuota) Unwrap() engine.Policy {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q == nil {
		return l.inner
	}
	return l.q
}

// set puts quotas in force; limits nil removes them.
func (l *liveQuota) set(limits, borrowLimits, weights map[string]int, borrow bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limits == nil && l.fill {
		limits, borrow = map[string]int{}, true
	}
	if limits == nil {
		l.q = nil
		return
	}
	l.q = &policy.Quota{Inner: l.inner, Limits: limits, Borrow: borrow, BorrowLimits: borrowLimits, Weights: weights}
}

// queues is the scheduler's view of TideQueues.
type queues struct {
	lister   cache.GenericLister // nil: not watched
	accepted map[string]acceptedQueue
	written  map[string]TideQueueStatus // last status written, by name
}

type acceptedQueue struct {
	gen  int64
	spec TideQueueSpec
}

// watchQueues adds the TideQueue informer when the resource is served
// (the CRD installed); without it tide runs on the flags' quotas and says
// so once.
func (s *Scheduler) watchQueues(ctx context.Context) error {
	if s.cfg.Dynamic == nil || s.cfg.NoQueues {
		return nil
	}
	_, err := s.cfg.Dynamic.Resource(TideQueueResource).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		s.log.Warn("TideQueue resource not served (deploy/crd-tidequeue.yaml not applied): quotas come from --quota alone")
		return nil
	case apierrors.IsForbidden(err):
		s.log.Warn("not allowed to list TideQueues (deploy/rbac.yaml): quotas come from --quota alone", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: listing TideQueues: %w", err)
	}
	inf := s.dynFac.ForResource(TideQueueResource)
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}); err != nil {
		return err
	}
	s.queues.lister = inf.Lister()
	s.synced = append(s.synced, inf.Informer().HasSynced)
	return nil
}

// validQueue checks a queue's spec against the cluster's GPUs; "" when it
// is good. The API server's schema checks the same fields first; these
// checks hold when it is loosened, and the GPU count is beyond it.
func validQueue(sp TideQueueSpec, clusterGPUs int) (reason, msg string) {
	switch {
	case sp.GuaranteedGPUs < 0:
		return "InvalidSpec", fmt.Sprintf("spec.guaranteedGPUs: want 0 or more, got %d", sp.GuaranteedGPUs)
	case sp.BorrowLimit != nil && *sp.BorrowLimit < 0:
		return "InvalidSpec", fmt.Sprintf("spec.borrowLimit: want 0 or more (or no field: no limit), got %d", *sp.BorrowLimit)
	case sp.Weight < 0 || sp.Weight > 1000:
		return "InvalidSpec", fmt.Sprintf("spec.weight: want 1 to 1000 (or no field: 1), got %d", sp.Weight)
	case sp.GuaranteedGPUs > clusterGPUs:
		return "Oversubscribed", fmt.Sprintf("spec.guaranteedGPUs: %d guaranteed, more than the cluster's %d GPUs", sp.GuaranteedGPUs, clusterGPUs)
	}
	return "", ""
}

// applyQueues reads the TideQueues and puts their quotas in force for this
// round, over the flags' quotas; a queue tide refuses keeps its last
// accepted spec (or none) and gets Accepted=False. It never fails the
// round.
func (s *Scheduler) applyQueues(clusterGPUs int) []queueReport {
	if s.queues.lister == nil {
		return nil
	}
	objs, err := s.queues.lister.List(labels.Everything())
	if err != nil {
		s.warnOnce("tidequeues", "tidequeues", err.Error())
		return nil
	}
	if s.queues.accepted == nil {
		s.queues.accepted = map[string]acceptedQueue{}
	}
	var reps []queueReport
	seen := map[string]bool{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		name := u.GetName()
		seen[name] = true
		q := &TideQueue{}
		rep := queueReport{name: name, gen: u.GetGeneration(), obj: u}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q); err != nil {
			rep.reason, rep.msg = "InvalidSpec", "spec: "+err.Error()
		} else {
			rep.status = q.Status
			rep.reason, rep.msg = validQueue(q.Spec, clusterGPUs)
		}
		if rep.reason == "" {
			s.queues.accepted[name] = acceptedQueue{gen: rep.gen, spec: q.Spec}
		} else if a, ok := s.queues.accepted[name]; ok {
			rep.msg += fmt.Sprintf("; generation %d stays in force", a.gen)
		} else {
			rep.msg += "; no quota in force for this tenant"
		}
		reps = append(reps, rep)
	}
	for name := range s.queues.accepted {
		if !seen[name] {
			delete(s.queues.accepted, name) // deleted: back to the flags' quota
		}
	}
	var limits, borrowLimits, weights map[string]int
	if s.cfg.Quotas != nil || len(s.queues.accepted) > 0 {
		limits = map[string]int{}
		for t, g := range s.cfg.Quotas {
			limits[t] = g
		}
	}
	if len(s.queues.accepted) > 0 {
		borrowLimits, weights = map[string]int{}, map[string]int{}
		for name, a := range s.queues.accepted {
			limits[name] = a.spec.GuaranteedGPUs
			if a.spec.BorrowLimit != nil {
				borrowLimits[name] = *a.spec.BorrowLimit
			}
			weights[name] = max(a.spec.Weight, 1)
		}
	}
	s.quota.set(limits, borrowLimits, weights, s.cfg.Borrow)
	return reps
}

// queueReport is one queue's status to write after the round.
type queueReport struct {
	name, reason, msg string
	gen               int64
	obj               *unstructured.Unstructured
	status            TideQueueStatus
}

// writeQueueStatus writes each queue's Accepted condition and the GPUs its
// tenant holds (and borrows) after the round, when they changed.
func (s *Scheduler) writeQueueStatus(ctx context.Context, reps []queueReport) {
	if len(reps) == 0 {
		return
	}
	held := map[string]int{}
	for _, st := range s.eng.Snapshot().Jobs {
		if !st.State.Terminal() {
			held[st.Job.Tenant] += len(st.GPUs)
		}
	}
	sort.Slice(reps, func(a, b int) bool { return reps[a].name < reps[b].name })
	if s.queues.written == nil {
		s.queues.written = map[string]TideQueueStatus{}
	}
	calls := newCalls(ctx, s.cfg.Parallel)
	for _, r := range reps {
		next := TideQueueStatus{Conditions: append([]metav1.Condition(nil), r.status.Conditions...), GPUs: held[r.name]}
		if a, ok := s.queues.accepted[r.name]; ok {
			next.Borrowed = max(0, held[r.name]-a.spec.GuaranteedGPUs)
		}
		c := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Valid",
			Message: "in force from the next round", ObservedGeneration: r.gen}
		if r.reason != "" {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, r.reason, r.msg
		}
		meta.SetStatusCondition(&next.Conditions, c)
		if msg := s.reclaim.queue[r.name]; msg != "" {
			meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: "ReclaimBlocked", Status: metav1.ConditionTrue,
				Reason: "DisruptionBudget", Message: msg, ObservedGeneration: r.gen})
		} else if meta.FindStatusCondition(next.Conditions, "ReclaimBlocked") != nil {
			meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: "ReclaimBlocked", Status: metav1.ConditionFalse,
				Reason: "NotBlocked", Message: "no GPUs this queue waits for are held behind a PodDisruptionBudget", ObservedGeneration: r.gen})
		}
		if sameQueueStatus(r.status, next) {
			continue
		}
		u := r.obj.DeepCopy()
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&next)
		if err != nil {
			continue
		}
		u.Object["status"] = st
		calls.do(func(ctx context.Context) {
			_, err := s.cfg.Dynamic.Resource(TideQueueResource).UpdateStatus(ctx, u, metav1.UpdateOptions{})
			if err != nil && !apierrors.IsConflict(err) {
				s.log.Warn("tidequeue status", "tidequeue", u.GetName(), "err", err)
			}
		})
		if r.reason != "" {
			s.warnOnce("tidequeue/"+r.name, "tidequeue "+r.name, r.msg)
		}
	}
	calls.wait()
}

// sameQueueStatus compares what tide writes (transition times aside).
func sameQueueStatus(a, b TideQueueStatus) bool {
	if a.GPUs != b.GPUs || a.Borrowed != b.Borrowed || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
