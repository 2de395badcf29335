package kube

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	schedhelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Feasibility as kube-scheduler's filters decide it, for the pods tide
// places: a node takes a worker when it is Ready and not cordoned, the pod
// tolerates its NoSchedule and NoExecute taints, matches its nodeSelector
// and required node affinity, its host ports are free there, and its
// requests (every resource but the GPUs, which are the engine's) fit in
// the node's allocatable less the requests of every pod bound to it,
// whoever scheduled them. Taints, affinity and requests are computed by
// k8s.io/component-helpers, as kube-scheduler computes them.

// nodeState is one node's room beyond its GPUs.
type nodeState struct {
	node  *corev1.Node
	open  bool                // Ready, not cordoned and not short: takes new pods
	short bool                // fewer GPUs or slices allocatable than its running pods hold (look)
	lost  bool                // unusable: the workers on it are lost (nodes.go)
	alloc corev1.ResourceList // allocatable
	used  corev1.ResourceList // requests of every live pod bound here, terminating ones included
	pods  int                 // live pods bound here
	ports []hostPort          // host ports those pods use
	// mine is what the live pods of tide's jobs take here, by workload
	// key: the placer counts those pods through the workers it keeps.
	mine map[string]*usage
	// leaving is what the terminating pods bound here take: room that
	// comes back once they are gone.
	leaving usage
}

// usage is requests, a pod count and the host ports those pods bind.
type usage struct {
	req   corev1.ResourceList
	pods  int
	ports []hostPort
}

// hostPort is a port a pod binds on its node.
type hostPort struct {
	ip       string
	proto    corev1.Protocol
	port     int32
	wildcard bool
}

func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.proto == b.proto && (a.wildcard || b.wildcard || a.ip == b.ip)
}

// portsFree: none of sh's host ports conflicts with ports.
func (sh *shape) portsFree(ports []hostPort) bool {
	for _, p := range sh.ports {
		for _, q := range ports {
			if p.conflicts(q) {
				return false
			}
		}
	}
	return true
}

// portsLess is ports without those of less, each taken out once for
// each time it appears there (two pods may bind one port on distinct
// addresses).
func portsLess(ports, less []hostPort) []hostPort {
	if len(less) == 0 {
		return ports
	}
	out := append([]hostPort(nil), ports...)
	for _, q := range less {
		if i := slices.Index(out, q); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

func podPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			for _, cp := range cs[i].Ports {
				if cp.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: cp.HostIP, proto: cp.Protocol, port: cp.HostPort}
				if hp.proto == "" {
					hp.proto = corev1.ProtocolTCP
				}
				hp.wildcard = hp.ip == "" || hp.ip == "0.0.0.0" || hp.ip == "::"
				out = append(out, hp)
			}
		}
	}
	return out
}

// podRequests is what a pod asks of its node, GPUs included (pod-level
// resources, init and sidecar containers and overhead as kube-scheduler
// counts them).
func podRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// shape is what one worker of a job asks of a node.
type shape struct {
	gpus  int
	req   corev1.ResourceList // requests without the GPUs
	pod   *corev1.Pod         // the worker, for taints and affinity
	aff   nodeaffinity.RequiredNodeAffinity
	ports []hostPort
	typ   string // GPU type the job asks for, "" for any
	// unit is what one worker takes of the GPUs when it is not gpus
	// whole ones ("part of a GPU", "a 3g.40gb MIG slice"); "" for gpus
	// GPUs. It only names the worker in messages.
	unit string
	// part: a worker takes part of a whole GPU (a share or memory, not a
	// MIG slice), which only a node with whole GPUs can give it: a node
	// whose GPUs are all cut into MIG slices never hosts one.
	part bool
}

// each is what one worker of sh takes, as messages name it: "2 GPUs",
// "part of a GPU", "a 3g.40gb MIG slice".
func (sh *shape) each() string {
	if sh.unit != "" {
		return sh.unit
	}
	return fmt.Sprintf("%d GPUs", sh.gpus)
}

func newShape(p *corev1.Pod, gpus int, typ string) *shape {
	req := podRequests(p)
	delete(req, GPUResource)
	return &shape{gpus: gpus, req: req, pod: p, aff: nodeaffinity.GetRequiredNodeAffinity(p), ports: podPorts(p), typ: typ}
}

// conditionTaint reports the taints the node lifecycle controller sets
// and clears as a node's conditions change: they say nothing about
// whether a node could ever host a pod.
func conditionTaint(t *corev1.Taint) bool {
	return strings.HasPrefix(t.Key, "node.kubernetes.io/")
}

