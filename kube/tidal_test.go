package kube

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReclaimOrder: on an inference node, another scheduler's pending pod
// gets an idle GPU without evicting anything; when none is idle, tide
// takes the GPUs of the job that is cheapest to reclaim (the policy names
// no cost: the GPU-seconds of its checkpoint, so the 1-GPU job before the
// 2-GPU one), and counts the reclaim.
func TestReclaimOrder(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("i0", 4, func(n *corev1.Node) {
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
	})
	h.pod("big", 2)
	h.pod("small", 1)
	h.round()
	if w := h.where(); w["big"] != "i0" || w["small"] != "i0" {
		t.Fatalf("placed %v, want big and small on i0", w)
	}
	serving := func(name string) {
		h.pod(name, 1, func(p *corev1.Pod) { p.Spec.SchedulerName = "serving" })
	}
	bind := func(name string) { // as the other scheduler does
		p := h.get(name)
		p.Spec.NodeName, p.Status.Phase = "i0", corev1.PodRunning
		_ = h.pods.Update(p)
	}
	serving("inf-0")
	if ev := h.round(); len(ev) != 0 {
		t.Fatalf("evicted %v for inf-0, want nothing: a GPU is idle", ev)
	}
	bind("inf-0")
	h.round()
	serving("inf-1")
	ev := h.round()
	if fmt.Sprint(ev) != "[small]" {
		t.Fatalf("evicted %v for inf-1, want [small]: it loses 1 GPU-second of checkpoint, big 2", ev)
	}
	if st := h.s.Stats(); st.Reclaims != 1 || st.Evicted != 1 {
		t.Errorf("reclaims %d, evicted %d; want 1 and 1", st.Reclaims, st.Evicted)
	}
	if w := h.where(); w["big"] != "i0" {
		t.Errorf("big moved: %v", w)
	}
}

// TestReclaimPodRoom: on an inference node of one pod slot, tide's worker
// holds the slot while 3 of the 4 GPUs are idle. Another scheduler's
// pending pod needs the slot as much as a GPU: tide evicts its worker
// (idle GPUs alone would not let the pod bind) and, while the pod waits,
// places no new worker in the slot it freed.
func TestReclaimPodRoom(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("i0", 4, func(n *corev1.Node) {
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
		n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
	})
	h.pod("train", 1)
	h.round()
	if w := h.where(); w["train"] != "i0" {
		t.Fatalf("placed %v, want train on i0", w)
	}
	h.pod("inf", 1, func(p *corev1.Pod) { p.Spec.SchedulerName = "serving" })
	if ev := h.round(); fmt.Sprint(ev) != "[train]" {
		t.Fatalf("evicted %v for inf, want [train]: it holds i0's only pod slot", ev)
	}
	if d := h.s.tidal.down; d != 2 {
		t.Errorf("%d GPUs down, want 2: inf's and train's", d)
	}
	if err := h.pods.Delete(h.get("train")); err != nil { // the eviction goes through
		t.Fatal(err)
	}
	h.pod("next", 1)
	h.round()
	if w := h.where(); w["next"] != "" {
		t.Fatalf("next bound to %s while inf waits for i0's slot", w["next"])
	}
	p := h.get("inf") // the other scheduler binds it
	p.Spec.NodeName, p.Status.Phase = "i0", corev1.PodRunning
	_ = h.pods.Update(p)
	h.round()
	if st := h.s.Stats(); st.Reclaims != 1 || st.InferenceWaits != 1 {
		t.Errorf("reclaims %d, inference waits %d; want 1 and 1", st.Reclaims, st.InferenceWaits)
	}
}

