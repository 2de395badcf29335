package kubetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/kube"
)

// The cases of an ordinary day on a cluster (issue 20): each fails on a
// scheduler that ignores node changes, feasibility or worker failures.

// podWith creates a pod for tide asking for gpus, changed by edit.
func (s *scenario) podWith(ns, name string, gpus int, edit func(*corev1.Pod), annot ...string) *corev1.Pod {
	s.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: s.sched, Containers: []corev1.Container{{Name: "train", Image: "trainer",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
	for i := 0; i+1 < len(annot); i += 2 {
		p.Annotations[annot[i]] = annot[i+1]
	}
	if edit != nil {
		edit(p)
	}
	p, err := s.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *scenario) bindTo(ns, name, node string) {
	s.t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := s.cs.CoreV1().Pods(ns).Bind(context.Background(), b, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// where maps the namespace's live bound pods to their nodes.
func (s *scenario) where(ns string) map[string]string {
	out := map[string]string{}
	for name, p := range s.pods(ns) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[name] = p.Spec.NodeName
		}
	}
	return out
}

// stays fails unless every pod of want stays live on its node for d.
func (s *scenario) stays(ns string, want map[string]string, d time.Duration, what string) {
	s.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		got := s.where(ns)
		for name, node := range want {
			if got[name] != node {
				s.t.Fatalf("%s: pod %s was on %s, now on %q (evicted or moved)", what, name, node, got[name])
			}
		}
	}
}

// kubeletLoop plays the kubelet in the background until the test ends:
// bound pods start, and pods being deleted are gone about delay after
// it first sees them terminating (their containers stopping).
func (s *scenario) kubeletLoop(ns string, delay time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := map[string]time.Time{}
		for ctx.Err() == nil {
			l, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					p := &l.Items[i]
					switch {
					case p.DeletionTimestamp != nil:
						if t, ok := seen[string(p.UID)]; !ok {
							seen[string(p.UID)] = time.Now()
						} else if time.Since(t) >= delay {
							zero := int64(0)
							_ = s.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
						}
					case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending:
						p.Status.Phase = corev1.PodRunning
						p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
						_, _ = s.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	s.t.Cleanup(func() { cancel(); wg.Wait() })
}

// nodeRow registers n nodes prefix-0.. of gpus A100 GPUs each.
func (s *scenario) nodeRow(prefix string, n, gpus int) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		s.node(fmt.Sprintf("%s-%d", prefix, i), gpus, "A100")
	}
}

// testNodeChanges (case 1): cordon, NotReady past tide's grace period,
// a NoExecute taint and a deleted node each take the pods on that node
// (tide evicts them as lost workers, or the pod garbage collector deletes
// them) and nothing elsewhere; a NotReady blink takes nothing; nothing
// new goes to a cordoned node.
func testNodeChanges(t *testing.T, e *env) {
	s := e.scenario(t, "tide-nodes", "nodes")
	s.nodeRow("nodes", 4, 8)
	grace := 2 * time.Second
	sch, _ := s.start(kube.Config{Policy: "fifo", NotReadyGrace: grace})
	s.kubeletLoop("nodes", 0)
	for i := 0; i < 16; i++ {
		s.pod("nodes", fmt.Sprintf("p%02d", i), 2)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(s.where("nodes"))
		return n == 16, fmt.Sprintf("%d of 16 pods bound", n)
	})
	// change applies a node change and checks that the pods on that node,
	// and only they, go.
	change := func(what, node string, apply func()) {
		t.Helper()
		before := s.where("nodes")
		others := map[string]string{}
		for name, n := range before {
			if n != node {
				others[name] = n
			}
		}
		t.Log(what)
		apply()
		eventually(t, 30*time.Second, func() (bool, string) {
			w := s.where("nodes")
			var left []string
			for name, n := range w {
				if n == node {
					left = append(left, name)
				}
			}
			return len(left) == 0, fmt.Sprintf("%s: %v still on %s", what, left, node)
		})
		s.stays("nodes", others, 3*time.Second, what)
	}
	change("cordon nodes-1", "nodes-1", func() {
		s.editNode("nodes-1", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	})
	s.pod("nodes", "late", 2)
	time.Sleep(2 * time.Second)
	if n := s.pods("nodes")["late"].Spec.NodeName; n != "" {
		t.Fatalf("late bound to %s while only the cordoned nodes-1 had room", n)
	}
	before := s.where("nodes")
	t.Log("nodes-2 NotReady for 300 ms")
	s.setReady("nodes-2", false)
	time.Sleep(300 * time.Millisecond)
	s.setReady("nodes-2", true)
	s.stays("nodes", before, 2*grace, "after nodes-2 blinked NotReady")
	change("nodes-2 NotReady past the grace period", "nodes-2", func() { s.setReady("nodes-2", false) })
	change("taint nodes-0 NoExecute", "nodes-0", func() {
		s.editNode("nodes-0", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
		})
	})
	change("delete nodes-3", "nodes-3", func() {
		if err := s.cs.CoreV1().Nodes().Delete(context.Background(), "nodes-3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if st := sch.Stats(); st.Evicted != st.Lost || st.BindErrors != 0 {
		t.Errorf("stats %+v, want every eviction a lost worker's and no failed bind", st)
	}
}

// testElasticSettles (case 2): under AFS a 1-32 worker TideJob and an
// 8-worker one on 32 GPUs, evicted pods taking a second to terminate:
// the second job starts, the first is shrunk once for it and never
// restarted.
func testElasticSettles(t *testing.T, e *env) {
	s := e.scenario(t, "tide-afs", "afs")
	s.nodeRow("afs", 4, 8)
	grace := 5 * time.Second
	sch, _ := s.start(kube.Config{Policy: "afs", Grace: &grace})
	s.kubeletLoop("afs", time.Second)
	s.tidejob("afs", "a", 1, 32, 1, func(tj *kube.TideJob) { tj.Spec.Duration = "10h" })
	eventually(t, 30*time.Second, func() (bool, string) {
		n := s.workers("afs", "a")
		return n == 32, fmt.Sprintf("a has %d of 32 workers", n)
	})
	s.tidejob("afs", "b", 8, 8, 1, func(tj *kube.TideJob) { tj.Spec.Duration = "1h" })
	eventually(t, 30*time.Second, func() (bool, string) {
		n := s.workers("afs", "b")
		return n == 8, fmt.Sprintf("b has %d of 8 workers bound; a %d", n, s.workers("afs", "a"))
	})
	time.Sleep(3 * time.Second) // settled: nothing more moves
	a := s.getTideJob("afs", "a").Status
	st := sch.Stats()
	if a.Restarts != 0 || a.Resizes > 2 || st.Evicted > 8 || s.workers("afs", "b") != 8 {
		t.Errorf("a: %d restarts, %d resizes; %d pods evicted; b %d workers: want no restart, at most 2 resizes, 8 evictions (a gives b its GPUs once)",
			a.Restarts, a.Resizes, st.Evicted, s.workers("afs", "b"))
	}
}

// testImpossible (cases 3 and 7): under SRTF a short TideJob asking for
// 16 GPUs per worker on 8-GPU nodes, and a short pod asking for 200 CPUs
// of 64, never preempt the running gang; both are reported unschedulable.
func testImpossible(t *testing.T, e *env) {
	s := e.scenario(t, "tide-impossible", "imp")
	s.nodeRow("imp", 3, 8)
	sch, _ := s.start(kube.Config{Policy: "srtf"})
	for i := 0; i < 3; i++ {
		s.pod("imp", fmt.Sprintf("g-%d", i), 8, kube.AnnotJob, "g", kube.AnnotGangSize, "3", kube.AnnotDuration, "10h")
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		n := len(s.where("imp"))
		return n == 3, fmt.Sprintf("gang: %d of 3 bound", n)
	})
	s.kubelet("imp")
	gang := s.where("imp")
	s.tidejob("imp", "big", 1, 1, 16, func(tj *kube.TideJob) { tj.Spec.Duration = "1m" })
	s.podWith("imp", "hog", 1, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200"),
			corev1.ResourceMemory: resource.MustParse("2Ti")}
	}, kube.AnnotDuration, "1m")
	s.stays("imp", gang, 3*time.Second, "with impossible jobs queued")
	eventually(t, 20*time.Second, func() (bool, string) {
		tj := s.getTideJob("imp", "big")
		c := cond(tj.Status.Conditions, kube.CondAdmitted)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Unschedulable" && strings.Contains(c.Message, "16 GPUs"),
			fmt.Sprintf("big's Admitted condition %+v", c)
	})
	eventually(t, 20*time.Second, func() (bool, string) {
		c := podCond(s.pods("imp")["hog"], corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(c.Message, "Insufficient cpu"), fmt.Sprintf("hog's PodScheduled %+v", c)
	})
	if st := sch.Stats(); st.Evicted != 0 || st.Created != 0 {
		t.Errorf("stats %+v, want nothing evicted or created", st)
	}
}

