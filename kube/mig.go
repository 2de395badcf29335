package kube

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MIG slices (docs/sharing.md, "tide kube"). A node whose GPUs are split
// into MIG instances offers them as extended resources,
// nvidia.com/mig-<profile> (NVIDIA's device plugin, mixed strategy), and
// the device plugin picks which instance a pod gets. tide treats them as
// ordinary extended resources of their node: to the engine, each profile a
// node offers is a node of its own, "<node>/mig-<profile>" (node names hold
// no "/"), of GPU type "mig-<profile>", with as many GPUs as the node has
// allocatable slices of that profile (less those other schedulers' pods
// hold, on a cloud site); a pod asking for one slice is a worker of one
// such GPU, bound to the real node. Policies count slices as they count
// GPUs, and the feasibility filter (feasible.go) checks the slice against
// the node's allocatable less every bound pod's requests, so neither the
// plan nor a bind exceeds a node's slices.

// migType is the engine's GPU type of a MIG profile's slices.
func migType(profile string) string { return "mig-" + strings.ToLower(profile) }

// migNode is the engine's node of node's slices of a profile.
func migNode(node, profile string) string { return node + "/" + migType(profile) }

// kubeNode is the Kubernetes node of an engine node (itself for a node of
// whole GPUs).
func kubeNode(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// migAlloc is a node's allocatable slices per MIG profile (those with at
// least one), nil when it offers none.
func migAlloc(n *corev1.Node) map[string]int {
	var out map[string]int
	for name, q := range n.Status.Allocatable {
		prof, ok := strings.CutPrefix(string(name), migPrefix)
		if !ok || q.Value() <= 0 {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[strings.ToLower(prof)] = int(q.Value())
	}
	return out
}

// noteMIGNode records node n's slices in v, under their engine nodes.
func (v *view) noteMIGNode(n *corev1.Node) {
	for prof, k := range migAlloc(n) {
		v.alloc[migNode(n.Name, prof)] = k
		if v.migNodes == nil {
			v.migNodes = map[string][]string{}
		}
		v.migNodes[n.Name] = append(v.migNodes[n.Name], migNode(n.Name, prof))
	}
	sort.Strings(v.migNodes[n.Name])
}

// engineNodes are the engine's nodes of Kubernetes node name: itself (its
// whole GPUs), then one per MIG profile it offers.
func (v *view) engineNodes(name string) []string {
	return append([]string{name}, v.migNodes[name]...)
}

// lookMIG counts, per engine node of slices, the slices the live pods
// bound there ask for (phys), and of those not terminating, the ones
// tide's active jobs hold (held, their pods in owned) and the others'
// (foreign), as look counts whole GPUs.
func (s *Scheduler) lookMIG(v *view, pods []*corev1.Pod, owned map[types.UID]string) {
	if len(v.migNodes) == 0 {
		return
	}
	for _, p := range pods {
		node := s.nodeOf(p)
		if node == "" || podTerminal(p) || v.migNodes[node] == nil {
			continue
		}
		for name, q := range podRequests(p) {
			prof, ok := strings.CutPrefix(string(name), migPrefix)
			if !ok || q.Value() <= 0 {
				continue
			}
			en := migNode(node, prof)
			k := int(q.Value())
			v.phys[en] += k
			switch {
			case p.DeletionTimestamp != nil:
			default:
				if _, ok := owned[p.UID]; ok {
					v.held[en] += k
				} else {
					v.foreign[en] += k
				}
			}
		}
	}
}