// TestReservationRechecked: the room tide makes for another scheduler's
// pending pod on a lent node is checked again every round. When the node
// can no longer take the pod (deleted, cordoned, NotReady, tainted, taken
// back by its owner) the room moves to a node that can: tide takes a
// training job's GPUs there. The reservation stayed on the node it named,
// so no other node's GPUs were ever taken for the pod, which waited for
// ever. When the pod is deleted, or bound (here or elsewhere), its room is
// given back at once.
func TestReservationRechecked(t *testing.T) {
	inference := func(n *corev1.Node) {
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
	}
	for _, tc := range []struct {
		name   string
		change func(h *harness)
		moves  bool // the room moves to i1 (else: it goes)
	}{
		{"node deleted", func(h *harness) {
			o, _, _ := h.nodes.GetByKey("i0")
			_ = h.nodes.Delete(o)
		}, true},
		{"node cordoned", func(h *harness) { h.node("i0", 2, inference, func(n *corev1.Node) { n.Spec.Unschedulable = true }) }, true},
		{"node not ready", func(h *harness) {
			h.node("i0", 2, inference, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })
		}, true},
		{"node tainted", func(h *harness) {
			h.node("i0", 2, inference, func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			})
		}, true},
		{"node taken back", func(h *harness) {
			h.node("i0", 2, inference, func(n *corev1.Node) { n.Labels[DefaultTakenBackKey] = "true" })
		}, true},
		{"pod deleted", func(h *harness) { _ = h.pods.Delete(h.get("inf")) }, false},
		{"pod bound elsewhere", func(h *harness) {
			p := h.get("inf")
			p.Spec.NodeName, p.Status.Phase = "c0", corev1.PodRunning
			_ = h.pods.Update(p)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "fifo")
			h.node("c0", 1)            // a cloud node: never lent
			h.node("i1", 2, inference) // full of train
			h.pod("train", 2, annotate(AnnotDuration, "10h"))
			h.round()
			h.node("i0", 2, inference) // idle: the pod's room costs nothing there
			h.pod("inf", 1, func(p *corev1.Pod) {
				p.Spec.SchedulerName = "serving"
				p.Spec.NodeSelector = map[string]string{DefaultSiteLabel: "serve"}
			})
			if ev := h.round(); len(ev) > 0 || h.where()["train"] != "i1" {
				t.Fatalf("evicted %v, bound %v; want train on i1 and nothing evicted: i0's GPUs are idle", ev, h.where())
			}
			if r := h.s.tidal.reserve[h.get("inf").UID]; r == nil || r.node != "i0" {
				t.Fatalf("reservation %+v, want one on i0", r)
			}
			tc.change(h)
			ev := h.round()
			if !tc.moves {
				if len(ev) > 0 || len(h.s.tidal.reserve) > 0 || h.s.tidal.down != 0 {
					t.Errorf("evicted %v, reservations %d, %d GPUs down; want nothing held for the pod", ev, len(h.s.tidal.reserve), h.s.tidal.down)
				}
				return
			}
			r := h.s.tidal.reserve[h.get("inf").UID]
			if r == nil || r.node != "i1" || fmt.Sprint(ev) != "[train]" {
				t.Errorf("reservation %+v, evicted %v; want the pod's room moved to i1, train evicted for it", r, ev)
			}
		})
	}
}

// TestReservationRoomRecounted: the room a reservation counted is counted
// again each round: once the training worker whose CPUs the pod needed is
// gone, the GPU tide took down with it (pinned) comes back, and a job
// that fits the node's GPUs beside the pod's is bound. It stayed down, a
// GPU held for nothing, until the pod was bound.
func TestReservationRoomRecounted(t *testing.T) {
	h := newHarness(t, "fifo")
	cpu := func(k string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(k)}
		}
	}
	h.node("i0", 4, func(n *corev1.Node) {
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8")
	})
	h.pod("train", 1, cpu("8"))
	h.round()
	h.pod("inf", 1, cpu("4"), func(p *corev1.Pod) { p.Spec.SchedulerName = "serving" })
	if ev := h.round(); fmt.Sprint(ev) != "[train]" {
		t.Fatalf("evicted %v for inf, want [train]: it holds i0's CPUs", ev)
	}
	if d := h.s.tidal.down; d != 2 {
		t.Fatalf("%d GPUs down, want 2: inf's and train's", d)
	}
	if err := h.pods.Delete(h.get("train")); err != nil { // the eviction goes through
		t.Fatal(err)
	}
	h.pod("next", 3)
	h.round()
	h.round()
	if d := h.s.tidal.down; d != 1 {
		t.Errorf("%d GPUs down once train is gone, want 1: inf's", d)
	}
	if w := h.where(); w["next"] != "i0" {
		t.Errorf("next (3 GPUs, no CPU) on %q, want i0 beside inf's GPU and CPUs", w["next"])
	}
}

