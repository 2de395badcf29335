package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// Feedback where users look: Events (Scheduled, FailedScheduling,
// Preempted) through the events.k8s.io API, as kube-scheduler writes them,
// and the PodScheduled condition of pods tide cannot place yet. Both are
// rate-limited: events to eventQPS overall (the rest are dropped, never
// queued), a pod's condition and FailedScheduling event to one per
// explainGap unless the message changes.
const (
	eventQPS     = 20
	eventBurst   = 100
	explainGap   = 30 * time.Second
	explainBatch = 200 // waiting pods explained per round at most
)

// feedback writes events and pod conditions. A nil feedback writes
// nothing.
type feedback struct {
	rec   events.EventRecorder
	sink  *flushSink // nil in unit tests that record to a fake
	stop  func()     // ends the writing of events; nil with sink
	limit flowcontrol.RateLimiter
	mu    sync.Mutex
	said  map[types.UID]said // last PodScheduled=False written, by pod
	jobs  map[string]jobSaid // last message made, by workload key
}

type jobSaid struct {
	tide, msg string
	at        time.Time
}

type said struct {
	msg string
	at  time.Time
}

// newFeedback starts recording events as reporter, at most qps a second
// (0: eventQPS; negative: no limit). It writes them until close, which
// the owner calls once it has stopped recording (see close).
func newFeedback(ctx context.Context, cs kubernetes.Interface, reporter string, qps float64) *feedback {
	sink := &flushSink{EventSink: newEventSink(cs)}
	b := events.NewBroadcaster(sink)
	// Not ctx: its end must not cut short the writes of the events
	// recorded just before it (close waits for them).
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.StartRecordingToSink(wctx.Done())
	limit := flowcontrol.NewFakeAlwaysRateLimiter()
	switch {
	case qps == 0:
		limit = flowcontrol.NewTokenBucketRateLimiter(eventQPS, eventBurst)
	case qps > 0:
		limit = flowcontrol.NewTokenBucketRateLimiter(float32(qps), max(eventBurst, int(qps)))
	}
	return &feedback{rec: b.NewRecorder(scheme.Scheme, reporter), sink: sink,
		stop:  func() { cancel(); b.Shutdown() },
		limit: limit, said: map[types.UID]said{}, jobs: map[string]jobSaid{}}
}

// How long close waits for the events recorded before it to be written:
// until no write is in flight and nothing was recorded or written for
// flushQuiet, and at most flushMax (an API server that does not answer).
const (
	flushQuiet = 250 * time.Millisecond
	flushMax   = 5 * time.Second
)

// close writes the events recorded so far, then stops. client-go hands an
// event from the recorder to the API server through three goroutines, and
// a stop that cancelled them at once lost the last round's events: a
// TideJob declined just before tide stopped said so in its status but
// never in an event. close returns within flushMax.
func (f *feedback) close() {
	if f == nil || f.stop == nil {
		return
	}
	for end := time.Now().Add(flushMax); time.Now().Before(end) && !f.sink.quiet(flushQuiet); {
		time.Sleep(flushQuiet / 10)
	}
	f.stop()
}

// flushSink is an events.EventSink that knows whether a write is in
// flight and when the last one began or ended, for close.
type flushSink struct {
	events.EventSink
	mu     sync.Mutex
	flight int
	last   time.Time
}

// touch notes activity now: a write beginning (+1), ending (-1) or an
// event recorded (0). A nil flushSink notes nothing.
func (s *flushSink) touch(flight int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.flight += flight
	s.last = time.Now()
	s.mu.Unlock()
}

// quiet reports whether no write is in flight and nothing happened for d.
func (s *flushSink) quiet(d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flight == 0 && time.Since(s.last) >= d
}

// Create implements events.EventSink.
func (s *flushSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.touch(1)
	defer s.touch(-1)
	return s.EventSink.Create(ctx, ev)
}

// Update implements events.EventSink.
func (s *flushSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.touch(1)
	defer s.touch(-1)
	return s.EventSink.Update(ctx, ev)
}

// Patch implements events.EventSink.
func (s *flushSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.touch(1)
	defer s.touch(-1)
	return s.EventSink.Patch(ctx, ev, data)
}