// testWorkerFailures (case 4): a worker its kubelet rejects is replaced
// after a backoff, the reason shown in the TideJob's conditions; a worker
// that fails on its own fails the TideJob, whose other workers are
// deleted.
func testWorkerFailures(t *testing.T, e *env) {
	s := e.scenario(t, "tide-wfail", "wfail")
	s.node("wfail-0", 4, "A100")
	s.node("wfail-1", 4, "A100")
	s.start(kube.Config{Policy: "fifo"})
	s.tidejob("wfail", "w", 6, 6, 1)
	eventually(t, 20*time.Second, func() (bool, string) {
		n := s.workers("wfail", "w")
		return n == 6, fmt.Sprintf("%d of 6 workers bound", n)
	})
	s.kubelet("wfail")
	p := s.workerPods("wfail", "w")[0]
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "OutOfnvidia.com/gpu"
	p.Status.Message = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 4, capacity: 4"
	if _, err := s.cs.CoreV1().Pods("wfail").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sawReason := false
	eventually(t, 20*time.Second, func() (bool, string) {
		tj := s.getTideJob("wfail", "w")
		if c := cond(tj.Status.Conditions, kube.CondRunning); c != nil && c.Reason == "WorkerRejected" {
			sawReason = true
		}
		n := s.workers("wfail", "w")
		return n == 6 && tj.Status.Phase == kube.PhaseRunning && sawReason,
			fmt.Sprintf("%d of 6 workers bound, phase %s, rejection shown: %v", n, tj.Status.Phase, sawReason)
	})
	s.kubelet("wfail")
	s.end("wfail", corev1.PodFailed, s.workerPods("wfail", "w")[0].Name)
	eventually(t, 20*time.Second, func() (bool, string) {
		tj := s.getTideJob("wfail", "w")
		n := len(s.workerPods("wfail", "w"))
		return tj.Status.Phase == kube.PhaseFailed && n == 0, fmt.Sprintf("phase %s, %d live workers", tj.Status.Phase, n)
	})
}

