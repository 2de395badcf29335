package kube

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedhelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// Node changes are local: when a node becomes unusable, the workers tide
// placed there are lost, and only they. A worker is lost when its node
//
//   - is deleted (the pod garbage collector deletes its pods after a
//     while; tide evicts them at once, so they show as terminating);
//   - is cordoned (spec.unschedulable, kubectl cordon or drain);
//   - has not been Ready for NotReadyGrace (Ready False or Unknown, or the
//     node lifecycle controller's not-ready or unreachable taints): a node
//     that blinks NotReady for less keeps its workers, though it gets no
//     new ones meanwhile;
//   - carries a NoExecute taint the worker does not tolerate (the taint
//     manager evicts it too).
//
// A lost worker leaves its job at once: the engine sees the job without
// it, so the job shrinks (an elastic TideJob keeps its other workers) or
// restarts (a rigid job short of its minimum gets the missing workers on
// other nodes when the policy gives it GPUs, or waits with its other
// workers released), by the policy's rules. tide evicts the lost pod
// itself (Eviction API, event NodeLost) so it does not keep running beside
// its replacement; nothing on another node is evicted for it, unless the
// policy, planning the restarted job like any waiting one, preempts.

// DefaultNotReadyGrace is how long a node may be NotReady before its
// workers count as lost.
const DefaultNotReadyGrace = 30 * time.Second

// nodeReady: the node's Ready condition is True and the node lifecycle
// controller has not tainted it not-ready or unreachable.
func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeUsable: Ready and not cordoned: the node takes new workers.
func nodeUsable(n *corev1.Node) bool {
	return !n.Spec.Unschedulable && nodeReady(n)
}

// nodeLost says why every worker on n is lost now ("" when none is): it
// is cordoned, or has been NotReady for the grace period. since holds
// when tide first saw each node NotReady; nodeLost keeps it.
func nodeLost(n *corev1.Node, since map[string]time.Time, grace time.Duration, now time.Time) string {
	if nodeReady(n) {
		delete(since, n.Name)
	} else {
		t, ok := since[n.Name]
		if !ok {
			t = now
			since[n.Name] = t
		}
		if d := now.Sub(t); d >= grace {
			return fmt.Sprintf("node %s has been NotReady for %s", n.Name, d.Round(time.Second))
		}
	}
	if n.Spec.Unschedulable {
		return fmt.Sprintf("node %s was cordoned", n.Name)
	}
	return ""
}

// podLost says why p is lost on n ("" when it is not): its node is lost,
// or has a NoExecute taint p does not tolerate (other than the not-ready
// and unreachable ones, which NotReadyGrace covers).
func podLost(p *corev1.Pod, n *corev1.Node, nodeWhy string) string {
	if nodeWhy != "" {
		return nodeWhy
	}
	t, bad := schedhelper.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoExecute && t.Key != corev1.TaintNodeNotReady && t.Key != corev1.TaintNodeUnreachable
		}, true)
	if bad {
		return fmt.Sprintf("node %s has taint {%s: %s} with effect NoExecute, which the pod does not tolerate", n.Name, t.Key, t.Value)
	}
	return ""
}

// reasonNodeLost is the reason of the event on a lost worker's pod.
const reasonNodeLost = "NodeLost"

// lostPod is a worker to evict because its node became unusable.
type lostPod struct {
	pod *corev1.Pod
	why string
}
