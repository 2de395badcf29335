package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tide-sched/tide/kube"
)

// testRestart stops tide in the middle of a run and starts a new one: pods
// already bound stay where they are (no double binding: the new scheduler
// makes no failed binds), a gang the old one had bound only in part is
// completed, pods created while tide was down are bound, and a TideJob's
// workers are neither duplicated nor lost.
func testRestart(t *testing.T, e *env) {
	s := e.scenario(t, "tide-restart", "restart")
	s.node("restart-0", 4, "A100")
	s.node("restart-1", 4, "A100")
	capacity := map[string]int{"restart-0": 4, "restart-1": 4}
	_, stop := s.start(kube.Config{Policy: "fifo:backfill=true"})
	s.pod("restart", "g-0", 1, kube.AnnotJob, "g", kube.AnnotGangSize, "2")
	s.pod("restart", "g-1", 1, kube.AnnotJob, "g", kube.AnnotGangSize, "2")
	s.tidejob("restart", "tj", 2, 2, 1)
	eventually(t, 20*time.Second, func() (bool, string) {
		n := len(bound(s.pods("restart"), "g-0", "g-1")) + s.workers("restart", "tj")
		return n == 4, fmt.Sprintf("%d of 4 pods bound", n)
	})
	before := map[string]string{}
	for name, p := range s.pods("restart") {
		before[name] = p.Spec.NodeName
	}
	stop()
	s.kubelet("restart")
	// While tide is down: a new single pod, and a gang left half bound (as
	// if tide had died between its two binds).
	s.pod("restart", "late", 2)
	h0 := s.pod("restart", "h-0", 1, kube.AnnotJob, "h", kube.AnnotGangSize, "2")
	s.pod("restart", "h-1", 1, kube.AnnotJob, "h", kube.AnnotGangSize, "2")
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "restart", Name: h0.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "restart-1"}}
	if err := s.cs.CoreV1().Pods("restart").Bind(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sch, _ := s.start(kube.Config{Policy: "fifo:backfill=true"})
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods("restart"), "late", "h-0", "h-1")
		return len(got) == 3, fmt.Sprintf("bound %v after the restart", got)
	})
	time.Sleep(500 * time.Millisecond) // a few more rounds: nothing may move
	after := s.pods("restart")
	for name, node := range before {
		if after[name] == nil || after[name].Spec.NodeName != node {
			t.Errorf("pod %s was on %q, now %v", name, node, after[name])
		}
	}
	if n := len(after); n != len(before)+3 {
		t.Errorf("%d pods after the restart, want %d (no TideJob worker added or lost)", n, len(before)+3)
	}
	s.checkCapacity(capacity, "restart")
	if st := sch.Stats(); st.BindErrors != 0 || st.Bound != 2 || st.Created != 0 || st.Evicted != 0 {
		t.Errorf("new scheduler: %+v, want 2 binds (late, h-1), none failed, nothing created or evicted", st)
	}
}

