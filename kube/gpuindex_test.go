package kube

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// partPod makes a plain pod asking for part of a GPU by annotations (in
// pairs) and for no whole GPU.
func (h *harness) partPod(name string, annot ...string) {
	h.pod(name, 0, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = nil
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(annot); i += 2 {
			p.Annotations[annot[i]] = annot[i+1]
		}
	})
}

// gpuUse sums, from the pods bound in the cache, the shares and memory
// (GiB) of the parts on each node's GPU indices, and counts the whole
// GPUs pods ask for on each node. A part without an index fails t. The
// shares are worked from the annotations here, not by the code under
// test: memory alone on a GPU of gpuMem GiB takes that fraction.
func (h *harness) gpuUse(gpuMem float64) (shares, mem map[string]float64, whole map[string]int) {
	h.t.Helper()
	shares, mem, whole = map[string]float64{}, map[string]float64{}, map[string]int{}
	for _, o := range h.pods.List() {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName == "" || podTerminal(p) {
			continue
		}
		if g := podGPUs(p); g > 0 {
			whole[p.Spec.NodeName] += int(g)
			continue
		}
		idx, ok := p.Annotations[AnnotGPUIndex]
		if _, err := strconv.Atoi(idx); !ok || err != nil {
			h.t.Fatalf("part %s bound to %s with GPU index %q", p.Name, p.Spec.NodeName, idx)
		}
		key := p.Spec.NodeName + "#" + idx
		sh, _ := strconv.ParseFloat(p.Annotations[AnnotGPUFraction], 64)
		m := 0.0
		if q := p.Annotations[AnnotGPUMemory]; q != "" {
			fmt.Sscanf(q, "%gGi", &m)
		}
		if sh == 0 {
			sh = m / gpuMem
		}
		if m == 0 {
			m = sh * gpuMem
		}
		shares[key] += sh
		mem[key] += m
	}
	return shares, mem, whole
}

// TestPartsBindToGPUIndex: parts of GPUs are packed onto GPU indices of
// a node and bound with their index recorded on the pod (through the
// Binding); no index holds more than its compute or memory; a GPU that
// holds parts is not given to a whole-GPU pod; a restarted scheduler
// rebuilds the parts from the recorded indices, so that the parts it
// binds after the restart still fit, and a part that ends frees exactly
// its own index's room.
func TestPartsBindToGPUIndex(t *testing.T) {
	const gpuMem = 80.0
	h := newHarness(t, "fifo")
	mem := func(n *corev1.Node) { n.Labels[LabelGPUMemory] = "81920" } // MiB, as GPU feature discovery writes it
	h.node("n1", 3, mem)
	check := func(what string) (shares map[string]float64, whole map[string]int) {
		t.Helper()
		shares, used, whole := h.gpuUse(gpuMem)
		for key, s := range shares {
			node, idx := slotNode(key)
			if s > 1+1e-9 || used[key] > gpuMem+1e-9 || idx < 0 || idx >= 3 || node != "n1" {
				t.Fatalf("%s: GPU %s holds parts of share %.3g and %.3g GiB (GPU: 1, %g GiB; node n1 has GPUs 0-2)", what, key, s, used[key], gpuMem)
			}
		}
		if w := whole["n1"]; w+len(shares) > 3 {
			t.Fatalf("%s: n1 holds %d whole GPUs beside %d GPUs with parts; it has 3", what, w, len(shares))
		}
		return shares, whole
	}
	// 0.5 + 0.5 + 0.25 + 40 GiB (0.5) + 0.25 = two GPUs' worth, in that order.
	h.partPod("a", AnnotGPUFraction, "0.5")
	h.partPod("b", AnnotGPUFraction, "0.5")
	h.partPod("c", AnnotGPUFraction, "0.25")
	h.partPod("d", AnnotGPUMemory, "40Gi")
	h.partPod("e", AnnotGPUFraction, "0.25")
	h.round()
	h.round()
	if n := len(h.where()); n != 5 {
		t.Fatalf("%d of 5 parts bound: %v", n, h.where())
	}
	shares, _ := check("five parts")
	if len(shares) != 2 {
		t.Fatalf("five parts worth two GPUs use GPUs %v; want two GPUs (best fit)", shares)
	}
	// The third GPU goes to one whole pod; a second waits.
	h.pod("w1", 1)
	h.round()
	h.pod("w2", 1)
	h.round()
	h.round()
	if got := bound(h, "w1", "w2"); fmt.Sprint(got) != "[w1]" {
		t.Fatalf("whole pods bound: %v; want w1 alone (two of n1's three GPUs hold parts)", got)
	}
	check("whole pods")

	// A new scheduler on the same API state: it knows the parts only
	// from their pods.
	cIdx := h.get("c").Annotations[AnnotGPUIndex]
	old := h.s
	h2 := newHarness(t, "fifo")
	h2.nodes, h2.pods = h.nodes, h.pods
	h2.s.nodes, h2.s.pods = old.nodes, old.pods
	h = h2
	h.partPod("f", AnnotGPUFraction, "0.25")
	for i := 0; i < 2; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("after a restart, round %d evicted %v; want every bound pod adopted where it runs", i+1, ev)
		}
	}
	if got := bound(h, "f", "w2"); len(got) > 0 {
		t.Fatalf("after a restart, %v bound; want none (every GPU full)", got)
	}
	if st := h.s.eng.Job("pods/ns/a"); st == nil || len(st.GPUs) != 1 {
		t.Fatalf("after a restart, part a is %+v; want it adopted on one GPU", st)
	}
	// c ends: f takes its place, on its GPU.
	pc := h.get("c")
	pc.Status.Phase = corev1.PodSucceeded
	_ = h.pods.Update(pc)
	h.round()
	h.round()
	if got := h.get("f"); got.Spec.NodeName != "n1" || got.Annotations[AnnotGPUIndex] != cIdx {
		t.Fatalf("f bound to %q GPU index %q; want n1 GPU %s, which c held", got.Spec.NodeName, got.Annotations[AnnotGPUIndex], cIdx)
	}
	if got := bound(h, "w2"); len(got) > 0 {
		t.Fatalf("w2 bound after the restart; n1 has no whole GPU left")
	}
	check("after the restart")
}

