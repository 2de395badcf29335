package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAllocatableShrinkKeepsWorkers: a node whose allocatable
// nvidia.com/gpu falls below what tide's running workers there hold (its
// device plugin restarting, GPUs gone unhealthy) keeps them, as the
// kubelet does (it evicts no running pod for it and admits no new one
// short of room), and takes no new worker until it has the GPUs again;
// then the waiting pod is bound there and still nothing is evicted. With
// another GPU node in the cluster, or MIG slices left on the node, tide
// evicted the workers there at once: the engine, rebuilt, had a node of
// fewer GPUs (none: no node) to adopt them on, and a job no other node
// could host was found never schedulable and released. With nothing
// else, the node left tide no GPU to plan with and its workers ran on, so
// the outcome hung on the rest of the cluster.
func TestAllocatableShrinkKeepsWorkers(t *testing.T) {
	type spec struct {
		name  string
		gpus  int    // whole GPUs (0: a part)
		share string // a part's share of a GPU
		mig   string // a part's MIG profile
		gone  bool   // deleted once bound, before n0 shrinks
	}
	whole := func(name string, g int) spec { return spec{name: name, gpus: g} }
	share := func(name, f string) spec { return spec{name: name, share: f} }
	for _, tc := range []struct {
		name  string
		other bool   // a second GPU node, full
		pods  []spec // bound on n0 (8 GPUs, two MIG slices beside) in this order
		left  int    // n0's allocatable GPUs meanwhile
		slice int    // n0's allocatable slices meanwhile
		late  spec   // made while n0 has left GPUs: waits until n0 is back
	}{
		{"whole, none left", true, []spec{whole("w", 4)}, 0, 2, whole("late", 4)},
		{"whole, none left, alone", false, []spec{whole("w", 4)}, 0, 2, whole("late", 4)},
		{"whole, nothing left, alone", false, []spec{whole("w", 4)}, 0, 0, whole("late", 4)},
		{"whole, fewer left than held", true, []spec{whole("w", 4)}, 2, 2, whole("late", 2)},
		{"whole, more left than held", true, []spec{whole("w", 4)}, 6, 2, whole("late", 4)},
		{"share, none left", true, []spec{share("a", "0.5")}, 0, 2, share("late", "0.75")},
		{"share above a freed GPU, none left", true, []spec{{name: "a", share: "0.75", gone: true}, share("b", "0.75")}, 0, 2, whole("late", 1)},
		{"share beside whole, fewer left", true, []spec{whole("w", 2), share("a", "0.5")}, 1, 2, whole("late", 1)},
		{"MIG slice, none left", true, []spec{{name: "s", mig: "1g.10gb"}}, 8, 0, spec{name: "late", mig: "1g.10gb"}},
		{"MIG slice, none left, alone", false, []spec{{name: "s", mig: "1g.10gb"}}, 0, 0, spec{name: "late", mig: "1g.10gb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "fifo")
			n0 := func(gpus, slices int) {
				h.node("n0", gpus, func(n *corev1.Node) {
					n.Labels[LabelGPUMemory] = "81920"
					n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = *resource.NewQuantity(int64(slices), resource.DecimalSI)
				})
			}
			mk := func(s spec) {
				switch {
				case s.mig != "":
					h.migPod(s.name, s.mig)
				case s.gpus == 0:
					h.partPod(s.name, AnnotGPUFraction, s.share)
				default:
					h.pod(s.name, s.gpus)
				}
			}
			n0(8, 2)
			var names []string
			for _, s := range tc.pods {
				mk(s) // one at a time: fifo binds them in this order
				h.round()
				if !s.gone {
					names = append(names, s.name)
				}
			}
			for _, s := range tc.pods {
				if s.gone {
					if err := h.pods.Delete(h.get(s.name)); err != nil {
						t.Fatal(err)
					}
				}
			}
			h.round()
			at := map[string]string{} // pod -> its recorded GPU index
			for _, name := range names {
				p := h.get(name)
				if p.Spec.NodeName != "n0" {
					t.Fatalf("%s on %q, want n0", name, p.Spec.NodeName)
				}
				at[name] = p.Annotations[AnnotGPUIndex]
			}
			if tc.other { // full, so that late has nowhere to go
				h.node("n1", 4)
				h.pod("f", 4, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"} })
				h.round()
				if n := h.get("f").Spec.NodeName; n != "n1" {
					t.Fatalf("f on %q, want n1", n)
				}
			}
			kept := func(what string) {
				t.Helper()
				for i := 0; i < 3; i++ {
					if ev := h.round(); len(ev) > 0 {
						t.Fatalf("%s: round %d evicted %v, want nothing", what, i+1, ev)
					}
				}
				for _, name := range names {
					p := h.get(name)
					if p.Spec.NodeName != "n0" || p.Annotations[AnnotGPUIndex] != at[name] {
						t.Fatalf("%s: %s on %q GPU index %q, want n0 index %q", what, name, p.Spec.NodeName, p.Annotations[AnnotGPUIndex], at[name])
					}
				}
			}

			n0(tc.left, tc.slice)
			mk(tc.late)
			kept("n0 short of GPUs")
			if n := h.get("late").Spec.NodeName; n != "" {
				t.Errorf("late bound to %q while n0 is short of GPUs; want it waiting", n)
			}
			n0(8, 2)
			kept("n0 back")
			if n := h.get("late").Spec.NodeName; n != "n0" {
				t.Errorf("late on %q once n0 is back, want n0", n)
			}
		})
	}
}