// testRefusedWorker (case 5): a worker pod the API server refuses is
// retried with backoff, not every round, and the TideJob says why.
func testRefusedWorker(t *testing.T, e *env) {
	s := e.scenario(t, "tide-refused", "refused")
	s.node("refused-0", 4, "A100")
	sch, _ := s.start(kube.Config{Policy: "fifo"})
	s.tidejob("refused", "bad", 1, 1, 1, func(tj *kube.TideJob) { tj.Spec.Template.Spec.Containers[0].Name = "" })
	time.Sleep(6 * time.Second)
	if st := sch.Stats(); st.CreateErrors < 1 || st.CreateErrors > 6 {
		t.Errorf("%d refused creates in 6 s, want 1 to 6 (retries 1, 2, 4 s apart)", st.CreateErrors)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		tj := s.getTideJob("refused", "bad")
		c := cond(tj.Status.Conditions, kube.CondAdmitted)
		return tj.Status.Phase == kube.PhasePending && c != nil && c.Reason == "FailedCreate" && strings.Contains(c.Message, "name"),
			fmt.Sprintf("phase %s, Admitted %+v", tj.Status.Phase, c)
	})
}

// testPartialGangRelease (case 6): tide died after binding 3 of a gang's
// 8 pods; the node's other GPUs are held by another scheduler's pod, so
// the gang can never complete: the new tide releases the 3 at once.
func testPartialGangRelease(t *testing.T, e *env) {
	s := e.scenario(t, "tide-partial", "partial")
	s.node("partial-0", 8, "A100")
	s.podWith("partial", "other", 3, func(p *corev1.Pod) { p.Spec.SchedulerName = "someone-else" })
	s.bindTo("partial", "other", "partial-0")
	for i := 0; i < 8; i++ {
		s.pod("partial", fmt.Sprintf("g-%d", i), 1, kube.AnnotJob, "g", kube.AnnotGangSize, "8")
	}
	for i := 0; i < 3; i++ {
		s.bindTo("partial", fmt.Sprintf("g-%d", i), "partial-0")
	}
	s.start(kube.Config{Policy: "fifo"})
	eventually(t, 10*time.Second, func() (bool, string) {
		got := bound(s.pods("partial"), "g-0", "g-1", "g-2")
		return len(got) == 0, fmt.Sprintf("still bound: %v", got)
	})
}

