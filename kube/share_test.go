package kube

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodPart reads a plain pod's part of a GPU from its annotations or
// its MIG resource, and refuses bad values naming the annotation or
// resource; such pods are workloads of one GPU (or slice) per pod that
// ask the device plugin for no GPU.
func TestPodPart(t *testing.T) {
	mig := func(name string, profile string, n int64) *corev1.Pod {
		p := pod(name, 0)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(migPrefix + profile): *resource.NewQuantity(n, resource.DecimalSI)}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want part
		err  string
	}{
		{pod("whole", 1), part{}, ""},
		{pod("quarter", 0, AnnotGPUFraction, "0.25"), part{share: 0.25}, ""},
		{pod("pct", 0, AnnotGPUFraction, "50%", AnnotGPUMemory, "8Gi"), part{share: 0.5, memGiB: 8}, ""},
		{pod("mem", 0, AnnotGPUMemory, "512Mi"), part{memGiB: 0.5}, ""},
		{mig("mig", "1g.10gb", 1), part{mig: "1g.10gb"}, ""},
		{pod("one", 0, AnnotGPUFraction, "1"), part{}, "annotation " + AnnotGPUFraction + ": GPU share"},
		{pod("mem-bad", 0, AnnotGPUMemory, "lots"), part{}, "annotation " + AnnotGPUMemory + ": want a positive quantity"},
		{pod("mem-zero", 0, AnnotGPUMemory, "0"), part{}, "want a positive quantity"},
		{pod("both", 1, AnnotGPUFraction, "0.5"), part{}, "asks for no whole GPU; got 1"},
		{mig("mig-bad", "9g.1gb", 1), part{}, "resources[nvidia.com/mig-9g.1gb]: MIG profile"},
		{mig("mig-two", "1g.10gb", 2), part{}, "want one MIG slice, got 2"},
	} {
		got, err := podPart(tc.pod, podGPUs(tc.pod))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want an error with %q", tc.pod.Name, got, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(got.share-tc.want.share) > 1e-12 || got.memGiB != tc.want.memGiB || got.mig != tc.want.mig {
			t.Errorf("%s: %+v, %v; want %+v", tc.pod.Name, got, err, tc.want)
		}
	}
	ws, probs := grouping{}.group([]*corev1.Pod{pod("quarter", 0, AnnotGPUFraction, "0.25"), mig("mig", "2g.20gb", 1), pod("whole", 2),
		pod("gang-a", 0, AnnotJob, "g", AnnotGangSize, "2", AnnotGPUFraction, "0.5"), pod("gang-b", 0, AnnotJob, "g", AnnotGangSize, "2", AnnotGPUFraction, "0.25")}, nil)
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), "pod ns/gang-b: job g: a share of 0.25 of a GPU per pod, but its first pod asks for a share of 0.5") {
		t.Errorf("grouping: problems %v; want gang-b refused for asking another part than gang-a", probs)
	}
	for key, want := range map[string][2]int{"pods/ns/quarter": {1, 0}, "pods/ns/mig": {1, 0}, "pods/ns/whole": {2, 2}, "pods/ns/g": {1, 0}} {
		w := ws[key]
		if w == nil || w.per != want[0] || w.podGPUs() != want[1] {
			t.Errorf("grouping: %s = %+v; want %d GPU per worker, %d from the device plugin", key, w, want[0], want[1])
		}
	}
	if j := ws["pods/ns/quarter"].job("q"); j.Share != 0.25 || j.GPUs != 1 || !j.Fractional() {
		t.Errorf("quarter's job: %+v; want one GPU at a share of 0.25", j)
	}
	if j := ws["pods/ns/mig"].job("m"); j.GPUType != "mig-2g.20gb" || j.GPUs != 1 || j.Fractional() {
		t.Errorf("mig's job: %+v; want one whole GPU of type mig-2g.20gb (a slice, counted as an extended resource)", j)
	}
}

