package kube

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// writeStatus reports each TideJob's phase, conditions, workers,
// restarts, resizes, queue position and predicted start and finish,
// writing only what changed (a prediction moving by less than a minute
// is not news). Invalid TideJobs get phase Invalid and Valid=False.
func (s *Scheduler) writeStatus(ctx context.Context, v *view) {
	if s.cfg.Dynamic == nil {
		return
	}
	snap := s.eng.Snapshot()
	calls := newCalls(ctx, s.cfg.Parallel)
	for _, w := range v.work {
		if w.tj != nil {
			s.putStatus(calls, w.tj, s.withDeadline(w, s.statusOf(w, s.eng.Job(s.ids[w.key]), snap)))
		}
	}
	for key, tj := range v.invalid {
		out := TideJobStatus{Phase: PhaseInvalid, Message: "invalid spec: " + s.said[key],
			Conditions: append([]metav1.Condition(nil), tj.Status.Conditions...)}
		setCond(&out, tj, CondValid, false, "InvalidSpec", s.said[key])
		s.putStatus(calls, tj, out)
	}
	calls.wait()
	s.forgetDeadlines(v)
	s.stats.DeadlinesMet, s.stats.DeadlinesMissed, s.stats.Declined = s.deadlines.met, s.deadlines.missed, s.deadlines.decline
}

// putStatus writes next as tj's status on one of calls' workers unless
// nothing but times and small prediction moves changed. The condition
// events follow a write that succeeded only: a round that acts on a view
// older than tide's last write (the informer has not seen it yet) is
// refused with a conflict, and must not say again what the write said.
func (s *Scheduler) putStatus(calls *calls, tj *TideJob, next TideJobStatus) {
	if sameStatus(tj.Status, next) {
		return
	}
	old := tj.Status.Conditions
	tj = tj.DeepCopy()
	tj.Status = next
	calls.do(func(ctx context.Context) {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
		if err == nil {
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion(Group + "/" + Version)
			u.SetKind("TideJob")
			_, err = s.cfg.Dynamic.Resource(TideJobResource).Namespace(tj.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			s.log.Debug("tidejob status", "tidejob", tj.Namespace+"/"+tj.Name, "err", err)
			return
		}
		calls.then(func() { s.fb.conditionEvents(tj, old, next.Conditions) })
	})
}

func setCond(out *TideJobStatus, tj *TideJob, typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&out.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason,
		Message: msg, ObservedGeneration: tj.Generation})
}

// reasonText is a policy's reason for a waiting job, with its queue
// position and predicted start when the policy gives them, the engine
// times it names as UTC times (api.WallReason).
func reasonText(r engine.Reason, def string) string {
	msg := api.WallReason(r.Text)
	if msg == "" {
		msg = def
	}
	if r.Position > 0 {
		msg += fmt.Sprintf("; queue position %d", r.Position)
	}
	if r.PredictedStart > 0 {
		msg += "; predicted start " + time.Unix(int64(r.PredictedStart), 0).UTC().Format(time.RFC3339)
	}
	return msg
}

// declinedText is the message of a job its policy declined (api.Declined).
func declinedText(r engine.Reason) string {
	return api.Declined(reasonText(r, ""), "the policy refused it at admission")
}

// heldPrefix begins the reason of a job its policy neither admits nor
// declines yet but tries again each round (tidal's hold=true: "held, not
// declined: ..."). tide kube reports such a job Admitted=False and
// Running=False with reason Held, and records one Held event when it
// becomes held.
const heldPrefix = "held"

// held reports whether the policy holds the waiting job it gave reason r.
func held(r engine.Reason) bool {
	rest, ok := strings.CutPrefix(r.Text, heldPrefix)
	return ok && (rest == "" || rest[0] == ',' || rest[0] == ':' || rest[0] == ' ')
}