func scheduling(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// static says why a worker of sh can never run on n, whatever else runs
// there ("" when it can): the node's labels, taints other than the
// node-condition ones, and allocatable alone. It also returns how many
// workers of sh the node could hold when empty.
func (sh *shape) static(n *nodeState, typeLabel string) (string, int) {
	if sh.typ != "" && strings.ToLower(n.node.Labels[typeLabel]) != sh.typ {
		return "node(s) had another GPU type", 0
	}
	if ok, _ := sh.aff.Match(n.node); !ok {
		return "node(s) didn't match Pod's node affinity/selector", 0
	}
	if t, bad := schedhelper.FindMatchingUntoleratedTaint(klog.Background(), n.node.Spec.Taints, sh.pod.Spec.Tolerations,
		func(t *corev1.Taint) bool { return scheduling(t) && !conditionTaint(t) }, true); bad {
		return untolerated(t), 0
	}
	k := int64(1 << 30)
	if sh.part && n.alloc.Name(GPUResource, resource.DecimalSI).Value() == 0 {
		return "Insufficient " + string(GPUResource), 0
	}
	if sh.gpus > 0 {
		k = n.alloc.Name(GPUResource, resource.DecimalSI).Value() / int64(sh.gpus)
		if k == 0 {
			return "Insufficient " + string(GPUResource), 0
		}
	}
	for _, name := range sortedNames(sh.req) {
		q := sh.req[name]
		if q.IsZero() {
			continue
		}
		a := n.alloc[name]
		m := a.MilliValue() / max(1, q.MilliValue())
		if m == 0 {
			return "Insufficient " + string(name), 0
		}
		k = min(k, m)
	}
	if a, ok := n.alloc[corev1.ResourcePods]; ok {
		k = min(k, a.Value())
	}
	if len(sh.ports) > 0 {
		k = min(k, 1) // its own workers' ports collide
	}
	if k == 0 {
		return "Too many pods", 0
	}
	return "", int(k)
}

func untolerated(t corev1.Taint) string {
	return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
}

// why says why one more worker of sh does not fit on n now, "" when it
// does: on top of base (requests and pods already there) and the workers
// placed this round (extra, extraPods, extraPorts).
func (sh *shape) why(n *nodeState, base corev1.ResourceList, pods int, extraPorts []hostPort) string {
	if !n.open {
		if n.node.Spec.Unschedulable {
			return "node(s) were unschedulable"
		}
		if n.short && nodeReady(n.node) {
			return "node(s) had fewer GPUs allocatable than their running pods hold"
		}
		return "node(s) were not ready"
	}
	if ok, _ := sh.aff.Match(n.node); !ok {
		return "node(s) didn't match Pod's node affinity/selector"
	}
	if t, bad := schedhelper.FindMatchingUntoleratedTaint(klog.Background(), n.node.Spec.Taints, sh.pod.Spec.Tolerations, scheduling, true); bad {
		return untolerated(t)
	}
	if w := sh.short(n, base, pods); w != "" {
		return w
	}
	for _, p := range sh.ports {
		for _, q := range append(n.ports, extraPorts...) {
			if p.conflicts(q) {
				return "node(s) didn't have free ports for the requested pod ports"
			}
		}
	}
	return ""
}

// short says which room of n (its pod slots, its requests) one more
// worker of sh lacks on top of base and pods, "" when none.
func (sh *shape) short(n *nodeState, base corev1.ResourceList, pods int) string {
	if a, ok := n.alloc[corev1.ResourcePods]; ok && int64(pods+1) > a.Value() {
		return "Too many pods"
	}
	for _, name := range sortedNames(sh.req) {
		q, u, a := sh.req[name], base[name], n.alloc[name]
		if q.IsZero() {
			continue
		}
		u.Add(q)
		if u.Cmp(a) > 0 {
			return "Insufficient " + string(name)
		}
	}
	return ""
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func addTimes(to corev1.ResourceList, l corev1.ResourceList, k int) {
	for n, q := range l {
		sum := to[n]
		for i := 0; i < k; i++ {
			sum.Add(q)
		}
		to[n] = sum
	}
}

func subtract(to corev1.ResourceList, l corev1.ResourceList) {
	for n, q := range l {
		d := to[n]
		d.Sub(q)
		to[n] = d
	}
}

// placement tracks, during one engine placement, the room the workers
// kept and placed take on each node; it implements nodeFit.
type placement struct {
	nodes  map[string]*nodeState
	shapes func(job string) *shape // nil: the job has no shape (fits by GPUs alone)
	req    map[string]corev1.ResourceList
	pods   map[string]int
	ports  map[string][]hostPort
}

// newPlacement starts a placement: on each node, the requests of every
// pod but the live pods of the jobs in engine (keys), which come back
// through the workers the placer keeps.
func newPlacement(nodes map[string]*nodeState, keys map[string]bool, shapes func(job string) *shape) *placement {
	p := &placement{nodes: nodes, shapes: shapes, req: map[string]corev1.ResourceList{}, pods: map[string]int{}, ports: map[string][]hostPort{}}
	for name, n := range nodes {
		base := n.used.DeepCopy()
		if base == nil {
			base = corev1.ResourceList{}
		}
		pods := n.pods
		for key, u := range n.mine {
			if keys[key] {
				subtract(base, u.req)
				pods -= u.pods
			}
		}
		p.req[name], p.pods[name] = base, pods
	}
	return p
}

func (p *placement) fits(job, node string, workers int) bool {
	node = kubeNode(node) // a node of MIG slices is its node's (mig.go)
	sh, n := p.shapes(job), p.nodes[node]
	if n == nil {
		return false
	}
	if sh == nil {
		return n.open
	}
	base := p.req[node].DeepCopy()
	addTimes(base, sh.req, workers-1)
	ports := p.ports[node]
	if workers > 1 && len(sh.ports) > 0 {
		return false
	}
	return sh.why(n, base, p.pods[node]+workers-1, ports) == ""
}

func (p *placement) take(job, node string, workers int) {
	node = kubeNode(node)
	sh := p.shapes(job)
	if sh == nil || p.req[node] == nil {
		return
	}
	addTimes(p.req[node], sh.req, workers)
	p.pods[node] += workers
	for i := 0; i < workers; i++ {
		p.ports[node] = append(p.ports[node], sh.ports...)
	}
}

func (p *placement) give(job, node string, workers int) {
	node = kubeNode(node)
	sh := p.shapes(job)
	if sh == nil || p.req[node] == nil {
		return
	}
	for i := 0; i < workers; i++ {
		subtract(p.req[node], sh.req)
	}
	p.pods[node] -= workers
	// Ports stay taken: a conservative placement, corrected next round.
}

// explain says, in kube-scheduler's words, why the nodes cannot take a
// worker of sh now: "0/4 nodes are available: 3 Insufficient
// nvidia.com/gpu, 1 node(s) were unschedulable." gpuFree is each node's
// free GPUs.
func explain(nodes map[string]*nodeState, sh *shape, typeLabel string, gpuFree map[string]int) string {
	counts := map[string]int{}
	avail := 0
	for name, n := range nodes {
		why, _ := sh.static(n, typeLabel)
		if why == "" {
			why = sh.why(n, n.used, n.pods, nil)
		}
		if why == "" && gpuFree[name] < sh.gpus {
			why = "Insufficient " + string(GPUResource)
		}
		if why == "" {
			avail++
			continue
		}
		counts[why]++
	}
	reasons := make([]string, 0, len(counts))
	for why, k := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", k, why))
	}
	sort.Strings(reasons)
	msg := fmt.Sprintf("%d/%d nodes are available", avail, len(nodes))
	if len(reasons) > 0 {
		msg += ": " + strings.Join(reasons, ", ")
	}
	return msg + "."
}

// impossible says why no set of nodes can ever host minW workers of sh
// ("" when some can), counting each node's room when empty. A job's
// workers share one GPU type and one site (on an edge site, one server),
// as the engine places them (cluster.MaxJobGPUs): group names the set a
// node's workers would share ("" for a node tide leaves out), and only
// the room within one set counts.
func impossible(nodes map[string]*nodeState, sh *shape, minW int, typeLabel string, group func(*nodeState) string) string {
	counts := map[string]int{}
	room := map[string]int{}
	total := 0
	for _, n := range nodes {
		why, k := sh.static(n, typeLabel)
		g := ""
		if why == "" {
			if g = group(n); g == "" {
				why = "node(s) left out of tide's sites"
			}
		}
		if why != "" {
			counts[why]++
			continue
		}
		room[g] += k
		total += k
		if room[g] >= minW {
			return ""
		}
	}
	if len(room) > 1 {
		most := 0
		for _, k := range room {
			most = max(most, k)
		}
		return fmt.Sprintf("the job needs %d workers of %s at once, all on one GPU type and one site (on an edge site, one server); "+
			"the nodes that can host its workers hold at most %d of them together (%d across %d such sets, which a job never spans)", minW, sh.each(), most, total, len(room))
	}
	if total > 0 {
		return fmt.Sprintf("the job needs %d workers of %s at once; the nodes that can host its workers hold at most %d", minW, sh.each(), total)
	}
	reasons := make([]string, 0, len(counts))
	for why, k := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", k, why))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("no node can ever host a worker of %s: 0/%d nodes fit: %s", sh.each(), len(nodes), strings.Join(reasons, ", "))
}