// TestTideJobPart reads a TideJob's part of a GPU per worker.
func TestTideJobPart(t *testing.T) {
	for _, tc := range []struct {
		spec TideJobSpec
		want part
		err  string
	}{
		{TideJobSpec{GPUFraction: "0.1"}, part{share: 0.1}, ""},
		{TideJobSpec{GPUMemory: "4Gi", GPUsPerWorker: 1}, part{memGiB: 4}, ""},
		{TideJobSpec{GPUFraction: "x"}, part{}, "spec.gpuFraction: GPU share"},
		{TideJobSpec{GPUMemory: "-1Gi"}, part{}, "spec.gpuMemory: want a positive quantity"},
		{TideJobSpec{GPUFraction: "0.5", GPUsPerWorker: 2}, part{}, "spec.gpusPerWorker: a worker with part of a GPU"},
		{TideJobSpec{GPUFraction: "0.5", MinWorkers: 2, MaxWorkers: 4}, part{}, "spec.maxWorkers: a TideJob whose workers hold part of a GPU is rigid: want 2"},
		{TideJobSpec{GPUFraction: "0.5", MinWorkers: 2, MaxWorkers: 2}, part{share: 0.5}, ""},
	} {
		got, err := tideJobPart(&tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: %v; want an error with %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

// FuzzParsePart: any annotation values either parse to a part inside its
// bounds (share in (0, 1), memory > 0) or give an error naming the field.
func FuzzParsePart(f *testing.F) {
	for _, s := range [][2]string{{"0.25", ""}, {"25%", "8Gi"}, {"", "512Mi"}, {"1", "0"}, {"0x1p-2", "1e3"}, {"NaN", "-1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, share, mem string) {
		p, err := parsePart(share, mem, "S", "M")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "S: ") && !strings.HasPrefix(err.Error(), "M: ") {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		if share != "" && !(p.share > 0 && p.share < 1) || mem != "" && !(p.memGiB > 0) || math.IsInf(p.memGiB, 0) {
			t.Fatalf("parsePart(%q, %q) = %+v", share, mem, p)
		}
	})
}

// TestElasticPolicyRefusesParts: under an elastic policy (ElasticFlow,
// EdgeFlow, Pollux, ... run jobs on whole GPUs) a pod asking for part of
// a GPU is unschedulable, saying why, and the other pods are bound. The
// policy gave the part an exact node shape, which the engine refuses, so
// every round failed and no pod was bound at all (random operations,
// seeds 8, 9 and 18).
func TestElasticPolicyRefusesParts(t *testing.T) {
	for _, policy := range []string{"elasticflow", "edgeflow", "pollux"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, policy)
			h.node("n0", 4)
			h.pod("part", 0, annotate(AnnotGPUFraction, "0.5"))
			h.pod("whole", 2)
			h.round()
			h.round()
			if got := h.where(); got["whole"] != "n0" || got["part"] != "" {
				t.Errorf("bound %v, want whole on n0 and part nowhere", got)
			}
			if why := h.s.unsched["pods/ns/part"]; !strings.Contains(why, "policy "+policy+" is elastic") {
				t.Errorf("part unschedulable because %q, want the policy named as elastic", why)
			}
		})
	}
}

// TestPartsFitTheirNodes: the engine places parts only on nodes that take
// their pods (selector, CPU), as whole workers: a half-GPU pod selecting
// pool p2 is bound on p2's node, and of two halves of 10 CPUs each the
// second goes to the node with CPUs left, in the same round. Placed by GPU
// room alone, they were planned on the other node and waited there for
// ever, saying nothing, their GPUs held (random operations, seed 3 under
// edf).
func TestPartsFitTheirNodes(t *testing.T) {
	for _, policy := range []string{"fifo", "srtf", "themis", "gandiva"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, policy)
			node := func(pool, cpu string) func(*corev1.Node) {
				return func(n *corev1.Node) {
					n.Labels["pool"] = pool
					n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
				}
			}
			h.node("a", 2, node("p1", "64"))
			h.node("b", 2, node("p2", "16"))
			half := annotate(AnnotGPUFraction, "0.5")
			h.pod("pinned", 0, half, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "p2"} })
			cpu := func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}
			}
			h.pod("cpu1", 0, half, cpu)
			h.pod("cpu2", 0, half, cpu)
			h.round()
			got := h.where()
			if got["pinned"] != "b" || got["cpu1"] == "" || got["cpu2"] == "" || (got["cpu1"] == "b" && got["cpu2"] == "b") {
				t.Errorf("bound %v in one round, want pinned on b and the two 10-CPU halves bound, not both on b (16 CPUs)", got)
			}
		})
	}
}

