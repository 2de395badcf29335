package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// harness runs a Scheduler's rounds on caches the test fills, with a
// fake client that records binds and evictions: the decisions alone,
// without an API server (kubetest has that).
type harness struct {
	t           *testing.T
	s           *Scheduler
	nodes, pods cache.Indexer
	cs          *fake.Clientset
	mu          sync.Mutex
	binds       map[string]string            // pod -> node, this round
	bindAnnot   map[string]map[string]string // pod -> the annotations its Binding carried, this round
	evicts      []string
	uid         int
}

func newHarness(t *testing.T, policy string) *harness {
	return newHarnessWith(t, Config{Policy: policy})
}

// newHarnessWith is newHarness with more of the scheduler's Config
// (the client and the grace period are the harness's).
func newHarnessWith(t *testing.T, cfg Config) *harness {
	cs := fake.NewClientset()
	h := &harness{t: t, nodes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		h.mu.Lock()
		defer h.mu.Unlock()
		switch c.GetSubresource() {
		case "binding":
			b := c.GetObject().(*corev1.Binding)
			h.binds[b.Name] = b.Target.Name
			h.bindAnnot[b.Name] = b.Annotations
			return true, nil, nil
		case "eviction":
			h.evicts = append(h.evicts, c.GetObject().(metav1.Object).GetName())
			return true, nil, nil
		}
		return false, nil, nil
	})
	zero := time.Duration(0)
	cfg.Client, cfg.Grace = cs, &zero
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.nodes, s.pods = corelisters.NewNodeLister(h.nodes), corelisters.NewPodLister(h.pods)
	h.s, h.cs = s, cs
	return h
}

