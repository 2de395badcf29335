package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tide-sched/tide/kube"
)

// testQueues: quotas live in TideQueues, edited while tide runs. Tenant
// qa (guaranteed 2, no borrowing) gets 2 of its 4 pods on a 4-GPU node;
// its borrow limit raised to 2, the next rounds bind the other two; qb's
// pods arrive and tide takes qb's guarantee back from qa's borrowed pods;
// an edit guaranteeing more GPUs than the cluster has is refused with a
// status condition while the last accepted spec stays in force, and one
// the schema forbids is refused by the API server naming the field.
func testQueues(t *testing.T, e *env) {
	s := e.scenario(t, "tide-queues", "qa", "qb")
	s.node("queues-0", 4, "A100")
	ctx := context.Background()
	queues := e.dyn.Resource(kube.TideQueueResource)
	put := func(name string, spec map[string]any) error {
		u, err := queues.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": kube.Group + "/" + kube.Version, "kind": "TideQueue",
				"metadata": map[string]any{"name": name}, "spec": spec}}
			_, err = queues.Create(ctx, u, metav1.CreateOptions{})
			return err
		}
		u.Object["spec"] = spec
		_, err = queues.Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	t.Cleanup(func() { // other scenarios' tenants have no quota
		for _, n := range []string{"qa", "qb"} {
			_ = queues.Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	get := func(name string) *kube.TideQueue {
		u, err := queues.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := &kube.TideQueue{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	accepted := func(name string) *metav1.Condition {
		q := get(name)
		c := meta.FindStatusCondition(q.Status.Conditions, "Accepted")
		if c == nil || c.ObservedGeneration != q.Generation {
			return nil
		}
		return c
	}
	for _, n := range []string{"qa", "qb"} {
		if err := put(n, map[string]any{"guaranteedGPUs": int64(2), "borrowLimit": int64(0)}); err != nil {
			t.Fatal(err)
		}
	}
	sch, _ := s.start(kube.Config{Policy: "fifo", Borrow: true}) // tide kube's default --borrow
	eventually(t, 20*time.Second, func() (bool, string) {
		a, b := accepted("qa"), accepted("qb")
		return a != nil && b != nil && a.Status == metav1.ConditionTrue && b.Status == metav1.ConditionTrue,
			fmt.Sprintf("conditions: qa %v, qb %v", a, b)
	})
	qa := []string{"a-0", "a-1", "a-2", "a-3"}
	for _, n := range qa {
		s.pod("qa", n, 1, kube.AnnotDuration, "10h")
	}
	boundIn := func(ns string, names ...string) int { return len(bound(s.pods(ns), names...)) }
	eventually(t, 20*time.Second, func() (bool, string) {
		n := boundIn("qa", qa...)
		return n == 2, fmt.Sprintf("qa: %d pods bound, want 2 (guaranteed 2, borrowing 0)", n)
	})
	time.Sleep(time.Second) // a few rounds: still 2
	if n := boundIn("qa", qa...); n != 2 {
		t.Fatalf("qa: %d pods bound with borrowLimit 0, want 2", n)
	}
	if err := put("qa", map[string]any{"guaranteedGPUs": int64(2), "borrowLimit": int64(2)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		n := boundIn("qa", qa...)
		st := get("qa").Status
		return n == 4 && st.GPUs == 4 && st.Borrowed == 2, fmt.Sprintf("qa: %d pods bound, status %+v; want 4 bound, 2 borrowed", n, st)
	})
	s.kubelet("qa")
	s.pod("qb", "b-0", 1, kube.AnnotDuration, "1h")
	s.pod("qb", "b-1", 1, kube.AnnotDuration, "1h")
	eventually(t, 30*time.Second, func() (bool, string) {
		nb := boundIn("qb", "b-0", "b-1")
		left := 0
		for _, p := range s.pods("qa") {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				left++
			}
		}
		return nb == 2 && left == 2, fmt.Sprintf("qb: %d of 2 bound; qa: %d pods left bound (want 2)", nb, left)
	})
	s.checkCapacity(map[string]int{"queues-0": 4}, "qa", "qb")
	// A bad edit: more GPUs guaranteed than the cluster has.
	if err := put("qa", map[string]any{"guaranteedGPUs": int64(100)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		c := accepted("qa")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Oversubscribed" &&
			strings.Contains(c.Message, "stays in force"), fmt.Sprintf("qa's condition %+v", c)
	})
	// The last accepted spec stays: qb keeps its guarantee, nothing moves.
	time.Sleep(time.Second)
	if nb := boundIn("qb", "b-0", "b-1"); nb != 2 {
		t.Errorf("after the refused edit qb has %d of 2 pods bound", nb)
	}
	// The schema refuses a negative guarantee, naming the field.
	err := put("qb", map[string]any{"guaranteedGPUs": int64(-1)})
	if err == nil || !strings.Contains(err.Error(), "spec.guaranteedGPUs") {
		t.Errorf("negative guarantee: %v, want the API server to refuse it naming spec.guaranteedGPUs", err)
	}
	if st := sch.Stats(); st.Rounds == 0 {
		t.Errorf("no rounds: %+v", st)
	}
}

// testReclaimBlocked: tenant rb's guarantee is lent to ra, whose pods a
// PodDisruptionBudget protects; when rb's pods come, tide's evictions are
// refused, and both sides are told: EvictionBlocked events on ra's pods,
// FailedScheduling events and PodScheduled=False on rb's naming the
// budget, and rb's TideQueue shows ReclaimBlocked=True. Once the budget
// is gone rb's pods are bound and the condition turns False.
func testReclaimBlocked(t *testing.T, e *env) {
	s := e.scenario(t, "tide-reclaim", "ra", "rb")
	s.node("reclaim-0", 4, "A100")
	ctx := context.Background()
	queues := e.dyn.Resource(kube.TideQueueResource)
	for _, n := range []string{"ra", "rb"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kube.Group + "/" + kube.Version, "kind": "TideQueue",
			"metadata": map[string]any{"name": n}, "spec": map[string]any{"guaranteedGPUs": int64(2)}}}
		if _, err := queues.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range []string{"ra", "rb"} {
			_ = queues.Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	one := intstr.FromInt32(1)
	pdb, err := s.cs.PolicyV1().PodDisruptionBudgets("ra").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ra", Name: "keep-ra"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ra"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Play the disruption controller: the budget allows no disruption.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0,
		CurrentHealthy: 4, DesiredHealthy: 4, ExpectedPods: 4}
	if _, err := s.cs.PolicyV1().PodDisruptionBudgets("ra").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.start(kube.Config{Policy: "fifo", Borrow: true})
	ra := []string{"a-0", "a-1", "a-2", "a-3"}
	for _, n := range ra {
		s.podWith("ra", n, 1, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "ra"} }, kube.AnnotDuration, "10h")
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		n := len(bound(s.pods("ra"), ra...))
		return n == 4, fmt.Sprintf("ra: %d of 4 pods bound (2 guaranteed, 2 borrowed)", n)
	})
	s.kubelet("ra")
	s.pod("rb", "b-0", 1, kube.AnnotDuration, "1h")
	s.pod("rb", "b-1", 1, kube.AnnotDuration, "1h")
	events := func(ns, reason, want string) int {
		l, err := s.cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range l.Items {
			if ev.Reason == reason && strings.Contains(ev.Note, want) {
				n++
			}
		}
		return n
	}
	reclaim := func() *metav1.Condition {
		u, err := queues.Get(ctx, "rb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := &kube.TideQueue{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(q.Status.Conditions, "ReclaimBlocked")
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		blocked := events("ra", "EvictionBlocked", "PodDisruptionBudget")
		waiting := events("rb", "FailedScheduling", "PodDisruptionBudget")
		cond := ""
		if p := s.pods("rb")["b-0"]; p != nil {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					cond = c.Message
				}
			}
		}
		c := reclaim()
		return blocked > 0 && waiting > 0 && strings.Contains(cond, "PodDisruptionBudget") && c != nil && c.Status == metav1.ConditionTrue,
			fmt.Sprintf("EvictionBlocked events on ra's pods %d, FailedScheduling naming the budget on rb's %d, b-0's PodScheduled=False %q, rb's ReclaimBlocked %+v",
				blocked, waiting, cond, c)
	})
	if n := len(bound(s.pods("ra"), ra...)); n != 4 {
		t.Errorf("with the budget in place ra has %d of 4 pods bound, want 4", n)
	}
	if err := s.cs.PolicyV1().PodDisruptionBudgets("ra").Delete(ctx, "keep-ra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		s.kubelet("ra", "rb")
		nb := len(bound(s.pods("rb"), "b-0", "b-1"))
		c := reclaim()
		return nb == 2 && c != nil && c.Status == metav1.ConditionFalse, fmt.Sprintf("rb: %d of 2 bound, ReclaimBlocked %+v", nb, c)
	})
	s.checkCapacity(map[string]int{"reclaim-0": 4}, "ra", "rb")
}
