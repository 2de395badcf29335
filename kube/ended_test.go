package kube

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestEndedTideJobStaysEnded: a TideJob whose worker failed on its own,
// and one whose worker succeeded, stay Failed and Succeeded once their
// ended worker pods are deleted (the terminated-pod garbage collector,
// kubectl delete): tide makes them no new worker. Reading the end from
// the pods alone, it ran both again from scratch (random operations
// search, seed 4 under drf).
func TestEndedTideJobStaysEnded(t *testing.T) {
	h := newHarness(t, "fifo")
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 4)
	h.tideJob(tjs, "f", "", 1001)
	h.tideJob(tjs, "s", "", 1002)
	h.round()
	h.round()
	end := func(name string, phase corev1.PodPhase) {
		ws := h.workersOf(name)
		if len(ws) != 1 || ws[0].Spec.NodeName != "n0" {
			t.Fatalf("TideJob %s has workers %v, want one bound to n0", name, ws)
		}
		p := ws[0].DeepCopy()
		p.Status.Phase = phase
		if err := h.pods.Update(p); err != nil {
			t.Fatal(err)
		}
	}
	end("f", corev1.PodFailed)
	end("s", corev1.PodSucceeded)
	h.round()
	h.round()
	phase := func(name string) string {
		o, ok, err := tjs.GetByKey("ns/" + name)
		if err != nil || !ok {
			t.Fatalf("TideJob %s: %v %v", name, ok, err)
		}
		ph, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "phase")
		return ph
	}
	if f, s := phase("f"), phase("s"); f != PhaseFailed || s != PhaseSucceeded {
		t.Fatalf("phases f %q, s %q; want Failed and Succeeded", f, s)
	}
	for _, o := range h.pods.List() { // the ended pods are deleted
		if p := o.(*corev1.Pod); podTerminal(p) {
			if err := h.pods.Delete(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 3; i++ {
		h.round()
		for _, name := range []string{"f", "s"} {
			if ws := h.workersOf(name); len(ws) > 0 {
				t.Fatalf("round %d: ended TideJob %s has new workers %v", i, name, ws[0].Name)
			}
		}
	}
	if f, s := phase("f"), phase("s"); f != PhaseFailed || s != PhaseSucceeded {
		t.Errorf("after its pods were deleted: phases f %q, s %q; want Failed and Succeeded still", f, s)
	}
}

// statusTo makes the status tide writes to a TideJob land in tjs, the
// harness's cache of TideJobs, as the API server and the informer would.
func statusTo(h *harness, tjs cache.Indexer) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{TideJobResource: "TideJobList"})
	dyn.PrependReactor("update", "tidejobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(u.GetResourceVersion() + "1")
		if err := tjs.Update(u); err != nil {
			return true, nil, err
		}
		return true, u.DeepCopy(), nil
	})
	h.s.cfg.Dynamic = dyn
}

// TestSucceededWorkerDeleted: once a worker of a TideJob of two has
// succeeded the job finishes on the other (no new worker), and still so
// after the succeeded pod is deleted: its status counts it (succeeded).
// Reading successes from the pods alone, tide took the job for one short
// of a worker and made it a new one (random operations search, seed 44
// under tiresias).
func TestSucceededWorkerDeleted(t *testing.T) {
	h := newHarness(t, "fifo")
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 4)
	_, done := twoOneSucceeded(t, h, tjs)
	h.round()
	if err := h.pods.Delete(done); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		h.round()
		if ws := h.workersOf("two"); len(ws) != 1 {
			t.Fatalf("round %d after the succeeded worker was deleted: workers %d, want the one left running alone", i, len(ws))
		}
	}
	last := h.workersOf("two")[0].DeepCopy()
	last.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(last); err != nil {
		t.Fatal(err)
	}
	h.round()
	o, _, _ := tjs.GetByKey("ns/two")
	st := o.(*unstructured.Unstructured).Object["status"].(map[string]any)
	if n, _ := st["succeeded"].(int64); st["phase"] != PhaseSucceeded || n < 1 {
		t.Errorf("status phase %v, succeeded %v; want Succeeded and at least 1", st["phase"], st["succeeded"])
	}
}

