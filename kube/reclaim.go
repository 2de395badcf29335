package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// A preemption the API server refuses because a PodDisruptionBudget
// allows no disruption now (the Eviction API answers 429) leaves the job
// it was for waiting. Both sides are told: the pod tide could not evict
// gets a Warning event EvictionBlocked naming the job it was for, the
// waiting job's pending pods get FailedScheduling and PodScheduled=False
// naming the pod and its budget, and the waiting tenant's TideQueue gets
// the condition ReclaimBlocked=True (False again once nothing blocks).
// tide retries the eviction every round; the messages are written again
// at most once per explainGap while they stay the same.

// blockedEviction is one refused eviction: the pod, the workload keys
// it was evicted for (none for a release), and the API server's answer.
type blockedEviction struct {
	pod  *corev1.Pod
	keys []string
	err  error
}

// reclaim holds this round's refused evictions and what was last said.
type reclaim struct {
	keys  map[types.UID][]string // pod evicted this round -> the workloads it makes room for
	now   []blockedEviction
	said  map[string]time.Time // "uid message" -> when written
	queue map[string]string    // tenant -> message for its TideQueue (this round)
}

// evicting notes the workloads of keys that p's eviction makes room for.
func (r *reclaim) evicting(uid types.UID, keys []string) {
	if r.keys == nil {
		r.keys = map[types.UID][]string{}
	}
	r.keys[uid] = keys
}

// evictionRefused records p's eviction as refused when a disruption
// budget refused it. It runs with the round's results (calls.then).
func (s *Scheduler) evictionRefused(p *corev1.Pod, err error) {
	if apierrors.IsTooManyRequests(err) {
		s.reclaim.now = append(s.reclaim.now, blockedEviction{pod: p, keys: s.reclaim.keys[p.UID], err: err})
	}
}

// explainBlocked tells both sides of this round's refused evictions (see
// above) and sets what the TideQueues of waiting tenants show.
func (s *Scheduler) explainBlocked(ctx context.Context, v *view) {
	now := s.reclaim.now
	s.reclaim.now, s.reclaim.keys = nil, map[types.UID][]string{}
	s.reclaim.queue = map[string]string{}
	if s.reclaim.said == nil {
		s.reclaim.said = map[string]time.Time{}
	}
	if len(now) == 0 {
		return
	}
	sort.Slice(now, func(a, b int) bool { return now[a].pod.Name < now[b].pod.Name })
	due := func(uid types.UID, msg string) bool {
		k := string(uid) + " " + msg
		if t, ok := s.reclaim.said[k]; ok && time.Since(t) < explainGap {
			return false
		}
		s.reclaim.said[k] = time.Now()
		return true
	}
	calls := newCalls(ctx, s.cfg.Parallel)
	for _, b := range now {
		victim := b.pod.Namespace + "/" + b.pod.Name
		var names []string
		for _, k := range b.keys {
			if k != workloadKey(b.pod) {
				names = append(names, strings.TrimPrefix(strings.TrimPrefix(k, "pods/"), "tidejob/"))
			}
		}
		forWhom := "its GPUs"
		if len(names) > 0 {
			forWhom = "its GPUs for " + strings.Join(names, ", ")
		}
		note := fmt.Sprintf("tide could not preempt it to free %s on %s: a PodDisruptionBudget allows no disruption now (%v); tide tries again every round", forWhom, s.nodeOf(b.pod), b.err)
		if due(b.pod.UID, note) {
			s.fb.event(b.pod, corev1.EventTypeWarning, "EvictionBlocked", "Preempt", note)
		}
		for _, k := range b.keys {
			w := v.work[k]
			if w == nil || k == workloadKey(b.pod) {
				continue
			}
			msg := fmt.Sprintf("tide gave this job GPUs on %s held by %s, whose PodDisruptionBudget blocks its eviction: waiting until the budget allows it", s.nodeOf(b.pod), victim)
			if w.tenant != "" {
				if _, ok := s.reclaim.queue[w.tenant]; !ok {
					s.reclaim.queue[w.tenant] = fmt.Sprintf("%s waits for GPUs on %s held by %s, whose PodDisruptionBudget blocks its eviction", w.name, s.nodeOf(b.pod), victim)
				}
			}
			for _, p := range w.pods {
				if s.nodeOf(p) == "" && due(p.UID, msg) {
					calls.do(func(ctx context.Context) { s.unschedulable(ctx, p, msg) })
				}
			}
		}
	}
	calls.wait()
	for k, t := range s.reclaim.said {
		if time.Since(t) > 4*explainGap {
			delete(s.reclaim.said, k)
		}
	}
}