// bound lists which of names are bound, sorted.
func bound(h *harness, names ...string) []string {
	var out []string
	for _, n := range names {
		if h.get(n).Spec.NodeName != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// TestPartSlots: a part's slot is its node and GPU index, a whole
// worker's its node; a pod without a readable index is in no slot a plan
// wants.
func TestPartSlots(t *testing.T) {
	for _, tc := range []struct {
		slot string
		node string
		idx  int
	}{{"n1", "n1", -1}, {partSlot("n1", 3), "n1", 3}, {"n1#?", "n1", -1}, {"n1#-2", "n1", -1}} {
		if n, i := slotNode(tc.slot); n != tc.node || i != tc.idx {
			t.Errorf("slotNode(%q) = %q, %d; want %q, %d", tc.slot, n, i, tc.node, tc.idx)
		}
	}
	s := &Scheduler{}
	for _, tc := range []struct {
		annot string
		want  int
	}{{"2", 2}, {" 0 ", 0}, {"-1", -1}, {"two", -1}} {
		p := &corev1.Pod{}
		p.Annotations = map[string]string{AnnotGPUIndex: tc.annot}
		if got := s.podIndex(p); got != tc.want {
			t.Errorf("index %q read as %d; want %d", tc.annot, got, tc.want)
		}
	}
}

// TestPartEnv: a TideJob worker holding part of GPU 2 selects it and is
// given its share and memory as tide serve gives them; a memory alone
// gives the share it takes of the GPU.
func TestPartEnv(t *testing.T) {
	env := map[string]string{}
	for _, e := range partEnv(part{memGiB: 20}, 2, 80) {
		env[e.Name] = e.Value
	}
	want := map[string]string{"NVIDIA_VISIBLE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "0", "TIDE_GPU_INDEX": "2",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25", "TIDE_GPU_SHARE": "0.25",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20480M", "TIDE_GPU_MEM_GIB": "20"}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Errorf("env %v\nwant %v", env, want)
	}
}

// TestPartRequestsCountedOnce: a part's pod takes its CPUs on its node
// once: a whole-GPU pod that fits beside it (3 + 4 of 8 CPUs) is bound.
func TestPartRequestsCountedOnce(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("n1", 2, func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") })
	cpus := func(k string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(k)}
		}
	}
	h.pod("part", 0, cpus("3"), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = nil
		p.Annotations = map[string]string{AnnotGPUFraction: "0.5"}
	})
	h.round()
	h.round()
	h.pod("whole", 1, cpus("4"))
	h.round()
	h.round()
	if got := h.where(); got["part"] != "n1" || got["whole"] != "n1" {
		t.Fatalf("bound %v; want part and whole on n1 (3 + 4 of its 8 CPUs)", got)
	}
}

