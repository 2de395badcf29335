package kube

import (
	"context"
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// writeStatus reports each TideJob's phase, workers, restarts, resizes and
// predicted finish, writing only what changed (a predicted finish moving
// by less than a minute is not news).
func (s *Scheduler) writeStatus(ctx context.Context, v *view) {
	if s.cfg.Dynamic == nil {
		return
	}
	snap := s.eng.Snapshot()
	byID := map[string]*engine.Status{}
	for _, st := range snap.Jobs {
		byID[st.Job.ID] = st
	}
	calls := newCalls(ctx, s.cfg.Parallel)
	for _, w := range v.work {
		if w.tj == nil {
			continue
		}
		id := s.ids[w.key]
		st := byID[id]
		if st == nil && id != "" {
			st = s.eng.Job(id)
		}
		next := s.statusOf(w, st, snap)
		if sameStatus(w.tj.Status, next) {
			continue
		}
		tj := w.tj.DeepCopy()
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
				s.mu2(func() { s.log.Debug("tidejob status", "tidejob", tj.Namespace+"/"+tj.Name, "err", err) })
			}
		})
	}
	calls.wait()
}

func (s *Scheduler) statusOf(w *workload, st *engine.Status, snap *engine.Snapshot) TideJobStatus {
	bound := 0
	for _, p := range w.pods {
		if s.nodeOf(p) != "" {
			bound++
		}
	}
	out := TideJobStatus{Workers: bound}
	switch {
	case w.failed > 0:
		out.Phase, out.Message = PhaseFailed, fmt.Sprintf("%d worker(s) failed", w.failed)
	case w.ended():
		out.Phase, out.Message = PhaseSucceeded, fmt.Sprintf("%d worker(s) succeeded", w.succeeded)
	case st == nil:
		out.Phase, out.Message = PhasePending, "not admitted: "+s.said[w.key]
	default:
		out.Restarts = max(0, st.Starts-1)
		out.Resizes = st.Resizes
		switch {
		case len(st.GPUs) > 0:
			out.Phase = PhaseRunning
			out.Message = fmt.Sprintf("%d workers of %d GPUs planned", len(st.GPUs)/w.per, w.per)
			if r := snap.Remaining(st, len(st.GPUs), ""); !math.IsInf(r, 0) && !math.IsNaN(r) {
				t := metav1.NewTime(time.Unix(int64(snap.Now+r), 0).UTC())
				out.PredictedFinish = &t
			}
		case st.State == job.Preempted:
			out.Phase, out.Message = PhasePreempted, "waiting for GPUs after preemption"
		default:
			out.Phase, out.Message = PhasePending, "waiting for GPUs"
		}
	}
	return out
}

func sameStatus(a, b TideJobStatus) bool {
	pa, pb := a.PredictedFinish, b.PredictedFinish
	a.PredictedFinish, b.PredictedFinish = nil, nil
	if a != b || (pa == nil) != (pb == nil) {
		return false
	}
	return pa == nil || math.Abs(pa.Sub(pb.Time).Seconds()) < 60
}