func (h *harness) node(name string, gpus int, edit ...func(*corev1.Node)) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.Allocatable = corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, e := range edit {
		e(n)
	}
	if err := h.nodes.Update(n); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pod(name string, gpus int, edit ...func(*corev1.Pod)) {
	h.uid++
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(fmt.Sprint(h.uid)),
		CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+h.uid), 0))},
		Spec: corev1.PodSpec{SchedulerName: "tide", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
	for _, e := range edit {
		e(p)
	}
	if err := h.pods.Add(p); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(name string) *corev1.Pod {
	o, ok, _ := h.pods.GetByKey("ns/" + name)
	if !ok {
		h.t.Fatalf("no pod %s", name)
	}
	return o.(*corev1.Pod).DeepCopy()
}

// round runs one round and applies its binds to the cache, as the API
// server and the watch would; it returns the pods evicted.
func (h *harness) round() []string {
	h.t.Helper()
	h.binds, h.bindAnnot, h.evicts = map[string]string{}, map[string]map[string]string{}, nil
	if err := h.s.Round(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	for name, node := range h.binds {
		p := h.get(name)
		p.Spec.NodeName = node
		for k, v := range h.bindAnnot[name] { // as the API server copies them
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
		p.Status.Phase = corev1.PodRunning
		_ = h.pods.Update(p)
	}
	return h.evicts
}

// where maps bound pods to nodes.
func (h *harness) where() map[string]string {
	out := map[string]string{}
	for _, o := range h.pods.List() {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName != "" {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// TestNodeChangesLocal: 16 pods of 2 GPUs fill 4 nodes of 8. Cordoning
// a node, a NoExecute taint, a node NotReady past the grace period
// and deleting a node each evict the pods on that node and nothing else;
// a NotReady blink evicts nothing; GPUs on a cordoned node are not given
// to a waiting pod.
func TestNodeChangesLocal(t *testing.T) {
	h := newHarness(t, "fifo")
	clock := time.Unix(1e9, 0)
	h.s.now = func() time.Time { return clock }
	for i := 0; i < 4; i++ {
		h.node(fmt.Sprintf("n%d", i), 8)
	}
	for i := 0; i < 16; i++ {
		h.pod(fmt.Sprintf("p%02d", i), 2)
	}
	h.round()
	if n := len(h.where()); n != 16 {
		t.Fatalf("%d of 16 bound", n)
	}
	on := func(node string) []string {
		var out []string
		for name, n := range h.where() {
			if n == node {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	gone := func(names []string) { // the evicted pods terminate
		for _, name := range names {
			_ = h.pods.Delete(h.get(name))
		}
	}
	// want runs rounds: the first evicts exactly want, the next nothing.
	want := func(what string, want []string) {
		t.Helper()
		ev := h.round()
		sort.Strings(ev)
		if fmt.Sprint(ev) != fmt.Sprint(want) {
			t.Fatalf("%s evicted %v, want %v", what, ev, want)
		}
		gone(ev)
		for i := 0; i < 2; i++ {
			if ev := h.round(); len(ev) > 0 {
				t.Fatalf("%s: round %d evicted %v, want nothing more", what, i+2, ev)
			}
		}
	}
	cordon := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	noExecute := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	}

	h.node("n1", 8, cordon)
	want("cordoning n1", on("n1"))
	h.pod("late", 2)
	h.round()
	if n := h.get("late").Spec.NodeName; n != "" {
		t.Fatalf("late bound to %s, the cordoned node", n)
	}

	h.node("n2", 8, notReady)
	clock = clock.Add(DefaultNotReadyGrace / 2)
	want("n2 NotReady for half the grace period", nil)
	h.node("n2", 8)
	clock = clock.Add(DefaultNotReadyGrace)
	want("n2 Ready again", nil)
	h.node("n2", 8, notReady)
	h.round()
	clock = clock.Add(DefaultNotReadyGrace)
	want("n2 NotReady past the grace period", on("n2"))

	tolerant := on("n0")[0]
	p := h.get(tolerant)
	p.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
	_ = h.pods.Update(p)
	h.node("n0", 8, noExecute)
	want("a NoExecute taint on n0", slices.DeleteFunc(on("n0"), func(s string) bool { return s == tolerant }))

	on3 := on("n3")
	_ = h.nodes.Delete(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}})
	want("deleting n3", on3)
	if st := h.s.Stats(); st.Lost != 4+4+3+4 || st.Evicted != st.Lost {
		t.Errorf("stats %+v, want 15 workers lost, no other eviction", st)
	}
}

// TestLostWorkerRestartsGang: a gang of two 8-GPU pods on two nodes loses
// one to a cordon: the lost pod is evicted and so is its partner (the gang
// restarts, as a rigid job must); the pods on other nodes stay.
func TestLostWorkerRestartsGang(t *testing.T) {
	h := newHarness(t, "fifo")
	for i := 0; i < 3; i++ {
		h.node(fmt.Sprintf("n%d", i), 8)
	}
	gang := annotate(AnnotJob, "g", AnnotGangSize, "2")
	h.pod("g0", 8, gang)
	h.pod("g1", 8, gang)
	h.pod("solo", 8)
	h.round()
	if n := len(h.where()); n != 3 {
		t.Fatalf("%d of 3 bound", n)
	}
	w := h.where()
	h.node(w["g1"], 8, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	var ev []string
	for i := 0; i < 3; i++ {
		ev = append(ev, h.round()...)
	}
	sort.Strings(ev)
	if fmt.Sprint(ev) != "[g0 g1]" {
		t.Errorf("evicted %v, want the gang's two pods (g1 lost, g0 released), not solo", ev)
	}
}

// TestTerminatingKeepsCapacity: pods being deleted hold their node but
// do not change the engine's cluster: no rebuild while they terminate.
func TestTerminatingKeepsCapacity(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("n0", 8)
	for i := 0; i < 4; i++ {
		h.pod(fmt.Sprintf("p%d", i), 2)
	}
	h.round()
	rebuilds := h.s.Stats().Rebuilds
	p := h.get("p0")
	now := metav1.Now()
	p.DeletionTimestamp = &now
	_ = h.pods.Update(p)
	h.pod("next", 2)
	for i := 0; i < 3; i++ {
		h.round()
	}
	if n := h.get("next").Spec.NodeName; n != "" {
		t.Errorf("next bound to %s while p0 still holds its GPUs", n)
	}
	_ = h.pods.Delete(p)
	h.round()
	if n := h.get("next").Spec.NodeName; n != "n0" {
		t.Errorf("next on %q once p0 is gone, want n0", n)
	}
	if r := h.s.Stats().Rebuilds; r != rebuilds {
		t.Errorf("%d rebuilds while a pod terminated, want none", r-rebuilds)
	}
}

func annotate(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// TestNeverPreemptImpossible: under SRTF, short jobs no node can host
// (200 CPUs, 16 GPUs per worker on 8-GPU nodes, a selector no node
// matches) evict nothing from the running long ones.
func TestNeverPreemptImpossible(t *testing.T) {
	h := newHarness(t, "srtf")
	for i := 0; i < 3; i++ {
		h.node(fmt.Sprintf("n%d", i), 8, func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("64") })
	}
	for i := 0; i < 3; i++ {
		h.pod(fmt.Sprintf("long%d", i), 8, annotate(AnnotDuration, "10h"))
	}
	h.round()
	short := annotate(AnnotDuration, "1m")
	h.pod("cpu", 1, short, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200")}
	})
	h.pod("gpus", 16, short)
	h.pod("selector", 1, short, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n9"} })
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("evicted %v for jobs that can never run", ev)
		}
	}
	for _, name := range []string{"cpu", "gpus", "selector"} {
		if h.s.unsched["pods/ns/"+name] == "" {
			t.Errorf("%s not reported unschedulable", name)
		}
	}
}

// TestPartialGangReleased: a gang bound in part that can never complete
// (another scheduler's pod holds the rest) has its bound pods evicted in
// the first round.
func TestPartialGangReleased(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("n0", 8)
	h.pod("other", 3, func(p *corev1.Pod) { p.Spec.SchedulerName = "someone-else"; p.Spec.NodeName = "n0" })
	for i := 0; i < 8; i++ {
		h.pod(fmt.Sprintf("g%d", i), 1, annotate(AnnotJob, "g", AnnotGangSize, "8"), func(p *corev1.Pod) {
			if p.Name < "g3" {
				p.Spec.NodeName = "n0"
			}
		})
	}
	ev := h.round()
	if len(ev) != 3 {
		t.Errorf("evicted %v, want the 3 bound pods of the gang", ev)
	}
}

// TestPoliciesSeeFeasibility: a waiting job whose only fitting node is
// full (a selector on a busy node) neither idles the GPUs another node
// has free nor makes the policy preempt a job whose GPUs it could not use,
// under FIFO (a blocked head of queue) and under SRTF (preemptive).
func TestPoliciesSeeFeasibility(t *testing.T) {
	pin := func(node string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
	}
	for _, tc := range []struct {
		policy string
		// a runs on n0 (b on n1 when busy); then pinned (to n0, the
		// shortest) and next (unless busy) arrive.
		busy      bool
		wantBound map[string]string
	}{
		{"fifo", false, map[string]string{"a": "n0", "next": "n1"}},
		{"srtf", false, map[string]string{"a": "n0", "next": "n1"}},
		{"srtf", true, map[string]string{"a": "n0", "b": "n1"}},
	} {
		t.Run(fmt.Sprintf("%s/busy=%v", tc.policy, tc.busy), func(t *testing.T) {
			h := newHarness(t, tc.policy)
			h.node("n0", 8)
			h.node("n1", 8)
			h.pod("a", 8, pin("n0"), annotate(AnnotDuration, "2h"))
			if tc.busy {
				h.pod("b", 8, pin("n1"), annotate(AnnotDuration, "20h"))
			}
			h.round()
			h.pod("pinned", 8, pin("n0"), annotate(AnnotDuration, "1m"))
			if !tc.busy {
				h.pod("next", 8, annotate(AnnotDuration, "5h"))
			}
			for i := 0; i < 3; i++ {
				if ev := h.round(); len(ev) > 0 {
					t.Fatalf("round %d evicted %v for a job that cannot use the GPUs freed", i+1, ev)
				}
				if i > 0 {
					continue
				}
				if r := h.s.eng.Job(h.s.ids["pods/ns/pinned"]).Reason().Text; !strings.Contains(r, "no node can take") {
					t.Errorf("pinned's reason %q, want it to say no node can take it now", r)
				}
			}
			if got := h.where(); fmt.Sprint(got) != fmt.Sprint(tc.wantBound) {
				t.Errorf("bound %v, want %v", got, tc.wantBound)
			}
		})
	}
}

// warnPolicy is a policy that falls back every round.
type warnPolicy struct{ engine.Policy }

func (p warnPolicy) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.Policy.Schedule(s)
	plan.Warnings = append(plan.Warnings, engine.Warning{Kind: "fallback", Reason: "solver failed, equal shares used"})
	return plan
}

// selfEventHarness is a harness under fifo wrapped by wrap, whose events
// on tide's own pod go to the recorder returned, on a clock the test moves.
func selfEventHarness(t *testing.T, wrap func(engine.Policy) engine.Policy) (*harness, *events.FakeRecorder, *time.Time) {
	h := newHarness(t, "fifo")
	clock := time.Unix(1e9, 0)
	h.s.now = func() time.Time { return clock }
	rec := events.NewFakeRecorder(100)
	h.s.fb = recordTo(rec)
	h.s.cfg.Self = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "tide-system", Name: "tide-0", UID: "self"}
	wp := h.s.pol.(workerPolicy)
	wp.inner = wrap(wp.inner)
	h.s.pol = wp
	return h, rec, &clock
}

// TestPolicyFallbackEvent: a policy's fallback becomes a Warning event
// PolicyFallback on tide's own pod, once per distinct warning and
// warningGap however many rounds raise it.
func TestPolicyFallbackEvent(t *testing.T) {
	h, rec, clock := selfEventHarness(t, func(p engine.Policy) engine.Policy { return warnPolicy{p} })
	h.node("n0", 8)
	h.pod("a", 2)
	for i := 0; i < 3; i++ {
		h.round()
	}
	*clock = clock.Add(warningGap)
	h.round()
	var got []string
	for len(rec.Events) > 0 {
		if ev := <-rec.Events; strings.Contains(ev, "PolicyFallback") {
			got = append(got, ev)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], "Warning PolicyFallback") || !strings.Contains(got[0], "solver failed") {
		t.Errorf("events %q, want two Warning PolicyFallback events naming the fallback (4 rounds, the last %v later)", got, warningGap)
	}
}

// oversizing is a policy that plans one job (by engine ID) on more GPUs
// than it may have, as a policy's mistake would.
type oversizing struct {
	engine.Policy
	job func() string
}

func (p oversizing) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.Policy.Schedule(s)
	run := append([]engine.Assignment(nil), plan.Run...)
	for i := range run {
		if run[i].Job == p.job() {
			run[i].GPUs = 99
		}
	}
	plan.Run = run
	return plan
}

// TestDroppedAssignmentEvent: a policy's mistake about one job does not
// stop the others: the engine drops that job's assignment, the other pod
// is bound, and tide's own pod gets a Warning PolicyPlanDropped event
// naming the mistake, once per warningGap however many rounds repeat it.
func TestDroppedAssignmentEvent(t *testing.T) {
	var h *harness
	h, rec, _ := selfEventHarness(t, func(p engine.Policy) engine.Policy {
		return oversizing{p, func() string { return h.s.ids["pods/ns/bad"] }}
	})
	h.node("n0", 8)
	h.pod("bad", 2)
	h.pod("a", 2)
	for i := 0; i < 4; i++ {
		h.round()
	}
	bad := h.s.ids["pods/ns/bad"]
	if got := h.where(); got["a"] != "n0" || got["bad"] != "" {
		t.Errorf("bound %v, want a on n0 and bad nowhere", got)
	}
	var got []string
	for len(rec.Events) > 0 {
		if ev := <-rec.Events; strings.Contains(ev, "PolicyPlanDropped") {
			got = append(got, ev)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "Warning PolicyPlanDropped") || !strings.Contains(got[0], "plan gives job "+bad+" ") || !strings.Contains(got[0], "outside its") {
		t.Errorf("events %q, want one Warning PolicyPlanDropped naming the mistake", got)
	}
}

// TestConditionEvents: a TideJob gets an event for each condition whose
// status or reason changes, Warning for problems, none for the quiet
// defaults or an unchanged condition, one for conditions that change
// together with the same reason and message.
func TestConditionEvents(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	f := &feedback{rec: rec, limit: flowcontrol.NewFakeAlwaysRateLimiter()}
	tj := &TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}
	c := func(typ, st, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st), Reason: reason, Message: msg}
	}
	old := []metav1.Condition{c(CondValid, "True", "SpecAccepted", ""), c(CondAdmitted, "False", "Waiting", "")}
	next := []metav1.Condition{c(CondValid, "True", "SpecAccepted", ""), c(CondAdmitted, "False", "Unschedulable", "needs 16 GPUs"),
		c(CondFailed, "False", "NoWorkerFailed", "")}
	f.conditionEvents(tj, old, next)
	f.conditionEvents(tj, next, next)
	f.conditionEvents(tj, next, []metav1.Condition{c(CondAdmitted, "True", "Admitted", "")})
	// Conditions that change together with one reason and message (a
	// decline sets Admitted, Failed and Running) make one event.
	f.conditionEvents(tj, nil, []metav1.Condition{c(CondAdmitted, "False", "Declined", "declined: too late"),
		c(CondFailed, "True", "Declined", "declined: too late"), c(CondRunning, "False", "Declined", "declined: too late; 0 workers")})
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	want := []string{"Warning Unschedulable needs 16 GPUs", "Normal Admitted Admitted is True",
		"Warning Declined declined: too late", "Warning Declined declined: too late; 0 workers"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestConditionEventsAfterWrite: the events of a status change follow
// the write that made it, once. A round that acts on a TideJob older
// than tide's last write (the informer has not caught up) is refused
// with a conflict and says nothing again; the next change is said once.
func TestConditionEventsAfterWrite(t *testing.T) {
	h := newHarness(t, "fifo")
	rec := events.NewFakeRecorder(10)
	h.s.fb = recordTo(rec)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{TideJobResource: "TideJobList"})
	rv, writes := 1, 0
	dyn.PrependReactor("update", "tidejobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		if a.GetSubresource() != "status" || u.GetResourceVersion() != fmt.Sprint(rv) {
			return true, nil, apierrors.NewConflict(TideJobResource.GroupResource(), u.GetName(), fmt.Errorf("stale"))
		}
		rv++
		writes++
		u = u.DeepCopy()
		u.SetResourceVersion(fmt.Sprint(rv))
		return true, u, nil
	})
	h.s.cfg.Dynamic = dyn
	tj := &TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", ResourceVersion: "1"}}
	bound := TideJobStatus{Phase: PhaseRunning, Message: "4 workers of 1 GPUs planned, 4 bound"}
	setCond(&bound, tj, CondRunning, true, "WorkersBound", bound.Message)
	done := bound
	done.Phase, done.Message = PhaseSucceeded, "4 worker(s) succeeded"
	done.Conditions = slices.Clone(bound.Conditions)
	setCond(&done, tj, CondRunning, false, "Succeeded", done.Message)
	put := func(tj *TideJob, next TideJobStatus) {
		calls := newCalls(context.Background(), 2)
		h.s.putStatus(calls, tj, next)
		calls.wait()
	}
	put(tj, bound)
	put(tj, bound) // the same stale TideJob: refused, no second event
	fresh := tj.DeepCopy()
	fresh.ResourceVersion, fresh.Status = "2", bound
	put(fresh, bound) // nothing changed: not written
	put(fresh, done)
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	want := []string{"Normal WorkersBound 4 workers of 1 GPUs planned, 4 bound", "Normal Succeeded 4 worker(s) succeeded"}
	if fmt.Sprint(got) != fmt.Sprint(want) || writes != 2 {
		t.Errorf("events %q after %d writes, want %q after 2", got, writes, want)
	}
}