// TestReclaimPodPorts: another scheduler's pending pod asking for a host
// port that tide's worker holds on a lent node gets that port as it gets
// the node's other room: tide evicts the worker (its job's GPU pinned to
// go down), or, where another lent node has the port free, makes the
// pod's room there and evicts nothing. The port was not counted: tide
// made the pod room beside the worker, evicted nothing, and the pod
// waited for as long as the worker ran; and so it did, later, when the
// worker held a MIG slice of the node: only the node's whole GPUs were
// tried for room (kube random search, seed 3661 at 200 steps).
func TestReclaimPodPorts(t *testing.T) {
	port := func(p int32) func(*corev1.Pod) {
		return func(pod *corev1.Pod) {
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: p}}
		}
	}
	inference := func(n *corev1.Node) {
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
	}
	for _, tc := range []struct {
		name      string
		otherNode bool
		slice     bool // train holds a MIG slice of i0, not a whole GPU
		wantNode  string
		wantEvict string
	}{
		{"one node", false, false, "i0", "[train]"},
		{"another node", true, false, "i1", "[]"},
		{"one node, a slice", false, true, "i0", "[train]"},
		{"another node, a slice", true, true, "i1", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "fifo")
			h.node("i0", 2, inference, func(n *corev1.Node) {
				n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = resource.MustParse("1")
			})
			if tc.slice {
				h.migPod("train", "1g.10gb")
				p := h.get("train")
				port(8080)(p)
				annotate(AnnotDuration, "10h")(p)
				if err := h.pods.Update(p); err != nil {
					t.Fatal(err)
				}
			} else {
				h.pod("train", 1, port(8080), annotate(AnnotDuration, "10h"))
			}
			h.round()
			if w := h.where(); w["train"] != "i0" {
				t.Fatalf("placed %v, want train on i0", w)
			}
			if tc.otherNode {
				h.node("i1", 1, inference)
			}
			h.pod("inf", 1, port(8080), func(p *corev1.Pod) { p.Spec.SchedulerName = "serving" })
			ev := h.round()
			r := h.s.tidal.reserve[h.get("inf").UID]
			if r == nil || r.node != tc.wantNode || fmt.Sprint(ev) != tc.wantEvict {
				t.Fatalf("reservation %+v, evicted %v; want the pod's room on %s, evicting %s", r, ev, tc.wantNode, tc.wantEvict)
			}
			for _, name := range ev { // the evictions go through
				_ = h.pods.Delete(h.get(name))
			}
			// While the pod waits, its port stays its own: a worker
			// binding it is not placed beside the reservation.
			h.pod("train2", 1, port(8080))
			h.round()
			if w := h.where(); w["train2"] == tc.wantNode {
				t.Errorf("train2 bound to %s, taking the port the pod waits for there", w["train2"])
			}
		})
	}
}

// TestReclaimPodPairRoom: on a lent node of two GPUs, one held by a
// serving pod and the other by a packed pair of training jobs that take 8 of
// the node's 9 CPUs, the serving pod ends as another (a GPU and 6 CPUs)
// comes: tide takes the GPU freed for it and, for its CPUs, the pair's GPU, whose
// two jobs both go. Only the pair's first job counted as freeing its
// GPU's room, so tide found no room to make, took the free GPU alone, and the pod
// waited for as long as the pair ran.
func TestReclaimPodPairRoom(t *testing.T) {
	cfg := Config{Policy: "gandiva:pack=true:quantum=3600", PairThroughputs: writePairs(t)}
	h := newHarnessWith(t, cfg)
	tjs := h.tideJobs()
	h.node("i0", 2, func(n *corev1.Node) {
		n.Labels["nvidia.com/gpu.product"] = "V100"
		n.Labels[DefaultSiteLabel], n.Labels[DefaultSiteKindLabel] = "serve", "inference"
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("9")
	})
	serving := func(name, cpu string) {
		h.pod(name, 1, func(p *corev1.Pod) {
			p.Spec.SchedulerName = "serving"
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		})
	}
	serving("x", "1")
	x := h.get("x")
	x.Spec.NodeName, x.Status.Phase = "i0", corev1.PodRunning
	_ = h.pods.Update(x)
	h.tideJob(tjs, "a", "A", 1001)
	h.tideJob(tjs, "b", "B", 1002)
	for _, name := range []string{"a", "b"} { // a worker takes 4 CPUs
		o, _, _ := tjs.GetByKey("ns/" + name)
		u := o.(*unstructured.Unstructured).DeepCopy()
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"cpu": "4"}}
		if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		if err := tjs.Update(u); err != nil {
			t.Fatal(err)
		}
	}
	h.round()
	h.round()
	if a, b := h.onGPU("a"), h.onGPU("b"); a == "" || a != b {
		t.Fatalf("a on %q, b on %q; want both on one GPU of i0 (a packed pair)", a, b)
	}
	_ = h.pods.Delete(h.get("x"))
	serving("y", "6")
	var evicted []string
	for i := 0; i < 3; i++ {
		ev := h.round()
		for _, name := range ev { // the evictions go through
			_ = h.pods.Delete(h.get(name))
		}
		evicted = append(evicted, ev...)
	}
	sort.Strings(evicted)
	if len(evicted) != 2 || !strings.HasPrefix(evicted[0], "a-") || !strings.HasPrefix(evicted[1], "b-") {
		t.Errorf("evicted %v, want the workers of a and b: the pod needs the CPUs the pair holds", evicted)
	}
}