// TestFinishingGangKeptOnRebuild: a gang of plain pods one of which
// succeeded while the other runs on is still tide's job after the engine
// is rebuilt (a node added): the running pod's GPUs count against its
// tenant's quota, so another job of the tenant that the quota leaves no
// room for waits, though the new node has room for it. On a rebuild the
// gang was not submitted again (short of a pod): its running pod held
// GPUs no job in the engine did, and the tenant ran 9 GPUs on a quota of
// 6 (random operations search, seed 11 under fifo:backfill=true).
func TestFinishingGangKeptOnRebuild(t *testing.T) {
	h := newHarnessWith(t, Config{Policy: "fifo", Quotas: map[string]int{"ns": 6}})
	h.node("n0", 8)
	for _, name := range []string{"g-0", "g-1"} {
		h.pod(name, 3, annotate(AnnotJob, "g", AnnotGangSize, "2"))
	}
	h.round()
	if w := h.where(); w["g-0"] != "n0" || w["g-1"] != "n0" {
		t.Fatalf("placed %v, want the gang on n0", w)
	}
	done := h.get("g-0")
	done.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(done); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.node("n1", 8) // the engine is rebuilt
	h.pod("other", 6, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"} })
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("round %d evicted %v; want g-1 left to finish", i, ev)
		}
		if n := h.get("other").Spec.NodeName; n != "" {
			t.Fatalf("round %d: other (6 GPUs) bound to %s while g-1 holds 3 of the tenant's quota of 6", i, n)
		}
	}
	finished := h.get("g-1")
	finished.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(finished); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	if n := h.get("other").Spec.NodeName; n != "n1" {
		t.Errorf("other on %q once g ended, want n1", n)
	}
}

// TestFailedGangCountsOnQuota: a gang of plain pods one of which failed
// on its own while the others run on holds their GPUs until they end, and
// its tenant's quota counts them: another job of the tenant that the
// quota leaves no room for waits, and is bound once they end. The gang
// ended at the failure: its running pods held GPUs no job in the engine
// did, and the tenant ran 5 GPUs on a quota of 4 without borrowing
// (random operations search, seeds 75 under gandiva-fair, 142 under
// optimus and 284 under fifo:backfill=true).
func TestFailedGangCountsOnQuota(t *testing.T) {
	h := newHarnessWith(t, Config{Policy: "fifo", Quotas: map[string]int{"ns": 4}})
	h.node("n0", 8)
	for _, name := range []string{"g-0", "g-1", "g-2"} {
		h.pod(name, 1, annotate(AnnotJob, "g", AnnotGangSize, "3"))
	}
	h.round()
	if w := h.where(); w["g-0"] != "n0" || w["g-1"] != "n0" || w["g-2"] != "n0" {
		t.Fatalf("placed %v, want the gang on n0", w)
	}
	failed := h.get("g-0")
	failed.Status.Phase = corev1.PodFailed
	if err := h.pods.Update(failed); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.pod("other", 3)
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("round %d evicted %v; want g-1 and g-2 left to end", i, ev)
		}
		if n := h.get("other").Spec.NodeName; n != "" {
			t.Fatalf("round %d: other (3 GPUs) bound to %s while g-1 and g-2 hold 2 of the tenant's quota of 4", i, n)
		}
	}
	for _, name := range []string{"g-1", "g-2"} {
		p := h.get(name)
		p.Status.Phase = corev1.PodSucceeded
		if err := h.pods.Update(p); err != nil {
			t.Fatal(err)
		}
	}
	h.round()
	h.round()
	if n := h.get("other").Spec.NodeName; n != "n0" {
		t.Errorf("other on %q once g's pods ended, want n0", n)
	}
}

// TestEvictedWorkerSucceeded: a TideJob's worker that succeeds while tide
// evicts it (its node cordoned, so lost) ends its job: tide makes it no
// new worker once a node has room again, and writes it Succeeded. tide
// left the pods it evicted out of their jobs whatever became of them, so
// it never saw the success: the job looked short of its worker, and tide
// made and bound one, running it again (random operations search, seed
// 379 under srtf).
func TestEvictedWorkerSucceeded(t *testing.T) {
	h := newHarness(t, "fifo")
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 4)
	h.tideJob(tjs, "s", "", 1001)
	h.round()
	h.round()
	ws := h.workersOf("s")
	if len(ws) != 1 || ws[0].Spec.NodeName != "n0" {
		t.Fatalf("workers %v, want one bound to n0", ws)
	}
	h.node("n0", 4, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	if ev := h.round(); len(ev) != 1 || ev[0] != ws[0].Name {
		t.Fatalf("evicted %v, want %s, on cordoned n0", ev, ws[0].Name)
	}
	done := h.get(ws[0].Name)
	done.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(done); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.node("n1", 4)
	for i := 0; i < 3; i++ {
		h.round()
		for _, p := range h.workersOf("s") {
			if p.Name != done.Name {
				t.Fatalf("round %d: new worker %s (on %q) after the evicted one succeeded", i, p.Name, p.Spec.NodeName)
			}
		}
	}
	o, _, _ := tjs.GetByKey("ns/s")
	if ph, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "phase"); ph != PhaseSucceeded {
		t.Errorf("status phase %q, want Succeeded", ph)
	}
}