// TestDeclinedStays: a job the policy declines at admission (ElasticFlow:
// its deadline cannot be met) stays declined, with the policy's reason,
// and is not resubmitted round after round.
func TestDeclinedStays(t *testing.T) {
	h := newHarness(t, "elasticflow")
	h.node("n0", 8)
	deadline := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	h.pod("late", 8, annotate(AnnotDuration, "10h", AnnotDeadline, deadline))
	for i := 0; i < 4; i++ {
		h.round()
	}
	id := h.s.ids["pods/ns/late"]
	st := h.s.eng.Job(id)
	if st == nil || st.State != job.Declined || h.s.gen["pods/ns/late"] != 0 {
		t.Fatalf("late: job %q in state %v after %d resubmissions, want declined once", id, st, h.s.gen["pods/ns/late"])
	}
	if r := h.s.tideReason(h.s.work[id]); !strings.HasPrefix(r, "declined: ") {
		t.Errorf("reason %q, want it declined with the policy's reason", r)
	}
	if n := h.get("late").Spec.NodeName; n != "" {
		t.Errorf("late bound to %s", n)
	}
}

// TestPartialGangCompletedOnItsType: a gang bound on a node that shrank
// under it (one of its two workers no longer fits there) is completed on
// a node of the GPU type it runs on, not on the best fit of another type.
// Completed on an A100 beside its V100s, it held GPUs of two types, which
// the engine refused, and every round failed from then on, for every job
// (random operations, seed 163 under optimus).
func TestPartialGangCompletedOnItsType(t *testing.T) {
	for _, policy := range []string{"fifo", "optimus", "themis"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, policy)
			typ := func(t string) func(*corev1.Node) {
				return func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = t }
			}
			h.node("v", 3, typ("V100")) // was 8 when the gang was bound
			h.node("a", 2, typ("A100"))
			h.node("w", 7, typ("V100"))
			for _, name := range []string{"g0", "g1"} {
				h.pod(name, 2, annotate(AnnotJob, "g", AnnotGangSize, "2"), func(p *corev1.Pod) { p.Spec.NodeName = "v" })
			}
			for i := 0; i < 3; i++ {
				h.round() // fails the test on a round's error
				for _, st := range h.s.eng.Active() {
					types := map[string]bool{}
					for _, g := range st.GPUs {
						types[h.s.eng.Snapshot().Cluster.NodeOf(g).GPUType] = true
					}
					if len(types) > 1 {
						t.Fatalf("round %d: job %s holds GPUs %v of types %v, want one type", i+1, st.Job.ID, st.GPUs, types)
					}
				}
			}
		})
	}
}

