package kubetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tide-sched/tide/kube"
)

// testLogger logs the scheduler to stderr when TIDE_KUBETEST_LOG is set.
func testLogger(t *testing.T) *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("TIDE_KUBETEST_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// testBind: single pods are bound to nodes with room, by GPU type; a pod
// that does not fit waits and is bound once GPUs free up.
func testBind(t *testing.T, e *env) {
	s := e.scenario(t, "tide-bind", "bind")
	s.node("bind-a100-0", 4, "A100")
	s.node("bind-t4-0", 2, "T4")
	capacity := map[string]int{"bind-a100-0": 4, "bind-t4-0": 2}
	sch, _ := s.start(kube.Config{Policy: "fifo:backfill=true"})
	s.pod("bind", "p1", 1)
	s.pod("bind", "p3", 3)
	t4 := &corev1.Pod{}
	*t4 = *s.pod("bind", "t4", 2)
	s.pod("bind", "big", 4) // fits nowhere until p3 and p1 end
	// A pod for a GPU type no node has is never bound; one with a typo'd
	// annotation is refused, not guessed at.
	s.pod("bind", "bad", 1, kube.AnnotGangSize, "2")
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods("bind"), "p1", "p3", "t4", "big", "bad")
		return strings.Join(got, ",") == "p1,p3,t4", fmt.Sprintf("bound %v, want p1, p3, t4", got)
	})
	pods := s.pods("bind")
	if pods["p3"].Spec.NodeName != "bind-a100-0" || pods["p1"].Spec.NodeName != "bind-a100-0" {
		t.Errorf("p1 on %s, p3 on %s, want both on the A100 node (the T4 node has 2 GPUs, the T4 pod takes them)",
			pods["p1"].Spec.NodeName, pods["p3"].Spec.NodeName)
	}
	s.checkCapacity(capacity, "bind")
	s.kubelet("bind")
	s.end("bind", corev1.PodSucceeded, "p1", "p3")
	eventually(t, 20*time.Second, func() (bool, string) {
		p := s.pods("bind")["big"]
		return p.Spec.NodeName == "bind-a100-0", "big pod on " + p.Spec.NodeName
	})
	s.checkCapacity(capacity, "bind")
	if st := sch.Stats(); st.Bound != 4 || st.BindErrors != 0 {
		t.Errorf("stats %+v, want 4 binds, no errors", st)
	}
	if got := s.pods("bind")["bad"].Spec.NodeName; got != "" {
		t.Errorf("pod with a gang size but no job bound to %s", got)
	}
}

// testGang: two gangs of 3 pods x 2 GPUs contend for 8 GPUs; exactly one
// is bound whole and the other not at all, at every moment we look; a gang
// whose pods are not all created yet waits for them.
func testGang(t *testing.T, e *env) {
	s := e.scenario(t, "tide-gang", "gang")
	s.node("gang-0", 4, "A100")
	s.node("gang-1", 4, "A100")
	capacity := map[string]int{"gang-0": 4, "gang-1": 4}
	s.start(kube.Config{Policy: "fifo"})
	gang := func(job string, i int) string {
		name := fmt.Sprintf("%s-%d", job, i)
		s.pod("gang", name, 2, kube.AnnotJob, job, kube.AnnotGangSize, "3")
		return name
	}
	var a, b []string
	for i := 0; i < 3; i++ { // interleaved, as two users submitting at once
		a = append(a, gang("a", i))
		b = append(b, gang("b", i))
	}
	c := []string{gang("c", 0), gang("c", 1)} // its third pod comes later
	check := func() (na, nb, nc int) {
		pods := s.pods("gang")
		na, nb, nc = len(bound(pods, a...)), len(bound(pods, b...)), len(bound(pods, c...))
		for name, n := range map[string]int{"a": na, "b": nb, "c": nc} {
			if n != 0 && n != 3 {
				t.Fatalf("gang %s partly bound: %d of 3 pods", name, n)
			}
		}
		s.checkCapacity(capacity, "gang")
		return
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		na, nb, _ := check()
		return na+nb == 3, fmt.Sprintf("bound %d of a, %d of b", na, nb)
	})
	// Nothing changes while the winner runs.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if na, nb, nc := check(); na+nb != 3 || nc != 0 {
			t.Fatalf("bound a %d, b %d, c %d while a gang runs", na, nb, nc)
		}
	}
	winner, loser := a, b
	if na, _, _ := check(); na == 0 {
		winner, loser = b, a
	}
	s.kubelet("gang")
	s.end("gang", corev1.PodSucceeded, winner...)
	eventually(t, 20*time.Second, func() (bool, string) {
		pods := s.pods("gang")
		n := len(bound(pods, loser...))
		check()
		return n == 3, fmt.Sprintf("second gang: %d of 3 bound", n)
	})
	s.kubelet("gang")
	s.end("gang", corev1.PodSucceeded, loser...)
	time.Sleep(500 * time.Millisecond)
	if _, _, nc := check(); nc != 0 {
		t.Fatalf("gang c bound with 2 of its 3 pods")
	}
	c = append(c, gang("c", 2))
	eventually(t, 20*time.Second, func() (bool, string) {
		_, _, nc := check()
		return nc == 3, fmt.Sprintf("gang c: %d of 3 bound", nc)
	})
}

// testEvict: under SRTF a short job preempts a long one through the
// Eviction API: a PodDisruptionBudget the API server has not yet processed
// makes evictions fail (a plain delete would ignore it), so the long job
// keeps running until the budget is gone.
func testEvict(t *testing.T, e *env) {
	s := e.scenario(t, "tide-evict", "evict")
	s.node("evict-0", 4, "A100")
	ctx := context.Background()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "evict", Name: "keep-long"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "long"}}}}
	if _, err := s.cs.PolicyV1().PodDisruptionBudgets("evict").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sch, _ := s.start(kube.Config{Policy: "srtf"})
	long := s.pod("evict", "long", 4, kube.AnnotDuration, "10h")
	long.Labels = map[string]string{"app": "long"}
	if _, err := s.cs.CoreV1().Pods("evict").Update(ctx, long, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.pods("evict")["long"].Spec.NodeName != "", "long job not bound"
	})
	s.kubelet("evict")
	s.pod("evict", "short", 2, kube.AnnotDuration, "1m")
	eventually(t, 20*time.Second, func() (bool, string) {
		st := sch.Stats()
		return st.EvictErrors > 0, fmt.Sprintf("no refused eviction yet: %+v", st)
	})
	pods := s.pods("evict")
	if pods["long"] == nil || pods["long"].DeletionTimestamp != nil || pods["short"].Spec.NodeName != "" {
		t.Fatalf("with the budget in place: long %v, short bound to %q; want long kept, short waiting",
			pods["long"] != nil, pods["short"].Spec.NodeName)
	}
	if err := s.cs.PolicyV1().PodDisruptionBudgets("evict").Delete(ctx, "keep-long", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		pods := s.pods("evict")
		return pods["long"] == nil && pods["short"].Spec.NodeName == "evict-0",
			fmt.Sprintf("long still there: %v; short on %q", pods["long"] != nil, pods["short"].Spec.NodeName)
	})
	if st := sch.Stats(); st.Evicted != 1 {
		t.Errorf("stats %+v, want 1 eviction", st)
	}
}
