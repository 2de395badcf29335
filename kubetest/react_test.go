package kubetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tide-sched/tide/kube"
)

// testFillIdle: under Gavel's LAS (an LP re-planned every 360 s), a pod
// arriving while the cluster runs something waits for the next round with
// GPUs idle; with FillIdle (tide kube --fill-idle) it is bound at once on
// the GPUs the plan leaves idle, and the running pod stays put.
func testFillIdle(t *testing.T, e *env) {
	s := e.scenario(t, "tide-fill", "fill")
	s.node("fill-0", 4, "A100")
	_, stop := s.start(kube.Config{Policy: "gavel-las"})
	s.pod("fill", "first", 2, kube.AnnotDuration, "10h")
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.pods("fill")["first"].Spec.NodeName != "", "first pod not bound on the idle cluster"
	})
	s.kubelet("fill")
	s.pod("fill", "second", 1, kube.AnnotDuration, "1h")
	time.Sleep(3 * time.Second) // many rounds of tide, none of Gavel's
	if node := s.pods("fill")["second"].Spec.NodeName; node != "" {
		t.Fatalf("without --fill-idle the second pod was bound to %s before Gavel's next round", node)
	}
	stop()
	// A new scheduler plans at once (Gavel has no plan yet), which binds
	// the second pod either way; the third arrives after that plan.
	s.start(kube.Config{Policy: "gavel-las", FillIdle: true})
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.pods("fill")["second"].Spec.NodeName != "", "second pod not bound after the restart"
	})
	s.kubelet("fill")
	s.pod("fill", "third", 1, kube.AnnotDuration, "1h")
	eventually(t, 30*time.Second, func() (bool, string) {
		p := s.pods("fill")
		return p["third"].Spec.NodeName != "" && p["first"].Spec.NodeName != "" && p["first"].DeletionTimestamp == nil,
			fmt.Sprintf("with FillIdle: third on %q, first on %q", p["third"].Spec.NodeName, p["first"].Spec.NodeName)
	})
	s.checkCapacity(map[string]int{"fill-0": 4}, "fill")
}