// TestGangShortOfAPodReleased: a running gang one of whose pods is deleted,
// or rejected by its node's kubelet, is released (its other pod evicted,
// its GPUs free for the pod waiting) until the pod is made again, when the
// gang runs whole. It ran on short of the pod, holding the missing pod's
// GPUs too, for ever (random operations, seed 109 under drf).
func TestGangShortOfAPodReleased(t *testing.T) {
	for _, how := range []string{"deleted", "rejected"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, "fifo")
			h.node("n0", 4)
			gang := annotate(AnnotJob, "g", AnnotGangSize, "2")
			h.pod("g0", 2, gang)
			h.pod("g1", 2, gang)
			h.round()
			if w := h.where(); w["g0"] == "" || w["g1"] == "" {
				t.Fatalf("bound %v, want the gang", w)
			}
			h.pod("next", 4)
			p := h.get("g1")
			if how == "deleted" {
				_ = h.pods.Delete(p)
			} else {
				p.Status.Phase, p.Status.Reason = corev1.PodFailed, "OutOfnvidia.com/gpu"
				_ = h.pods.Update(p)
			}
			var ev []string
			for i := 0; i < 2; i++ {
				ev = append(ev, h.round()...)
			}
			if fmt.Sprint(ev) != "[g0]" {
				t.Fatalf("evicted %v, want g0, the gang's pod left", ev)
			}
			_ = h.pods.Delete(h.get("g0"))
			h.round()
			if n := h.get("next").Spec.NodeName; n != "n0" {
				t.Fatalf("next on %q once the gang is released, want n0", n)
			}
			_ = h.pods.Delete(h.get("next"))
			h.pod("g0b", 2, gang)
			h.pod("g1b", 2, gang)
			h.round()
			if w := h.where(); w["g0b"] == "" || w["g1b"] == "" {
				t.Errorf("bound %v, want the gang made again bound whole", w)
			}
		})
	}
}

