package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/kube"
)

// policyStateRun is a namespace, a node and tide processes under leader
// election, as tide's service account, for the policy-state tests.
type policyStateRun struct {
	t          *testing.T
	e          *env
	ns, sched  string
	lease      electSpec
	kubeconfig string
}

func newPolicyStateRun(t *testing.T, e *env, ns string, gpus int) *policyStateRun {
	ctx := context.Background()
	r := &policyStateRun{t: t, e: e, ns: ns, sched: "tide-" + ns,
		lease: electSpec{Namespace: "tide-system", Name: "tide-" + ns,
			LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi")}
	if err := readyNode(ctx, e.cs, ns+"-node", alloc); err != nil {
		t.Fatal(err)
	}
	r.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(asTide(e.cfg), r.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs a replica of tide kube with the policy.
func (r *policyStateRun) start(id, policy string, stateLimit int) *runningScheduler {
	el := r.lease
	el.Identity = id
	spec := schedSpec{Kind: "tide", Policy: policy, Name: r.sched, Kubeconfig: r.kubeconfig, QPS: 50, Burst: 100,
		Out: filepath.Join(r.t.TempDir(), id+".json"), Elect: &el, PolicyStateLimit: stateLimit}
	p, err := startScheduler(spec, filepath.Join(r.t.TempDir(), id+".log"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// pod creates a pod of one container asking gpus GPUs for tide.
func (r *policyStateRun) pod(name string, gpus int) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: r.sched, Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				kube.GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
	if _, err := r.e.cs.CoreV1().Pods(r.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// get returns the pod, nil when it is gone.
func (r *policyStateRun) get(name string) *corev1.Pod {
	p, err := r.e.cs.CoreV1().Pods(r.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *policyStateRun) holder() string {
	l, err := r.e.cs.CoordinationV1().Leases(r.lease.Namespace).Get(context.Background(), r.lease.Name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// saved decodes the state on the Lease tide keeps it on; nil when there is
// none yet.
func (r *policyStateRun) saved() *kube.SavedPolicyState {
	l, err := r.e.cs.CoordinationV1().Leases(r.lease.Namespace).Get(context.Background(), r.lease.Name+"-policy-state", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	v, ok := l.Annotations[kube.PolicyStateAnnotation]
	if !ok {
		return nil
	}
	st, err := kube.DecodePolicyState(v)
	if err != nil {
		r.t.Fatalf("the Lease's %s does not decode: %v", kube.PolicyStateAnnotation, err)
	}
	return st
}

// engineRounds reads the rounds count from the engine's part of a saved
// state (engine.Engine.PolicyState's encoding: a gob with a Rounds field).
func engineRounds(t *testing.T, st *kube.SavedPolicyState) int {
	var e struct {
		Policy string
		Rounds int
	}
	if err := engine.DecodeState(st.Engine, &e); err != nil {
		t.Fatalf("the engine's state does not decode: %v", err)
	}
	return e.Rounds
}

func history(st *kube.SavedPolicyState, suffix string) *kube.JobHistory {
	for i := range st.Jobs {
		if j := st.Jobs[i].Job; len(j) >= len(suffix) && j[len(j)-len(suffix):] == suffix {
			return &st.Jobs[i]
		}
	}
	return nil
}

// TestPolicyStateSurvivesFailover runs two tide processes under leader
// election with Tiresias, one queue limit of 240 GPU-seconds, on a node of
// 8 GPUs. Pod a, asking all 8, runs until the state on the policy-state
// Lease shows it past the limit (30 s: the second queue); then the leader
// is killed (SIGKILL) and pod b, as large, arrives once the standby
// leads. The standby must load the state:
//
//   - b preempts a (b, in the first queue, goes before a in the second)
//     less than 30 s after the standby took the Lease: a fresh policy
//     would count a's service from zero where it found it bound, and see
//     it past the limit only 30 s later, leaving b waiting until then;
//   - the state the new leader saves goes on from the old one: more
//     rounds than the old leader had run, and b's history.
func TestPolicyStateSurvivesFailover(t *testing.T) {
	e := startEnv(t)
	const limitGPUs, gpus = 240, 8
	accrue := time.Duration(limitGPUs/gpus) * time.Second // a's time to the limit
	r := newPolicyStateRun(t, e, "pstate", gpus)
	policy := fmt.Sprintf("tiresias:limits=%d", limitGPUs)
	procs := map[string]*runningScheduler{"replica-a": r.start("replica-a", policy, 0), "replica-b": r.start("replica-b", policy, 0)}
	r.pod("a", gpus)
	eventually(t, time.Minute, func() (bool, string) {
		p := r.get("a")
		return p != nil && p.Spec.NodeName != "", "a not bound"
	})
	var before *kube.SavedPolicyState
	eventually(t, accrue+time.Minute, func() (bool, string) {
		before = r.saved()
		if before == nil {
			return false, "no policy state on the Lease yet"
		}
		h := history(before, "/a")
		if h == nil {
			return false, fmt.Sprintf("no history of a in the saved state: %+v", before.Jobs)
		}
		return h.Attained >= limitGPUs, fmt.Sprintf("a has %.0f GPU-seconds saved, waiting for %d", h.Attained, limitGPUs)
	})
	oldRounds := engineRounds(t, before)
	leader := r.holder()
	old := procs[leader]
	if old == nil {
		t.Fatalf("lease held by %q, want a replica", leader)
	}
	standbyID := "replica-a"
	if leader == standbyID {
		standbyID = "replica-b"
	}
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-old.done
	var tookOver time.Time
	eventually(t, r.lease.LeaseDuration+time.Minute, func() (bool, string) {
		if h := r.holder(); h == standbyID {
			tookOver = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("lease held by %q", r.holder())
	})
	r.pod("b", gpus)
	var preempted time.Time
	eventually(t, accrue+time.Minute, func() (bool, string) {
		a := r.get("a")
		if a == nil || a.DeletionTimestamp != nil {
			preempted = time.Now()
			return true, ""
		}
		return false, "a not evicted"
	})
	t.Logf("a evicted %.1f s after %s took the Lease (a fresh policy: not before %v)",
		preempted.Sub(tookOver).Seconds(), standbyID, accrue)
	if d := preempted.Sub(tookOver); d >= accrue {
		t.Errorf("a evicted %.1f s after the takeover, not before a fresh policy would have: the state was not used", d.Seconds())
	}
	// No kubelet here: end a's containers, as one would after the grace period.
	zero := int64(0)
	if err := e.cs.CoreV1().Pods(r.ns).Delete(context.Background(), "a", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		p := r.get("b")
		return p != nil && p.Spec.NodeName != "", "b not bound"
	})
	eventually(t, time.Minute, func() (bool, string) {
		st := r.saved()
		if h := history(st, "/b"); h == nil || h.Attained == 0 {
			return false, "no history of b running in the state the new leader saves"
		}
		if n := engineRounds(t, st); n <= oldRounds {
			return false, fmt.Sprintf("the new leader's state has %d rounds, the old one's had %d: not carried on", n, oldRounds)
		}
		return true, ""
	})
}

// TestPolicyStateTooLarge: a state over the limit (here 64 bytes, less
// than any) is not saved, a Warning Event on the Lease says so, and the
// leader goes on scheduling.
func TestPolicyStateTooLarge(t *testing.T) {
	e := startEnv(t)
	r := newPolicyStateRun(t, e, "pstate-large", 8)
	p := r.start("replica", "tiresias", 64)
	r.pod("a", 1)
	var msg string
	eventually(t, 2*time.Minute, func() (bool, string) {
		l, err := e.cs.EventsV1().Events(r.lease.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range l.Items {
			if ev.Reason == "PolicyStateTooLarge" && ev.Regarding.Kind == "Lease" && ev.Regarding.Name == r.lease.Name+"-policy-state" {
				msg = ev.Note
				return ev.Type == corev1.EventTypeWarning, "the event is not a Warning"
			}
		}
		return false, "no PolicyStateTooLarge event on the policy-state Lease"
	})
	t.Logf("event: %s", msg)
	if st := r.saved(); st != nil {
		t.Errorf("a state over the limit was saved: %d jobs", len(st.Jobs))
	}
	r.pod("b", 1)
	eventually(t, time.Minute, func() (bool, string) {
		a, b := r.get("a"), r.get("b")
		return a != nil && b != nil && a.Spec.NodeName != "" && b.Spec.NodeName != "", "a and b not both bound"
	})
	if p.exited() {
		t.Fatalf("tide exited: %s", p.logTail())
	}
}
