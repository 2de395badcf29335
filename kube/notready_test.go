package kube

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestNotReadyKeepsParts: a node NotReady for less than its grace keeps
// every worker tide bound there, those holding part of a GPU (a share, a
// memory size, a MIG slice) as those holding whole GPUs, and takes no new
// one meanwhile; Ready again, it evicts nothing; NotReady past the grace,
// every worker there is lost. Parts were evicted at once: the engine's
// node within the grace had only the whole GPUs tide's pods hold, so a
// part, which holds no whole GPU, had no GPU at its recorded index to be
// adopted on.
func TestNotReadyKeepsParts(t *testing.T) {
	type spec struct {
		name  string
		gpus  int      // whole GPUs (0: a part)
		annot []string // a part's annotations, in pairs
		mig   string   // a part's MIG profile
		gone  bool     // deleted once bound, before n0 goes NotReady
	}
	whole := func(name string, g int) spec { return spec{name: name, gpus: g} }
	share := func(name, f string) spec { return spec{name: name, annot: []string{AnnotGPUFraction, f}} }
	mem := func(name, q string) spec { return spec{name: name, annot: []string{AnnotGPUMemory, q}} }
	for _, tc := range []struct {
		name  string
		other bool   // a second node, Ready, with room for the late pod
		pods  []spec // bound on n0 (4 GPUs, one MIG slice beside) in this order
		late  spec   // made while n0 is NotReady
	}{
		{"whole", false, []spec{whole("w", 2)}, whole("late", 1)},
		{"share alone", false, []spec{share("a", "0.5")}, share("late", "0.5")},
		{"share alone, another node", true, []spec{share("a", "0.5")}, share("late", "0.5")},
		{"memory alone", true, []spec{mem("a", "40Gi")}, mem("late", "40Gi")},
		{"shares on three GPUs", true, []spec{share("a", "0.75"), share("b", "0.75"), share("c", "0.75")}, share("late", "0.75")},
		{"share beside whole", true, []spec{whole("w", 2), share("a", "0.5")}, whole("late", 1)},
		{"whole beside shares", true, []spec{share("a", "0.75"), share("b", "0.75"), whole("w", 1)}, share("late", "0.5")},
		// b's GPU index 1 is kept; GPU 0, freed, is given to nobody.
		{"share above a freed GPU", false, []spec{{name: "a", annot: []string{AnnotGPUFraction, "0.75"}, gone: true}, share("b", "0.75")}, share("late", "0.5")},
		{"share above a freed GPU, another node", true, []spec{{name: "a", annot: []string{AnnotGPUFraction, "0.75"}, gone: true}, share("b", "0.75")}, whole("late", 1)},
		{"MIG slice", true, []spec{{name: "s", mig: "1g.10gb"}}, spec{name: "late", mig: "1g.10gb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "fifo")
			clock := time.Unix(1e9, 0)
			h.s.now = func() time.Time { return clock }
			n0 := func(ready bool) {
				h.node("n0", 4, func(n *corev1.Node) {
					n.Labels[LabelGPUMemory] = "81920"
					n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = resource.MustParse("1")
					if !ready {
						n.Status.Conditions[0].Status = corev1.ConditionFalse
					}
				})
			}
			mk := func(s spec) {
				switch {
				case s.mig != "":
					h.migPod(s.name, s.mig)
				case s.gpus == 0:
					h.partPod(s.name, s.annot...)
				default:
					h.pod(s.name, s.gpus)
				}
			}
			n0(true)
			var names []string
			for _, s := range tc.pods {
				mk(s) // one at a time: fifo binds them in this order
				h.round()
				names = append(names, s.name)
			}
			h.round()
			if got := h.where(); len(got) != len(names) {
				t.Fatalf("bound %v, want %v all on n0", got, names)
			}
			for _, s := range tc.pods {
				if s.gone {
					if err := h.pods.Delete(h.get(s.name)); err != nil {
						t.Fatal(err)
					}
					names = slices.DeleteFunc(names, func(n string) bool { return n == s.name })
				}
			}
			h.round()
			if got := h.where(); len(got) != len(names) {
				t.Fatalf("bound %v, want %v all on n0", got, names)
			}
			at := map[string]string{} // pod -> its recorded GPU index
			for _, name := range names {
				at[name] = h.get(name).Annotations[AnnotGPUIndex]
			}
			if tc.other {
				h.node("n1", 4, func(n *corev1.Node) {
					n.Labels[LabelGPUMemory] = "81920"
					n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = resource.MustParse("1")
				})
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

			n0(false)
			clock = clock.Add(DefaultNotReadyGrace / 2)
			mk(tc.late)
			kept("n0 NotReady for half the grace period")
			if n := h.get("late").Spec.NodeName; n == "n0" || (tc.other && n != "n1") {
				t.Errorf("late pod bound to %q while n0 is NotReady; want n1 when there is one, else nothing", n)
			}

			n0(true)
			clock = clock.Add(DefaultNotReadyGrace)
			kept("n0 Ready again")

			n0(false)
			h.round()
			clock = clock.Add(DefaultNotReadyGrace)
			ev := h.round()
			sort.Strings(ev)
			want := slices.Clone(names)
			sort.Strings(want)
			if n := h.get("late").Spec.NodeName; n == "n0" {
				want = append(want, "late")
				sort.Strings(want)
			}
			if fmt.Sprint(ev) != fmt.Sprint(want) {
				t.Errorf("n0 NotReady past the grace period evicted %v, want %v", ev, want)
			}
		})
	}
}