// TestNewGPUTypeUsed: nodes of a GPU type the cluster did not have when
// tide started are given out, under Gavel's policies too, which read the
// types once (gavel.TestGavelClusterTypesChange): the A100 node cordoned
// and a V100 node added, a pod waited there for ever with "allocation 0"
// (random operations, seed 133 under gavel-fifo).
func TestNewGPUTypeUsed(t *testing.T) {
	for _, policy := range []string{"fifo", "gavel-fifo", "fifo-perf"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, policy)
			typ := func(t string) func(*corev1.Node) {
				return func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = t }
			}
			h.node("a", 2, typ("A100"))
			h.pod("first", 1)
			h.round()
			h.node("a", 2, typ("A100"), func(n *corev1.Node) { n.Spec.Unschedulable = true })
			h.node("v", 4, typ("V100"))
			h.pod("second", 1)
			for i := 0; i < 3; i++ {
				h.round()
			}
			if n := h.get("second").Spec.NodeName; n != "v" {
				t.Errorf("second on %q, want v", n)
			}
		})
	}
}

// TestNoUsableNode: with no node left to plan on, the workers lost with
// their nodes are still evicted and a gang short of a pod released.
// Cordoning every node evicted nothing: the round ended as soon as it
// found no GPU to plan with (random operations, seed 1263 under edf: a
// gang of parts on a node NotReady, one pod rejected).
func TestNoUsableNode(t *testing.T) {
	t.Run("cordoned", func(t *testing.T) {
		h := newHarness(t, "fifo")
		h.node("n0", 4)
		h.pod("a", 2)
		h.round()
		h.node("n0", 4, func(n *corev1.Node) { n.Spec.Unschedulable = true })
		if ev := h.round(); fmt.Sprint(ev) != "[a]" {
			t.Errorf("evicted %v, want a, lost with its cordoned node", ev)
		}
	})
	t.Run("short gang", func(t *testing.T) {
		h := newHarness(t, "fifo")
		clock := time.Unix(1e9, 0)
		h.s.now = func() time.Time { return clock }
		h.node("n0", 4)
		gang := annotate(AnnotJob, "g", AnnotGangSize, "2")
		h.pod("g0", 1, gang)
		h.pod("g1", 1, gang)
		h.round()
		// NotReady (within the grace: its workers are kept) and its GPUs
		// gone from allocatable: it takes nothing new (until 30 Nov the
		// engine had no GPU to plan with; now it has g0's, shortOf).
		h.node("n0", 0, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
		p := h.get("g1")
		p.Status.Phase, p.Status.Reason = corev1.PodFailed, "OutOfnvidia.com/gpu"
		_ = h.pods.Update(p)
		if ev := h.round(); fmt.Sprint(ev) != "[g0]" {
			t.Errorf("evicted %v, want g0, its gang short of g1", ev)
		}
	})
}

// TestWorkerDeletedUnseen: a TideJob's worker deleted before tide's pod
// cache listed it (a user, or its TideJob's garbage collection, quick on
// the create; the informer saw it come and go between two rounds) is
// replaced the next round. tide counted it as a worker its cache had yet
// to list for a minute, the job waiting that long with no worker.
func TestWorkerDeletedUnseen(t *testing.T) {
	h := newHarness(t, "fifo")
	idx := h.tideJobs()
	var made []*corev1.Pod
	h.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		if c.GetSubresource() != "" {
			return false, nil, nil
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.uid++
		p := c.GetObject().(*corev1.Pod).DeepCopy()
		p.Name, p.UID = p.GenerateName+fmt.Sprint(h.uid), types.UID(fmt.Sprint(h.uid))
		p.CreationTimestamp = metav1.Now() // the API server's wall clock
		made = append(made, p)             // not in the cache: the informer has not listed it
		return true, p.DeepCopy(), nil
	})
	round := func() {
		h.binds, h.bindAnnot = map[string]string{}, map[string]map[string]string{}
		if err := h.s.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	h.node("n", 4)
	h.tideJob(idx, "train", "", 1000)
	round()
	if len(made) != 1 {
		t.Fatalf("made %d workers, want 1", len(made))
	}
	h.s.podDeleted(made[0]) // created, then deleted, before the cache listed it
	round()
	if len(made) != 2 {
		t.Errorf("made %d workers after the first was deleted unseen, want a second at once", len(made))
	}
}

// TestNoUsableNodeShortTideJob: with no node left to plan on, a rigid
// TideJob short of its minimum (a worker deleted, gone or still
// terminating) has its other worker released, as a plain gang short of a
// pod is, not run on alone. Its node is NotReady within the grace, so the
// worker is not lost; the node gives the engine the GPUs the kept worker
// holds (a whole one, or the one its part is on: TestNotReadyKeepsParts),
// even with none allocatable left (TestAllocatableShrinkKeepsWorkers; until
// 30 Nov it gave no GPU then, and the round had none to plan with). The round passed TideJobs
// over, and the worker ran on alone, a gang bound in part, until a node
// came back (kubetest random search, seed 299 under themis: a TideJob of
// two half GPUs).
func TestNoUsableNodeShortTideJob(t *testing.T) {
	for _, tc := range []struct {
		policy   string
		fraction string // each worker's part of a GPU ("": one GPU)
		left     int    // GPUs the NotReady node has allocatable
		how      string // what becomes of the deleted worker
	}{
		{"fifo", "", 4, "gone"},
		{"fifo", "", 0, "gone"},
		{"fifo", "", 0, "terminating"},
		{"fifo", "0.5", 4, "gone"},
		{"fifo", "0.5", 0, "gone"},
		{"themis", "0.5", 4, "terminating"},
	} {
		t.Run(fmt.Sprintf("%s/fraction=%s/left=%d/%s", tc.policy, tc.fraction, tc.left, tc.how), func(t *testing.T) {
			h := newHarness(t, tc.policy)
			clock := time.Unix(1e9, 0)
			h.s.now = func() time.Time { return clock }
			tjs := h.tideJobs()
			h.node("n0", 4)
			ws := twoBound(t, h, tjs, func(u *unstructured.Unstructured) {
				if tc.fraction == "" {
					return
				}
				if err := unstructured.SetNestedField(u.Object, tc.fraction, "spec", "gpuFraction"); err != nil {
					t.Fatal(err)
				}
			})
			h.node("n0", tc.left, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
			if tc.how == "gone" {
				if err := h.pods.Delete(ws[1]); err != nil {
					t.Fatal(err)
				}
			} else {
				p := ws[1].DeepCopy()
				now := metav1.NewTime(clock)
				p.DeletionTimestamp = &now // no kubelet on a NotReady node to finish it
				if err := h.pods.Update(p); err != nil {
					t.Fatal(err)
				}
			}
			var ev []string
			for i := 0; i < 2; i++ {
				ev = append(ev, h.round()...)
			}
			if fmt.Sprint(ev) != fmt.Sprint([]string{ws[0].Name}) {
				t.Errorf("evicted %v, want %s, its TideJob short of a worker", ev, ws[0].Name)
			}
		})
	}
}