// tidejob creates a TideJob of min..max workers of gpus GPUs.
func (s *scenario) tidejob(ns, name string, min, max, gpus int, opts ...func(*kube.TideJob)) {
	s.t.Helper()
	tj := &kube.TideJob{TypeMeta: metav1.TypeMeta{APIVersion: kube.Group + "/" + kube.Version, Kind: "TideJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kube.TideJobSpec{MinWorkers: min, MaxWorkers: max, GPUsPerWorker: gpus,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: s.sched,
				Containers: []corev1.Container{{Name: "train", Image: "trainer"}}}}}}
	for _, o := range opts {
		o(tj)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.dyn.Resource(kube.TideJobResource).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// getTideJob reads a TideJob back.
func (s *scenario) getTideJob(ns, name string) *kube.TideJob {
	s.t.Helper()
	u, err := s.dyn.Resource(kube.TideJobResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	tj := &kube.TideJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tj); err != nil {
		s.t.Fatal(err)
	}
	return tj
}

// workers counts a TideJob's live bound worker pods.
func (s *scenario) workers(ns, name string) int {
	n := 0
	for _, p := range s.workerPods(ns, name) {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func (s *scenario) workerPods(ns, name string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.pods(ns) {
		if p.Labels[kube.LabelTideJob] == name && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// testElastic: under AFS an elastic TideJob (1 to 4 workers) grows to the
// whole node while alone, shrinks when a second TideJob arrives (tide
// evicts workers, keeping the rest), and grows back when that job ends;
// its status reports the phase, worker count, resizes and a predicted
// finish.
func testElastic(t *testing.T, e *env) {
	s := e.scenario(t, "tide-elastic", "elastic")
	s.node("elastic-0", 4, "A100")
	s.start(kube.Config{Policy: "afs"})
	s.tidejob("elastic", "a", 1, 4, 1, func(tj *kube.TideJob) { tj.Spec.Duration = "2h" })
	eventually(t, 20*time.Second, func() (bool, string) {
		tj := s.getTideJob("elastic", "a")
		return s.workers("elastic", "a") == 4 && tj.Status.Phase == kube.PhaseRunning && tj.Status.Workers == 4,
			fmt.Sprintf("a: %d workers bound, status %+v", s.workers("elastic", "a"), tj.Status)
	})
	if tj := s.getTideJob("elastic", "a"); tj.Status.PredictedFinish == nil ||
		tj.Status.PredictedFinish.Time.Before(time.Now()) || tj.Status.PredictedFinish.Time.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("predicted finish %v, want within the next 2 h (2 h on one worker, 4 workers)", tj.Status.PredictedFinish)
	}
	s.kubelet("elastic")
	kept := map[string]bool{}
	for _, p := range s.workerPods("elastic", "a") {
		kept[p.Name] = true
	}
	s.tidejob("elastic", "b", 1, 4, 1, func(tj *kube.TideJob) { tj.Spec.Duration = "30m" })
	eventually(t, 20*time.Second, func() (bool, string) {
		na, nb := s.workers("elastic", "a"), s.workers("elastic", "b")
		return na >= 1 && nb >= 1 && na+nb == 4, fmt.Sprintf("a %d workers, b %d", na, nb)
	})
	for _, p := range s.workerPods("elastic", "a") {
		if !kept[p.Name] {
			t.Errorf("a's worker %s is new: shrinking must keep surviving workers", p.Name)
		}
	}
	s.checkCapacity(map[string]int{"elastic-0": 4}, "elastic")
	eventually(t, 10*time.Second, func() (bool, string) {
		st := s.getTideJob("elastic", "a").Status
		return st.Resizes >= 1 && st.Workers < 4, fmt.Sprintf("a's status %+v, want a resize", st)
	})
	s.kubelet("elastic")
	var bw []string
	for _, p := range s.workerPods("elastic", "b") {
		bw = append(bw, p.Name)
	}
	s.end("elastic", corev1.PodSucceeded, bw...)
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("elastic", "a") == 4 && s.getTideJob("elastic", "b").Status.Phase == kube.PhaseSucceeded,
			fmt.Sprintf("a %d workers, b %s", s.workers("elastic", "a"), s.getTideJob("elastic", "b").Status.Phase)
	})
}

// testQuota: tenants (namespaces) with 4 GPUs of quota each on 8 GPUs.
// Team a borrows b's idle half; when b's job arrives, tide evicts a's
// borrowed pod and binds b's.
func testQuota(t *testing.T, e *env) {
	s := e.scenario(t, "tide-quota", "team-a", "team-b")
	s.node("quota-0", 4, "A100")
	s.node("quota-1", 4, "A100")
	s.start(kube.Config{Policy: "fifo", Quotas: map[string]int{"team-a": 4, "team-b": 4}, Borrow: true})
	s.pod("team-a", "a1", 4)
	s.pod("team-a", "a2", 4)
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods("team-a"), "a1", "a2")
		return len(got) == 2, fmt.Sprintf("team a bound %v, want both (borrowing b's idle GPUs)", got)
	})
	s.kubelet("team-a")
	s.pod("team-b", "b1", 4)
	eventually(t, 20*time.Second, func() (bool, string) {
		a, b := s.pods("team-a"), s.pods("team-b")
		return len(a) == 1 && b["b1"].Spec.NodeName != "", fmt.Sprintf("team a has %d pods, b1 on %q", len(a), b["b1"].Spec.NodeName)
	})
	if a := s.pods("team-a"); a["a1"] == nil {
		t.Errorf("a1 (within quota) was evicted; the borrowed a2 should have been")
	}
	s.checkCapacity(map[string]int{"quota-0": 4, "quota-1": 4}, "team-a", "team-b")
}