// FuzzPartLabels: whatever a pod's GPU index annotation and a node's GPU
// memory label say, the index read is -1 (none) or one that reads back
// the same, and the memory is finite and not negative.
func FuzzPartLabels(f *testing.F) {
	for _, s := range [][2]string{{"0", "81920"}, {" 3 ", "40960.5"}, {"-1", "Inf"}, {"x", "NaN"}, {"99999999999999999999", "-5"}, {"+2", "1e400"}} {
		f.Add(s[0], s[1])
	}
	s := &Scheduler{}
	f.Fuzz(func(t *testing.T, idx, mem string) {
		p := &corev1.Pod{}
		p.Annotations = map[string]string{AnnotGPUIndex: idx}
		i := s.podIndex(p)
		if i < -1 {
			t.Fatalf("index %q read as %d", idx, i)
		}
		if i >= 0 {
			if back, err := strconv.Atoi(strings.TrimSpace(idx)); err != nil || back != i {
				t.Fatalf("index %q read as %d", idx, i)
			}
		}
		n := &corev1.Node{}
		n.Labels = map[string]string{LabelGPUMemory: mem}
		if g := gpuMemOf(n, "a100"); !(g >= 0) || math.IsInf(g, 0) {
			t.Fatalf("GPU memory label %q read as %g GiB", mem, g)
		}
	})
}

// TestTideJobPartHoldsGPUWhileTerminating: a TideJob worker holding part
// of a GPU holds it until its pod is gone, as a plain pod's part does: a
// worker deleted (terminating) beside another job's part on a GPU of
// 0.5 + 0.5 is replaced only once it is gone. tide read a part's share
// from the pod's annotations, which a TideJob's worker did not carry (its
// share is in its TideJob), so a worker no longer its job's counted for
// nothing, and its replacement was bound beside it: 1.5 of a GPU (random
// operations search, seed 516 under gandiva-fair). A worker tide makes
// carries its part as a plain pod does.
func TestTideJobPartHoldsGPUWhileTerminating(t *testing.T) {
	h := newHarness(t, "fifo")
	idx := h.tideJobs()
	h.node("n1", 1, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "A100" }) // a type of known memory: policies pack parts there
	tj := &TideJob{TypeMeta: metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: "TideJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tj", UID: "tj-tj", CreationTimestamp: metav1.NewTime(time.Unix(900, 0))},
		Spec: TideJobSpec{GPUFraction: "0.5", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "tide",
			Containers: []corev1.Container{{Name: "train"}}}}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(&unstructured.Unstructured{Object: obj}); err != nil {
		t.Fatal(err)
	}
	h.partPod("plain", AnnotGPUFraction, "0.5")
	for i := 0; i < 3; i++ {
		h.round()
	}
	ws := h.workersOf("tj")
	if len(ws) != 1 || ws[0].Spec.NodeName != "n1" || h.get("plain").Spec.NodeName != "n1" {
		t.Fatalf("workers %d, where %v; want tj's worker and plain on n1", len(ws), h.where())
	}
	if got := ws[0].Annotations[AnnotGPUFraction]; got != "0.5" {
		t.Errorf("worker annotated %s=%q; want 0.5, its TideJob's gpuFraction", AnnotGPUFraction, got)
	}
	old := ws[0].DeepCopy()
	now := metav1.NewTime(time.Unix(2000, 0))
	old.DeletionTimestamp = &now
	if err := h.pods.Update(old); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		h.round()
		for _, p := range h.workersOf("tj") {
			if p.Name != old.Name && p.Spec.NodeName != "" {
				t.Fatalf("round %d: worker %s bound to %s#%s beside plain and the terminating %s: 1.5 of the GPU", i, p.Name, p.Spec.NodeName, p.Annotations[AnnotGPUIndex], old.Name)
			}
		}
	}
	if err := h.pods.Delete(old); err != nil {
		t.Fatal(err)
	}
	h.round()
	h.round()
	bound := 0
	for _, p := range h.workersOf("tj") {
		if p.Spec.NodeName == "n1" {
			bound++
		}
	}
	if bound != 1 {
		t.Errorf("%d workers of tj on n1 once the terminating one is gone; want 1", bound)
	}
}