func (s *Scheduler) statusOf(w *workload, st *engine.Status, snap *engine.Snapshot) TideJobStatus {
	bound := 0
	for _, p := range w.pods {
		if s.nodeOf(p) != "" {
			bound++
		}
	}
	tj := w.tj
	out := TideJobStatus{Workers: bound, Succeeded: w.succeeded, Conditions: append([]metav1.Condition(nil), tj.Status.Conditions...)}
	setCond(&out, tj, CondValid, true, "SpecAccepted", "")
	r := s.retries[w.key]
	if w.over != "" && w.failed+w.succeeded == 0 {
		// It ended before and its ended workers were deleted since: the
		// status stays as tide wrote it then.
		out = tj.Status
		out.Conditions = append([]metav1.Condition(nil), tj.Status.Conditions...)
		out.Workers, out.Succeeded = bound, w.succeeded
		return out
	}
	switch {
	case w.jobFailed():
		out.Phase, out.Message = PhaseFailed, fmt.Sprintf("%d worker(s) failed", w.failed)
		setCond(&out, tj, CondFailed, true, "WorkerFailed", out.Message+"; the other workers are deleted")
		setCond(&out, tj, CondRunning, false, "Failed", out.Message)
		return out
	case w.ended():
		out.Phase, out.Message = PhaseSucceeded, fmt.Sprintf("%d worker(s) succeeded", w.succeeded)
		setCond(&out, tj, CondRunning, false, "Succeeded", out.Message)
		return out
	}
	if st != nil && st.State == job.Declined {
		out.Phase, out.Message = PhaseDeclined, declinedText(st.Reason())
		setCond(&out, tj, CondAdmitted, false, "Declined", out.Message)
		setCond(&out, tj, CondFailed, true, "Declined", out.Message)
		setCond(&out, tj, CondRunning, false, "Declined", out.Message)
		return out
	}
	setCond(&out, tj, CondFailed, false, "NoWorkerFailed", "")
	if st == nil || st.State.Terminal() {
		out.Phase = PhasePending
		switch {
		case s.unsched[w.key] != "":
			out.Message = "unschedulable: " + s.unsched[w.key]
			setCond(&out, tj, CondAdmitted, false, "Unschedulable", s.unsched[w.key])
		case r != nil:
			out.Message = "backing off: " + r.msg
			setCond(&out, tj, CondAdmitted, false, r.reason, r.msg)
		default:
			out.Message = "not admitted yet"
			setCond(&out, tj, CondAdmitted, false, "Waiting", out.Message)
		}
		setCond(&out, tj, CondRunning, false, "NotAdmitted", out.Message)
		return out
	}
	setCond(&out, tj, CondAdmitted, true, "Admitted", "")
	// The engine counts a resize as a launch too: restarts are the rest.
	out.Restarts = max(0, st.Starts-1-st.Resizes)
	out.Resizes = st.Resizes
	switch {
	case len(st.GPUs) > 0 && bound >= w.minW:
		out.Phase = PhaseRunning
		out.Message = fmt.Sprintf("%d workers of %d GPUs planned, %d bound", len(st.GPUs)/w.per, w.per, bound)
		setCond(&out, tj, CondRunning, true, "WorkersBound", out.Message)
		if r := snap.Remaining(st, len(st.GPUs), ""); !math.IsInf(r, 0) && !math.IsNaN(r) {
			t := metav1.NewTime(time.Unix(int64(snap.Now+r), 0).UTC())
			out.PredictedFinish = &t
		}
	case len(st.GPUs) > 0:
		out.Phase = PhasePending
		out.Message = fmt.Sprintf("GPUs assigned for %d workers, %d bound", len(st.GPUs)/w.per, bound)
		reason := "Starting"
		if r != nil {
			reason, out.Message = r.reason, out.Message+"; "+r.msg
		}
		setCond(&out, tj, CondRunning, false, reason, out.Message)
	default:
		out.Phase, out.Message = PhasePending, reasonText(st.Reason(), "waiting for GPUs")
		reason := "Waiting"
		switch {
		case st.State == job.Preempted:
			out.Phase, reason = PhasePreempted, "Preempted"
		case held(st.Reason()):
			reason = "Held"
			setCond(&out, tj, CondAdmitted, false, reason, out.Message)
		}
		setCond(&out, tj, CondRunning, false, reason, out.Message)
		r := st.Reason()
		out.QueuePosition = r.Position
		if r.PredictedStart > 0 {
			t := metav1.NewTime(time.Unix(int64(r.PredictedStart), 0).UTC())
			out.PredictedStart = &t
		}
	}
	return out
}

// sameStatus: equal but for condition times and predictions that moved
// by less than a minute.
func sameStatus(a, b TideJobStatus) bool {
	near := func(x, y *metav1.Time) bool {
		return (x == nil) == (y == nil) && (x == nil || math.Abs(x.Sub(y.Time).Seconds()) < 60)
	}
	if !near(a.PredictedFinish, b.PredictedFinish) || !near(a.PredictedStart, b.PredictedStart) {
		return false
	}
	strip := func(s TideJobStatus) TideJobStatus {
		s.PredictedFinish, s.PredictedStart = nil, nil
		cs := make([]metav1.Condition, len(s.Conditions))
		for i, c := range s.Conditions {
			c.LastTransitionTime = metav1.Time{}
			cs[i] = c
		}
		s.Conditions = cs
		return s
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
