package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Worker failures that are not the job's: a worker pod the API server
// refuses to create, or one its node's kubelet rejects (OutOfnvidia.com/gpu
// and the like). The TideJob's workers are retried with exponential
// backoff, and while it backs off with no worker bound the job is out of
// the engine, so it holds no GPUs.

// Backoff after a refused or rejected worker: doubling from retryBase up
// to retryMax, as the Job controller does, on the scheduler's clock
// (s.now: the wall clock, which tests move).
const (
	retryBase = time.Second
	retryMax  = 5 * time.Minute
)

// retry is a TideJob's backoff.
type retry struct {
	n      int       // failures in a row
	until  time.Time // no new workers before this
	reason string    // condition reason: FailedCreate or WorkerRejected
	msg    string
}

// fail records a failure of a TideJob's workers.
func (s *Scheduler) fail(key, reason, msg string) {
	r := s.retries[key]
	if r == nil {
		r = &retry{}
		s.retries[key] = r
	}
	d := retryBase << min(r.n, 20)
	r.n++
	r.until, r.reason, r.msg = s.now().Add(min(d, retryMax)), reason, msg
}

// backingOff: w may not get new workers now.
func (s *Scheduler) backingOff(w *workload) bool {
	r := s.retries[w.key]
	return r != nil && s.now().Before(r.until)
}

// holdBack: w stays out of the engine, backing off with nothing bound.
func (s *Scheduler) holdBack(w *workload) bool {
	return w.tj != nil && s.backingOff(w) && !w.hasBound(s)
}

// noteWorkers records rejected workers and forgets the backoff of
// TideJobs whose workers all run. A new rejection makes the next round
// rebuild the engine, so the lost worker is placed again.
func (s *Scheduler) noteWorkers(v *view) {
	for key, w := range v.work {
		if w.tj == nil {
			continue
		}
		for _, p := range w.rejected {
			if s.rejects[p.UID] {
				continue
			}
			s.rejects[p.UID] = true
			s.dirty = true
			s.fail(key, "WorkerRejected", fmt.Sprintf("worker %s rejected by node %s: %s: %s", p.Name, p.Spec.NodeName, p.Status.Reason, p.Status.Message))
		}
		running := 0
		for _, p := range w.pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if r := s.retries[key]; r != nil && running >= w.minW && s.now().After(r.until) {
			delete(s.retries, key)
		}
	}
	for key := range s.retries {
		if v.work[key] == nil {
			delete(s.retries, key)
		}
	}
}

// release lists the pods to free that the engine does not hold: every
// live worker of a failed TideJob (a failed job releases its GPUs), and
// the bound pods of jobs the engine does not run (a gang left bound in
// part by a crash or a lost node, a job that can never be placed), so
// no partial gang holds GPUs. Gangs some of whose pods already succeeded
// finish on their own.
func (s *Scheduler) release(v *view) []*corev1.Pod {
	inEngine := map[string]bool{}
	for id, w := range s.work {
		if st := s.eng.Job(id); st != nil && !st.State.Terminal() {
			inEngine[w.key] = true
		}
	}
	var out []*corev1.Pod
	for key, w := range v.work {
		switch {
		case w.tj != nil && w.jobFailed():
			out = append(out, w.pods...)
		case inEngine[key] || w.ended() || w.succeeded > 0:
		default:
			for _, p := range w.pods {
				if s.nodeOf(p) != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// removeFailed deletes p, a failed TideJob's worker marked evicted, in
// calls; a delete that fails unmarks it for the next round to try again.
func (s *Scheduler) removeFailed(calls *calls, p *corev1.Pod) {
	calls.do(func(ctx context.Context) {
		if err := s.remove(ctx, p); err != nil {
			calls.then(func() {
				delete(s.evicted, p.UID)
				s.log.Warn("deleting a failed TideJob's worker failed", "pod", p.Namespace+"/"+p.Name, "err", err)
			})
		}
	})
}

// remove deletes a pod tide no longer wants and no budget protects (a
// failed TideJob's worker), with the configured grace period.
func (s *Scheduler) remove(ctx context.Context, p *corev1.Pod) error {
	grace := int64(s.cfg.Grace.Seconds())
	err := s.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace,
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