// TestFinishingTideJobKeptOnRebuild: a TideJob one of whose workers
// succeeded while the other runs on stays tide's job after the engine is
// rebuilt, though no node could now take its workers anew (a taint it
// does not tolerate on its node): its running worker's GPU counts
// against its tenant's quota, so another job of the tenant that the quota
// leaves no room for waits. On the rebuild tide asked whether its nodes
// could host its minimum of workers, found them not, and left it out: its
// running worker held a GPU no job in the engine did, and the tenant ran
// over its quota (random operations search, seed 932 under elasticflow).
func TestFinishingTideJobKeptOnRebuild(t *testing.T) {
	h := newHarnessWith(t, Config{Policy: "fifo", Quotas: map[string]int{"ns": 2}})
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 4)
	ws, _ := twoOneSucceeded(t, h, tjs)
	h.round()
	taint := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	}
	h.node("n0", 4, taint) // its worker runs on; no new one could go there
	h.node("n1", 4, taint) // the engine is rebuilt
	h.pod("other", 2, func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	})
	for i := 0; i < 3; i++ {
		h.round()
		if n := h.get("other").Spec.NodeName; n != "" {
			t.Fatalf("round %d: other (2 GPUs) bound to %s while a worker of two holds 1 of the tenant's quota of 2", i, n)
		}
	}
	last := h.get(ws[1].Name)
	last.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(last); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	if n := h.get("other").Spec.NodeName; n == "" {
		t.Error("other still waits once two ended")
	}
}

// twoBound makes TideJob ns/two of two workers (minWorkers 2), edited
// further by edit, and returns its workers once both are bound.
func twoBound(t *testing.T, h *harness, tjs cache.Indexer, edit ...func(*unstructured.Unstructured)) []*corev1.Pod {
	t.Helper()
	h.tideJob(tjs, "two", "", 1001)
	o, _, _ := tjs.GetByKey("ns/two")
	u := o.(*unstructured.Unstructured).DeepCopy()
	if err := unstructured.SetNestedField(u.Object, int64(2), "spec", "minWorkers"); err != nil {
		t.Fatal(err)
	}
	for _, e := range edit {
		e(u)
	}
	if err := tjs.Update(u); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	ws := h.workersOf("two")
	if len(ws) != 2 || ws[0].Spec.NodeName == "" || ws[1].Spec.NodeName == "" {
		t.Fatalf("workers %v, want two bound", ws)
	}
	return ws
}

// twoOneSucceeded is twoBound with the first worker succeeded: it
// returns the workers as bound and the one that succeeded, as the pod
// cache now lists it.
func twoOneSucceeded(t *testing.T, h *harness, tjs cache.Indexer) (ws []*corev1.Pod, done *corev1.Pod) {
	t.Helper()
	ws = twoBound(t, h, tjs)
	done = ws[0].DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	if err := h.pods.Update(done); err != nil {
		t.Fatal(err)
	}
	return ws, done
}