// testConstraints (case 7): a nodeSelector on the hostname is obeyed; a
// TideJob whose only room is behind a NoExecute taint it does not
// tolerate waits (no worker created for the taint manager to delete),
// without holding back (under FIFO) one behind it that tolerates the
// taint, which runs there and stays.
func testConstraints(t *testing.T, e *env) {
	s := e.scenario(t, "tide-constr", "constr")
	s.nodeRow("constr", 4, 8)
	sch, _ := s.start(kube.Config{Policy: "fifo"})
	pin := func(node string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
	}
	s.podWith("constr", "pinned", 8, pin("constr-3"))
	s.podWith("constr", "f0", 8, pin("constr-0"))
	s.podWith("constr", "f1", 8, pin("constr-1"))
	eventually(t, 20*time.Second, func() (bool, string) {
		w := s.where("constr")
		return w["pinned"] == "constr-3" && w["f0"] == "constr-0" && w["f1"] == "constr-1", fmt.Sprintf("bound %v", w)
	})
	s.kubelet("constr")
	s.editNode("constr-2", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "infer", Effect: corev1.TaintEffectNoExecute})
	})
	// tide's node informer must see the taint before the job arrives (as
	// kube-scheduler's must): a round between the two would place it there
	// rightly. Under load the watch can lag the API server by a second.
	time.Sleep(2 * time.Second)
	s.tidejob("constr", "tj", 1, 1, 8)
	time.Sleep(4 * time.Second)
	if st := sch.Stats(); st.Created != 0 || s.workers("constr", "tj") != 0 {
		t.Fatalf("%d workers created, %d bound, for a job whose only room has an untolerated NoExecute taint", st.Created, s.workers("constr", "tj"))
	}
	// tj heads FIFO's queue but no node can take it now: it must not
	// hold back a job behind it that the tainted node can take.
	s.tidejob("constr", "tol", 1, 1, 8, func(tj *kube.TideJob) {
		tj.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	})
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("constr", "tol") == 1, "tol has no worker"
	})
	s.kubelet("constr")
	time.Sleep(3 * time.Second)
	if st := sch.Stats(); st.Created != 1 || s.workers("constr", "tol") != 1 || s.workers("constr", "tj") != 0 {
		t.Errorf("%d workers created, tol has %d, tj %d: want one for tol, kept, none for tj", st.Created, s.workers("constr", "tol"), s.workers("constr", "tj"))
	}
}