// event records an event about obj (a pod, or an object reference),
// unless over the rate limit.
func (f *feedback) event(obj runtime.Object, typ, reason, action, note string) {
	if f == nil || !f.limit.TryAccept() {
		return
	}
	f.sink.touch(0)
	f.rec.Eventf(obj, nil, typ, reason, action, "%s", note)
}

// always records an event about obj whatever the rate limit: for rare
// events about tide itself that must not be lost among a drain's binds.
func (f *feedback) always(obj runtime.Object, typ, reason, action, note string) {
	if f == nil {
		return
	}
	f.sink.touch(0)
	f.rec.Eventf(obj, nil, typ, reason, action, "%s", note)
}

// tideJobRef refers to a TideJob, for events about it.
func tideJobRef(tj *TideJob) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: Group + "/" + Version, Kind: "TideJob", Namespace: tj.Namespace,
		Name: tj.Name, UID: tj.UID, ResourceVersion: tj.ResourceVersion}
}

// quietReasons are condition reasons not worth an event: the defaults a
// TideJob starts with and the steps every job goes through.
var quietReasons = map[string]bool{"SpecAccepted": true, "NoWorkerFailed": true, "Waiting": true,
	"NotAdmitted": true, "Starting": true}

// warningReasons are condition reasons that tell of a problem.
var warningReasons = map[string]bool{"InvalidSpec": true, "Unschedulable": true, "FailedCreate": true,
	"WorkerRejected": true, "WorkerFailed": true, "Failed": true, "Declined": true}

// conditionEvents records an event on a TideJob for each condition whose
// status or reason changes from old to next: Admitted, Unschedulable,
// InvalidSpec, FailedCreate, WorkerRejected, WorkerFailed, Preempted,
// WorkersBound and so on, as kubectl describe tidejob shows them.
// Conditions that change together for one cause (a decline sets
// Admitted, Failed and Running with the same reason and message) make one
// event.
func (f *feedback) conditionEvents(tj *TideJob, old, next []metav1.Condition) {
	if f == nil {
		return
	}
	said := map[[2]string]bool{}
	for _, c := range next {
		if quietReasons[c.Reason] {
			continue
		}
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status && o.Reason == c.Reason {
			continue
		}
		typ := corev1.EventTypeNormal
		if warningReasons[c.Reason] {
			typ = corev1.EventTypeWarning
		}
		note := c.Message
		if note == "" {
			note = fmt.Sprintf("%s is %s", c.Type, c.Status)
		}
		if said[[2]string{c.Reason, note}] {
			continue
		}
		said[[2]string{c.Reason, note}] = true
		f.event(tideJobRef(tj), typ, c.Reason, c.Type, note)
	}
}

// warningGap is the least time between two events of the same policy
// warning.
const warningGap = 5 * time.Minute

// policyWarnings records an event on self for each policy warning raised
// since the last call (PolicyFallback: a solver that failed, replaced by a
// simpler rule; PolicyPlanDropped: an assignment of a job the engine could
// not honour, engine.WarnDropped), each distinct one at most once per
// warningGap.
func (s *Scheduler) policyWarnings() {
	ws := s.eng.Warnings()
	if s.warned > len(ws) {
		s.warned = 0 // a new engine
	}
	for _, w := range ws[s.warned:] {
		key := w.Kind + "/" + w.Reason
		if t, ok := s.warnedAt[key]; ok && s.now().Sub(t) < warningGap {
			continue
		}
		s.warnedAt[key] = s.now()
		s.log.Warn("policy warning", "policy", w.Policy, "kind", w.Kind, "job", w.Job, "reason", w.Reason)
		if s.cfg.Self != nil {
			reason := "PolicyFallback"
			if w.Kind == engine.WarnDropped {
				reason = "PolicyPlanDropped"
			}
			s.fb.event(s.cfg.Self, corev1.EventTypeWarning, reason, "Schedule",
				fmt.Sprintf("policy %s: %s: %s", w.Policy, w.Kind, w.Reason))
		}
	}
	s.warned = len(ws)
}

// due reports whether p's PodScheduled=False should be (re)written with msg.
func (f *feedback) due(p *corev1.Pod, msg string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last, ok := f.said[p.UID]
	if !ok {
		for _, c := range p.Status.Conditions { // written by an earlier tide
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
				f.said[p.UID] = said{msg, time.Now()}
				return false
			}
		}
	}
	return !ok || (last.msg != msg && time.Since(last.at) >= explainGap)
}

