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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

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
	// Pods created in one second are queued by name (creation timestamps
	// have a resolution of one second): the names give the order.
	s.pod("bind", "a-p3", 3)
	s.pod("bind", "b-p1", 1)
	t4 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bind", Name: "c-t4"},
		Spec: corev1.PodSpec{SchedulerName: s.sched, NodeSelector: map[string]string{"nvidia.com/gpu.product": "T4"},
			Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{kube.GPUResource: resource.MustParse("2")}}}}}}
	if _, err := s.cs.CoreV1().Pods("bind").Create(context.Background(), t4, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.pod("bind", "d-big", 4) // fits nowhere until a-p3 and b-p1 end
	// A pod with a gang size but no job is refused, not guessed at.
	s.pod("bind", "e-bad", 1, kube.AnnotGangSize, "2")
	all := []string{"a-p3", "b-p1", "c-t4", "d-big", "e-bad"}
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods("bind"), all...)
		return strings.Join(got, ",") == "a-p3,b-p1,c-t4", fmt.Sprintf("bound %v, want a-p3, b-p1, c-t4", got)
	})
	pods := s.pods("bind")
	for name, node := range map[string]string{"a-p3": "bind-a100-0", "b-p1": "bind-a100-0", "c-t4": "bind-t4-0"} {
		if got := pods[name].Spec.NodeName; got != node {
			t.Errorf("%s on %s, want %s (best fit; c-t4 asks for T4)", name, got, node)
		}
	}
	s.checkCapacity(capacity, "bind")
	s.kubelet("bind")
	s.end("bind", corev1.PodSucceeded, "a-p3", "b-p1")
	eventually(t, 20*time.Second, func() (bool, string) {
		p := s.pods("bind")["d-big"]
		return p.Spec.NodeName == "bind-a100-0", "d-big on " + p.Spec.NodeName
	})
	s.checkCapacity(capacity, "bind")
	if st := sch.Stats(); st.Bound != 4 || st.BindErrors != 0 {
		t.Errorf("stats %+v, want 4 binds, no errors", st)
	}
	if got := s.pods("bind")["e-bad"].Spec.NodeName; got != "" {
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
	// A gang's binds are separate API calls, so a look may fall between
	// them; a gang still partly bound a second later is a failure.
	check := func() (na, nb, nc int) {
		for end := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
			pods := s.pods("gang")
			na, nb, nc = len(bound(pods, a...)), len(bound(pods, b...)), len(bound(pods, c...))
			partial := ""
			for name, n := range map[string]int{"a": na, "b": nb, "c": nc} {
				if n != 0 && n != 3 {
					partial = fmt.Sprintf("gang %s partly bound: %d of 3 pods", name, n)
				}
			}
			if partial == "" {
				break
			}
			if time.Now().After(end) {
				t.Fatal(partial)
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
// Eviction API: a PodDisruptionBudget that allows no disruption makes
// evictions fail (a plain delete would ignore it), so the long job keeps
// running until the budget is gone.
func testEvict(t *testing.T, e *env) {
	s := e.scenario(t, "tide-evict", "evict")
	s.node("evict-0", 4, "A100")
	ctx := context.Background()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "evict", Name: "keep-long"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "long"}}}}
	pdb, err := s.cs.PolicyV1().PodDisruptionBudgets("evict").Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Play the disruption controller: the budget allows no disruption.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0,
		CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if _, err := s.cs.PolicyV1().PodDisruptionBudgets("evict").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sch, _ := s.start(kube.Config{Policy: "srtf"})
	s.pod("evict", "long", 4, kube.AnnotDuration, "10h")
	// tide may bind the pod between its creation and this update: label
	// the pod as it is now.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		long, err := s.cs.CoreV1().Pods("evict").Get(ctx, "long", metav1.GetOptions{})
		if err != nil {
			return err
		}
		long.Labels = map[string]string{"app": "long"}
		_, err = s.cs.CoreV1().Pods("evict").Update(ctx, long, metav1.UpdateOptions{})
		return err
	}); err != nil {
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