// testFeedback (case 8): Events Scheduled, FailedScheduling and Preempted
// (naming the job that needed the GPUs), PodScheduled=False on a waiting
// pod, and invalid TideJobs marked Invalid with the field.
func testFeedback(t *testing.T, e *env) {
	s := e.scenario(t, "tide-fb", "fb")
	s.node("fb-0", 4, "A100")
	s.node("fb-1", 4, "A100")
	s.start(kube.Config{Policy: "srtf"})
	s.pod("fb", "long-a", 4, kube.AnnotDuration, "10h")
	s.pod("fb", "long-b", 4, kube.AnnotDuration, "10h")
	eventually(t, 20*time.Second, func() (bool, string) {
		n := len(s.where("fb"))
		return n == 2, fmt.Sprintf("%d of 2 bound", n)
	})
	s.kubelet("fb")
	s.pod("fb", "short", 4, kube.AnnotDuration, "1m")
	s.pod("fb", "wait", 4, kube.AnnotDuration, "20h")
	eventually(t, 20*time.Second, func() (bool, string) {
		c := podCond(s.pods("fb")["wait"], corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "nodes are available") && strings.Contains(c.Message, "tide (policy srtf)"),
			fmt.Sprintf("wait's PodScheduled %+v", c)
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		l, err := s.cs.EventsV1().Events("fb").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		var all []string
		for _, ev := range l.Items {
			all = append(all, ev.Reason+" "+ev.Regarding.Name+": "+ev.Note)
			switch {
			case ev.Reason == "Scheduled" && ev.Regarding.Name == "short":
				got["Scheduled"] = true
			case ev.Reason == "FailedScheduling" && ev.Regarding.Name == "wait":
				got["FailedScheduling"] = true
			case ev.Reason == "Preempted" && strings.HasPrefix(ev.Regarding.Name, "long-") && strings.Contains(ev.Note, "fb/short"):
				got["Preempted"] = true
			}
		}
		return len(got) == 3, fmt.Sprintf("events %v, want Scheduled, FailedScheduling and Preempted naming fb/short", all)
	})
	s.tidejob("fb", "inv-workers", 2, 1, 1)
	s.tidejob("fb", "inv-duration", 1, 1, 1, func(tj *kube.TideJob) { tj.Spec.Duration = "3 hours" })
	for name, field := range map[string]string{"inv-workers": "spec.maxWorkers", "inv-duration": "spec.duration"} {
		eventually(t, 20*time.Second, func() (bool, string) {
			tj := s.getTideJob("fb", name)
			c := cond(tj.Status.Conditions, kube.CondValid)
			return tj.Status.Phase == kube.PhaseInvalid && c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, field),
				fmt.Sprintf("%s: phase %q, Valid %+v, want Invalid naming %s", name, tj.Status.Phase, c, field)
		})
	}
	// The same, and a TideJob's admission, as Events on the TideJobs
	// (kubectl describe tidejob).
	s.tidejob("fb", "ok", 1, 1, 4, func(tj *kube.TideJob) { tj.Spec.Duration = "1m" })
	eventually(t, 30*time.Second, func() (bool, string) {
		l, err := s.cs.EventsV1().Events("fb").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		var all []string
		for _, ev := range l.Items {
			if ev.Regarding.Kind != "TideJob" {
				continue
			}
			all = append(all, ev.Type+" "+ev.Reason+" "+ev.Regarding.Name+": "+ev.Note)
			switch {
			case ev.Reason == "InvalidSpec" && ev.Type == corev1.EventTypeWarning && ev.Regarding.Name == "inv-workers" && strings.Contains(ev.Note, "spec.maxWorkers"):
				got["InvalidSpec"] = true
			case ev.Reason == "Admitted" && ev.Regarding.Name == "ok":
				got["Admitted"] = true
			}
		}
		return len(got) == 2, fmt.Sprintf("TideJob events %v, want InvalidSpec on inv-workers and Admitted on ok", all)
	})
}

// testMissingCRD (case 8): without the TideJob CRD, tide stops at once
// with one line saying so. The scheduler is pointed at a group no CRD
// serves, as a cluster without tide's CRD would answer.
func testMissingCRD(t *testing.T, e *env) {
	saved := kube.TideJobResource
	kube.TideJobResource.Group = "absent.tide-sched.io"
	defer func() { kube.TideJobResource = saved }()
	// The API server's own credentials: tide's role would make a request
	// for a group it does not name forbidden before the missing resource
	// is found.
	sch, err := kube.New(kube.Config{Client: e.cs, Dynamic: e.dyn, SchedulerName: "tide-nocrd"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err = sch.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "not installed") || strings.Contains(err.Error(), "\n") || time.Since(start) > 10*time.Second {
		t.Errorf("Run without the CRD: %v after %v, want a one-line error that it is not installed, at once", err, time.Since(start))
	}
}

func cond(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func podCond(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
