package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// harness runs a Scheduler's rounds on caches the test fills, with a
// fake client that records binds and evictions: the decisions alone,
// without an API server (kubetest has that).
type harness struct {
	t           *testing.T
	s           *Scheduler
	nodes, pods cache.Indexer
	mu          sync.Mutex
	binds       map[string]string // pod -> node, this round
	evicts      []string
	uid         int
}

func newHarness(t *testing.T, policy string) *harness {
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
			return true, nil, nil
		case "eviction":
			h.evicts = append(h.evicts, c.GetObject().(metav1.Object).GetName())
			return true, nil, nil
		}
		return false, nil, nil
	})
	zero := time.Duration(0)
	s, err := New(Config{Client: cs, Policy: policy, Grace: &zero})
	if err != nil {
		t.Fatal(err)
	}
	s.nodes, s.pods = corelisters.NewNodeLister(h.nodes), corelisters.NewPodLister(h.pods)
	h.s = s
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
	h.binds, h.evicts = map[string]string{}, nil
	if err := h.s.Round(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	for name, node := range h.binds {
		p := h.get(name)
		p.Spec.NodeName = node
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

// TestNodeChangesLocal: 16 pods of 2 GPUs fill 4 nodes of 8; cordoning a
// node, making one NotReady and deleting one evict nothing, and GPUs
// freed on the cordoned node are not given to a waiting pod.
func TestNodeChangesLocal(t *testing.T) {
	h := newHarness(t, "fifo")
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
	cordon := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	h.node("n1", 8, cordon)
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("cordoning n1 evicted %v", ev)
		}
	}
	h.pod("late", 2)
	var on1 string
	for name, node := range h.where() {
		if node == "n1" {
			on1 = name
		}
	}
	p := h.get(on1)
	p.Status.Phase = corev1.PodSucceeded
	_ = h.pods.Update(p)
	h.round()
	if n := h.get("late").Spec.NodeName; n != "" {
		t.Fatalf("late bound to %s, the cordoned node", n)
	}
	h.node("n2", 8, notReady)
	if ev := h.round(); len(ev) > 0 {
		t.Fatalf("n2 NotReady evicted %v", ev)
	}
	h.node("n2", 8)
	if ev := h.round(); len(ev) > 0 {
		t.Fatalf("n2 Ready again evicted %v", ev)
	}
	_ = h.nodes.Delete(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}})
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("deleting n3 evicted %v", ev)
		}
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