// TestRecreatedGangRunsAgain: a plain gang (pods of one job by tide's
// annotations) whose pod failed ends; its controller (a Job's, a JobSet's)
// then makes new pods of the same gang, after the failure, keeping the
// failed pod (a Job keeps its failed pods for its backoff count): the new
// pods are the gang running again, bound as a gang, whether the gang's
// other pod still runs (a Job replaces the failed pod alone) or ended too
// and was made again. With the failed pod still there the gang stayed
// ended for ever and its new pods waited, saying nothing. A gang running
// again that then loses its new pod (deleted, evicted) is a gang short of
// a pod, whose pod from before is released: read from the pods alone it
// had ended again, and that pod ran on alone, a gang bound in part
// (random operations search, seed 1628 under fifo:backfill=true).
func TestRecreatedGangRunsAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		survivor bool // g0 runs on: the controller replaces g1 alone
		lose     bool // then g1-b is deleted
	}{
		{"replaced", true, false},
		{"all-made-again", false, false},
		{"replacement lost", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "fifo")
			h.node("n0", 4)
			gang := annotate(AnnotJob, "g", AnnotGangSize, "2")
			h.pod("g0", 1, gang)
			h.pod("g1", 1, gang)
			h.round()
			if w := h.where(); w["g0"] != "n0" || w["g1"] != "n0" {
				t.Fatalf("bound %v, want the gang on n0", w)
			}
			fail := func(name string) {
				p := h.get(name)
				p.Status.Phase = corev1.PodFailed
				// As the kubelet writes it: the last pod was made at
				// 1000 + h.uid seconds (harness.pod); it fails a
				// second after.
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(time.Unix(int64(1000+h.uid+1), 0))}}}}
				_ = h.pods.Update(p)
			}
			fail("g1")
			if !tc.survivor {
				fail("g0")
			}
			h.round()
			h.round()
			h.uid++                // a second passes
			h.pod("g1-b", 1, gang) // made after the failure
			if !tc.survivor {
				h.pod("g0-b", 1, gang)
			}
			for i := 0; i < 3; i++ {
				if ev := h.round(); len(ev) > 0 {
					t.Errorf("round %d evicted %v; want the gang's running pod kept", i, ev)
				}
			}
			w := h.where()
			if w["g1-b"] != "n0" || (!tc.survivor && w["g0-b"] != "n0") {
				t.Errorf("bound %v; want the new pods bound on n0 (tide says %q)", w, h.s.unsched["pods/ns/g"])
			}
			if !podTerminal(h.get("g1")) {
				t.Errorf("g1 is live again")
			}
			if !tc.lose {
				return
			}
			_ = h.pods.Delete(h.get("g1-b"))
			var evicted []string
			for i := 0; i < 2; i++ {
				evicted = append(evicted, h.round()...)
			}
			if fmt.Sprint(evicted) != "[g0]" {
				t.Errorf("evicted %v once g1-b is gone, want [g0]: the gang running again is short of a pod", evicted)
			}
		})
	}
}

// TestTideJobEndsWithNoUsableNode: a TideJob whose worker succeeds while
// no node is usable (its only node cordoned, the worker drained) is
// written Succeeded all the same, and stays so once the succeeded pod is
// deleted and the node is back: tide makes it no new worker. A round with
// no usable node wrote no status, so the end was never recorded and the
// job ran again from scratch (random operations search, seed 1526 under
// allox: every node NotReady).
func TestTideJobEndsWithNoUsableNode(t *testing.T) {
	h := newHarness(t, "fifo")
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 1)
	h.tideJob(tjs, "j", "", 1001)
	h.round()
	h.round()
	ws := h.workersOf("j")
	if len(ws) != 1 || ws[0].Spec.NodeName != "n0" {
		t.Fatalf("workers %v, want one bound to n0", ws)
	}
	h.node("n0", 1, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	h.round()
	p := ws[0].DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	_ = h.pods.Update(p)
	h.round()
	phase := func() string {
		o, _, _ := tjs.GetByKey("ns/j")
		ph, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "phase")
		return ph
	}
	if ph := phase(); ph != PhaseSucceeded {
		t.Errorf("phase %q with no usable node once its worker succeeded, want %s", ph, PhaseSucceeded)
	}
	_ = h.pods.Delete(p) // the terminated-pod collector, or a user
	h.node("n0", 1)
	for i := 0; i < 3; i++ {
		h.round()
		if ws := h.workersOf("j"); len(ws) > 0 {
			t.Fatalf("round %d: the TideJob that succeeded has a new worker %s", i, ws[0].Name)
		}
	}
	if ph := phase(); ph != PhaseSucceeded {
		t.Errorf("phase %q, want %s still", ph, PhaseSucceeded)
	}
}

// TestFailedTideJobNoUsableNode: a TideJob one of whose two workers fails
// on its own while no node is usable (its node NotReady within its grace,
// its GPUs gone from allocatable) has its other worker deleted all the
// same. A round
// with no usable node deleted a failed TideJob's workers only once a node
// could take work again, so the worker ran on for a job that had failed.
func TestFailedTideJobNoUsableNode(t *testing.T) {
	h := newHarness(t, "fifo")
	tjs := h.tideJobs()
	statusTo(h, tjs)
	h.node("n0", 4)
	ws := twoBound(t, h, tjs)
	h.node("n0", 0, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
	p := ws[1].DeepCopy()
	p.Status.Phase = corev1.PodFailed
	if err := h.pods.Update(p); err != nil {
		t.Fatal(err)
	}
	h.cs.ClearActions()
	h.round()
	h.round()
	deleted := map[string]bool{}
	for _, a := range h.cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			deleted[d.GetName()] = true
		}
	}
	if !deleted[ws[0].Name] {
		t.Errorf("deleted %v: want %s, the live worker of a TideJob that failed", deleted, ws[0].Name)
	}
}
