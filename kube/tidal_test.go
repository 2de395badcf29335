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
