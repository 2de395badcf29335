package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