// TestPartWaitsForTheGPUsParts: a part is bound to a GPU index only when
// the parts still live there leave it room: a preempted part terminating
// for its grace period, a released gang's part until it is gone. The
// engine frees a part's GPU when its job stops, and the new part was bound
// beside the old one at once: under SRTF a short three-quarter part beside
// the long one it preempted, 1.5 GPUs on one for the grace period (30 s
// by default), and two halves beside a released gang's three-quarters
// (random operations, seed 377 under chronus).
func TestPartWaitsForTheGPUsParts(t *testing.T) {
	// overfull fails the test when a GPU index holds parts of more than one GPU.
	overfull := func(t *testing.T, h *harness, round int) {
		t.Helper()
		use := map[string]float64{}
		for _, o := range h.pods.List() {
			p := o.(*corev1.Pod)
			if p.Spec.NodeName == "" || podTerminal(p) {
				continue
			}
			pt, err := podPart(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			use[p.Spec.NodeName+"#"+p.Annotations[AnnotGPUIndex]] += pt.share
		}
		for slot, u := range use {
			if u > 1+1e-9 {
				t.Fatalf("round %d: GPU %s holds parts of %g GPUs", round, slot, u)
			}
		}
	}
	t.Run("preempted", func(t *testing.T) {
		h := newHarness(t, "srtf")
		h.node("n0", 1)
		h.pod("long", 0, annotate(AnnotGPUFraction, "0.75", AnnotDuration, "10h"))
		h.round()
		h.pod("short", 0, annotate(AnnotGPUFraction, "0.75", AnnotDuration, "1m"))
		for i := 0; i < 3; i++ {
			for _, name := range h.round() { // the evicted pod terminates
				p := h.get(name)
				now := metav1.Now()
				p.DeletionTimestamp = &now
				_ = h.pods.Update(p)
			}
			overfull(t, h, i+1)
		}
		_ = h.pods.Delete(h.get("long"))
		h.round()
		if n := h.get("short").Spec.NodeName; n != "n0" {
			t.Errorf("short on %q once long is gone, want n0", n)
		}
	})
	t.Run("released", func(t *testing.T) {
		h := newHarness(t, "fifo")
		h.node("n0", 2)
		gang := annotate(AnnotJob, "g", AnnotGangSize, "2", AnnotGPUFraction, "0.75")
		h.pod("g0", 0, gang)
		h.pod("g1", 0, gang)
		h.round()
		if w := h.where(); w["g0"] == "" || w["g1"] == "" {
			t.Fatalf("bound %v, want the gang", w)
		}
		p := h.get("g1")
		p.Status.Phase, p.Status.Reason = corev1.PodFailed, "OutOfnvidia.com/gpu"
		_ = h.pods.Update(p)
		h.pod("half", 0, annotate(AnnotGPUFraction, "0.5"))
		h.pod("half2", 0, annotate(AnnotGPUFraction, "0.5"))
		for i := 0; i < 3; i++ {
			h.round() // g0 is evicted, and stays until deleted
			overfull(t, h, i+1)
		}
		_ = h.pods.Delete(h.get("g0"))
		h.round()
		if w := h.where(); w["half"] == "" || w["half2"] == "" {
			t.Errorf("bound %v, want both halves once g0 is gone", w)
		}
	})
}

// TestPartsOnUnknownMemory: on GPUs whose memory tide does not know (no
// nvidia.com/gpu.memory label, a type of no known memory: every node the
// GPU type label leaves unnamed is of type "gpu") a part that asks for a
// share alone is placed by its share, so a greedy policy counts it by its
// share too: four quarters of a GPU run at once on a node of one GPU, in
// one round, on one index. Counted as a whole GPU each, one ran and three
// waited with the GPU three quarters idle. A part asking for memory can
// never fit a GPU of unknown memory and is said so.
func TestPartsOnUnknownMemory(t *testing.T) {
	for _, policy := range []string{"fifo", "srtf", "tiresias", "themis", "drf", "gandiva"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, policy)
			h.node("n0", 1)
			for i := 0; i < 4; i++ {
				h.partPod(fmt.Sprintf("q%d", i), AnnotGPUFraction, "0.25")
			}
			h.partPod("mem", AnnotGPUMemory, "4Gi")
			h.round()
			h.round()
			got := h.where()
			for i := 0; i < 4; i++ {
				if name := fmt.Sprintf("q%d", i); got[name] != "n0" {
					t.Errorf("%s on %q, want n0 (bound %v)", name, got[name], got)
				}
			}
			shares, _, _ := h.gpuUse(1)
			for slot, sh := range shares {
				if sh > 1+1e-9 {
					t.Errorf("GPU %s holds parts of %g GPUs", slot, sh)
				}
			}
			if got["mem"] != "" {
				t.Errorf("mem bound on %s, whose GPU memory is unknown", got["mem"])
			}
			if why := h.s.unsched["pods/ns/mem"]; why == "" {
				t.Errorf("mem waits saying nothing")
			} else {
				t.Logf("mem: %s", why)
			}
		})
	}
}