func (f *feedback) wrote(uid types.UID, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.said[uid] = said{msg, time.Now()}
}

func (f *feedback) forget(live map[types.UID]bool) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid := range f.said {
		if !live[uid] {
			delete(f.said, uid)
		}
	}
	if len(f.jobs) > 4*explainBatch {
		f.jobs = map[string]jobSaid{}
	}
}

// unschedulable sets p's PodScheduled condition to False, reason
// Unschedulable, with msg, and records a FailedScheduling event.
func (s *Scheduler) unschedulable(ctx context.Context, p *corev1.Pod, msg string) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.Now()}}}})
	if err != nil {
		return
	}
	_, err = s.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		s.log.Debug("pod condition", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	s.fb.wrote(p.UID, msg)
	s.fb.event(p, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", msg)
}

// explainWaiting tells the pods of jobs that wait why they wait: at most
// explainBatch jobs' messages are made afresh per round.
func (s *Scheduler) explainWaiting(ctx context.Context, v *view) {
	if s.fb == nil {
		return
	}
	live := map[types.UID]bool{}
	free := map[string]int{}
	for n, a := range v.alloc {
		free[n] = a - v.phys[n]
	}
	calls := newCalls(ctx, s.cfg.Parallel)
	budget := explainBatch
	for _, w := range sortedWork(v.work) {
		if w.tj != nil || w.ended() {
			continue
		}
		var pending []*corev1.Pod
		for _, p := range w.pods {
			live[p.UID] = true
			if s.nodeOf(p) == "" && !s.evicted[p.UID] {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 || budget <= 0 {
			continue
		}
		msg, fresh := s.whyWaiting(w, v, free)
		if fresh {
			budget--
		}
		if msg == "" {
			continue
		}
		for _, p := range pending {
			if budget > 0 && s.fb.due(p, msg) {
				budget--
				calls.do(func(ctx context.Context) { s.unschedulable(ctx, p, msg) })
			}
		}
	}
	calls.wait()
	s.fb.forget(live)
}

// whyWaiting is the message for a job's unbound pods, "" when the job is
// about to be bound (the engine gave it GPUs this round). The nodes' part
// costs a pass over the nodes: it is computed again only when tide's
// reason changes or explainGap has passed.
func (s *Scheduler) whyWaiting(w *workload, v *view, free map[string]int) (msg string, fresh bool) {
	tide := s.tideReason(w)
	if tide == "" {
		return "", false
	}
	s.fb.mu.Lock()
	last, ok := s.fb.jobs[w.key]
	s.fb.mu.Unlock()
	if ok && last.tide == tide && time.Since(last.at) < explainGap {
		return last.msg, false
	}
	nodes := ""
	if w.shape != nil {
		nodes = explain(v.states, w.shape, s.cfg.GPUTypeLabel, free) + " "
	}
	msg = fmt.Sprintf("%stide (policy %s): %s", nodes, s.pol.Name(), tide)
	s.fb.mu.Lock()
	s.fb.jobs[w.key] = jobSaid{tide: tide, msg: msg, at: time.Now()}
	s.fb.mu.Unlock()
	return msg, true
}

// tideReason is why tide does not place w now, "" when it does.
func (s *Scheduler) tideReason(w *workload) string {
	id := s.ids[w.key]
	st := s.eng.Job(id)
	var tide string
	switch {
	case s.unsched[w.key] != "":
		tide = "unschedulable: " + s.unsched[w.key]
	case w.tj == nil && len(w.pods) < w.minW:
		tide = fmt.Sprintf("gang %s has %d of its %d pods; none is bound before all exist", w.name, len(w.pods), w.minW)
	case st != nil && st.State == job.Declined && s.work[id] == w:
		tide = declinedText(st.Reason())
	case st == nil || st.State.Terminal() || s.work[id] != w:
		return ""
	case len(st.GPUs) > 0:
		return "" // placed: bound as soon as its nodes have room
	default:
		tide = reasonText(st.Reason(), "waiting for GPUs")
	}
	return tide
}
