package kube

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
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

// noteMIGNode records node n's slices in v, under their engine nodes,
// and those of the profiles in held (slices tide's live workers there
// ask for) with none allocatable: a node whose device plugin restarts
// offers none for a while, and its workers keep their slices (shortOf).
func (v *view) noteMIGNode(n *corev1.Node, held map[string]bool) {
	alloc := migAlloc(n)
	for prof := range held {
		if _, ok := alloc[prof]; !ok {
			if alloc == nil {
				alloc = map[string]int{}
			}
			alloc[prof] = 0
		}
	}
	for prof, k := range alloc {
		v.alloc[migNode(n.Name, prof)] = k
		if v.migNodes == nil {
			v.migNodes = map[string][]string{}
		}
		v.migNodes[n.Name] = append(v.migNodes[n.Name], migNode(n.Name, prof))
	}
	sort.Strings(v.migNodes[n.Name])
}

// migProfiles are the MIG profiles (lower case) p asks a slice of.
func migProfiles(p *corev1.Pod) []string {
	var out []string
	for name, q := range podRequests(p) {
		if prof, ok := strings.CutPrefix(string(name), migPrefix); ok && q.Value() > 0 {
			out = append(out, strings.ToLower(prof))
		}
	}
	return out
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

// isMIGType: t is the engine's type of MIG slices.
func isMIGType(t string) bool { return strings.HasPrefix(t, "mig-") }

// wholeTypes is c's GPU types without those of MIG slices: the types a
// job that names none may take (c.GPUTypes itself when it has no slices).
func wholeTypes(c *cluster.Cluster) []string {
	ts := c.GPUTypes()
	for i, t := range ts {
		if isMIGType(t) {
			out := append([]string(nil), ts[:i]...)
			for _, t := range ts[i+1:] {
				if !isMIGType(t) {
					out = append(out, t)
				}
			}
			return out
		}
	}
	return ts
}

// typeParts keeps the jobs that name no GPU type off the slices, on a
// cluster with MIG slices, whatever type the policy planned them on (a
// policy may give an untyped job any type with room): a whole-GPU job's
// assignment is left untyped, for the placer to choose among the whole
// types (wholeTypes); a part's, which the engine places itself, is given
// the whole-GPU type with the most room left (the fewest shares held) on
// the nodes its pods can run on (hosts: their selector, affinity, taints
// and allocatable; nil: any node), lowest name first among equals. A part
// whose pods no node of a whole type takes is planned without, saying
// so: given the roomiest type whatever its nodes, it was planned where
// it could not run and waited, saying nothing, while a type whose nodes
// take it had room. A typed job's untyped assignment is given its job's
// type.
func typeParts(s *engine.Snapshot, byID map[string]*engine.Status, plan *engine.Plan, hosts func(job, node string) bool) {
	c := s.Cluster
	if len(wholeTypes(c)) == len(c.GPUTypes()) {
		return // no slices: nothing to keep off
	}
	var free []float64
	drop := map[string]bool{}
	for i, a := range plan.Run {
		st := byID[a.Job]
		if st == nil || (a.GPUType != "" && !isMIGType(a.GPUType)) || st.Job.GPUType == a.GPUType {
			continue
		}
		if st.Job.GPUType != "" {
			plan.Run[i].GPUType = st.Job.GPUType
			continue
		}
		if !st.Job.Fractional() {
			plan.Run[i].GPUType = "" // the placer keeps it off the slices (wholeTypes)
			continue
		}
		if free == nil {
			free = nodeRoom(s)
		}
		best := roomiestType(c, free, func(n *cluster.Node) bool { return hosts == nil || hosts(a.Job, n.Name) })
		if best == "" {
			drop[a.Job] = true
			continue
		}
		plan.Run[i].GPUType = best
	}
	if len(drop) == 0 {
		return
	}
	plan.Run = slices.DeleteFunc(slices.Clone(plan.Run), func(a engine.Assignment) bool { return drop[a.Job] })
	if plan.Reasons == nil {
		plan.Reasons = map[string]engine.Reason{}
	}
	for id := range drop {
		plan.Reasons[id] = engine.Reason{Text: "planned on MIG slices, which a part of a GPU never takes, and no node of a whole-GPU type takes its pods now " +
			"(taints, node selector or affinity, the node's allocatable, or the node is not ready or cordoned): planned without it this round"}
	}
	mutualPairs(plan)
}

// nodeRoom is the compute not held on each engine node of s's cluster of
// whole GPUs, in GPUs: a whole job holds all of each of its GPUs, a part
// its share.
func nodeRoom(s *engine.Snapshot) []float64 {
	c := s.Cluster
	free := make([]float64, len(c.Nodes))
	for i := range c.Nodes {
		free[i] = float64(c.Nodes[i].GPUs)
	}
	for _, st := range s.Jobs {
		for _, g := range st.GPUs {
			if n := c.NodeOf(g); !isMIGType(n.GPUType) {
				if st.Share > 0 {
					free[n.ID] -= st.Share
				} else {
					free[n.ID]--
				}
			}
		}
	}
	return free
}

// roomiestType is the whole-GPU type of c with the most room (free, per
// engine node) on its nodes that ok keeps; "" when ok keeps none.
func roomiestType(c *cluster.Cluster, free []float64, ok func(*cluster.Node) bool) string {
	room := map[string]float64{}
	for i := range c.Nodes {
		if n := &c.Nodes[i]; n.GPUs > 0 && !isMIGType(n.GPUType) && ok(n) {
			room[n.GPUType] += free[i]
		}
	}
	best := ""
	for _, t := range wholeTypes(c) {
		if r, in := room[t]; in && (best == "" || r > room[best]) {
			best = t
		}
	}
	return best
}
