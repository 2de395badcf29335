// Package randsearch holds what tide kube's two random operation searches
// share: the one against an in-memory fake API (kube's
// TestRandomOperations) and the one against a real kube-apiserver
// (kubetest's TestKubeRandom). It draws what a job asks of a node beyond
// its GPUs, writes that into a pod spec, and says, as the API's rules
// would, where such a pod may run and how many of them an empty node
// holds. The searches' invariant checks use it, so it must stay a plain
// restatement of Kubernetes' matching rules, never a call into tide.
//
// Every draw takes the search's *rand.Rand and draws from it in a fixed
// order: a seed's operation sequence depends on that order, so changing
// what or in which order a function draws changes every seed's search.
package randsearch

import (
	"fmt"
	"math/rand"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels, taints and resource the searches' nodes carry.
const (
	TypeLabel = "nvidia.com/gpu.product" // a node's GPU type
	PoolLabel = "pool"                   // a node's pool: "p1" or "p2"
	Dedicated = "dedicated"              // a NoSchedule taint key, value "gpu"
	Maint     = "maint"                  // a NoExecute taint key
	Soft      = "soft"                   // a PreferNoSchedule taint key: no constraint
)

// GPUResource, SiteLabel and SiteKindLabel are kube's GPUResource,
// DefaultSiteLabel and DefaultSiteKindLabel, restated because kube's own
// tests import this package (its random search checks they agree).
const (
	GPUResource   corev1.ResourceName = "nvidia.com/gpu"
	SiteLabel     string              = "tide-sched.io/site"
	SiteKindLabel string              = "tide-sched.io/site-kind"
)

// Types and Pools are the GPU types and pools the searches draw from.
var (
	Types = []string{"V100", "A100"}
	Pools = []string{"p1", "p2"}
)

// RandomTaint draws one of the three taints the searches put on nodes
// (one draw).
func RandomTaint(rng *rand.Rand) corev1.Taint {
	switch rng.Intn(3) {
	case 0:
		return corev1.Taint{Key: Dedicated, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	case 1:
		return corev1.Taint{Key: Maint, Effect: corev1.TaintEffectNoExecute}
	}
	return corev1.Taint{Key: Soft, Effect: corev1.TaintEffectPreferNoSchedule}
}

// PodJob is a job of plain pods as the searches draw it, but for its
// Constraints.
type PodJob struct {
	Size  int           // pods; above 1 a gang
	Gang  bool          // annotated as a job (always when Size > 1)
	GPUs  int           // whole GPUs per pod; 0 with a Share
	Share float64       // a part of a GPU per pod; 0 with GPUs
	Prio  int32         // its priority class's value: 0, 100 or 200
	Dur   time.Duration // how long each pod runs
}

// DrawPodJob draws a PodJob (before its Constraints: the searches call
// Draw after it).
func DrawPodJob(rng *rand.Rand) PodJob {
	j := PodJob{Size: 1 + rng.Intn(4)*rng.Intn(2), Prio: int32(rng.Intn(3) * 100), Dur: time.Duration(1+rng.Intn(30)) * 10 * time.Minute}
	j.Gang = j.Size > 1 || rng.Intn(2) == 0
	if rng.Intn(6) == 0 {
		j.Share = []float64{0.25, 0.5, 0.75}[rng.Intn(3)]
	} else {
		j.GPUs = []int{1, 1, 2, 2, 4, 8, 3, 6}[rng.Intn(8)]
	}
	return j
}

// Constraints is what every pod of a job asks beyond its GPUs. The zero
// value asks nothing.
type Constraints struct {
	CPU, Mem int64  // requests per pod: millicores and bytes; 0: none
	Type     string // nodeSelector on TypeLabel; "": any type
	Pool     string // nodeSelector on PoolLabel
	In       string // required node affinity: PoolLabel In [In]
	NotIn    string // required node affinity: PoolLabel NotIn [NotIn]
	TolDed   bool   // tolerates the Dedicated taint (value "gpu", NoSchedule)
	TolMaint bool   // tolerates the Maint taint (any value and effect)
	TolAll   bool   // tolerates every taint (the empty key, Exists)

	// Deadline is how long after submission the job must end; 0: none.
	Deadline time.Duration
}

// Draw draws a job's constraints. plain is a pod job; a TideJob's
// (plain false) have neither an In affinity nor a toleration of all
// taints, and draw the same number of times but for the last of those.
func Draw(rng *rand.Rand, plain bool) Constraints {
	var c Constraints
	if rng.Intn(2) == 0 {
		c.CPU = int64(rng.Intn(17)) * 1000
	}
	if rng.Intn(2) == 0 {
		c.Mem = int64(rng.Intn(65)) << 30
	}
	if rng.Intn(4) == 0 {
		c.Type = Types[rng.Intn(2)]
	}
	switch rng.Intn(8) {
	case 0:
		c.Pool = Pools[rng.Intn(2)]
	case 1:
		if plain {
			c.In = Pools[rng.Intn(2)]
		}
	case 2:
		c.NotIn = Pools[rng.Intn(2)]
	}
	c.TolDed = rng.Intn(3) == 0
	c.TolMaint = rng.Intn(3) == 0
	c.TolAll = plain && rng.Intn(20) == 0
	if rng.Intn(3) == 0 {
		c.Deadline = time.Duration(1+rng.Intn(20)) * 30 * time.Minute
	}
	return c
}

// Apply writes c into spec: CPU and memory requests on its first
// container (which spec must have), nodeSelector, required node affinity
// and tolerations. It replaces spec's nodeSelector and affinity when c
// asks for them and appends to its tolerations; the deadline is the
// caller's (an annotation or a TideJob field).
func (c Constraints) Apply(spec *corev1.PodSpec) {
	res := &spec.Containers[0].Resources
	if res.Requests == nil && (c.CPU > 0 || c.Mem > 0) {
		res.Requests = corev1.ResourceList{}
	}
	if c.CPU > 0 {
		res.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(c.CPU, resource.DecimalSI)
	}
	if c.Mem > 0 {
		res.Requests[corev1.ResourceMemory] = *resource.NewQuantity(c.Mem, resource.BinarySI)
	}
	sel := map[string]string{}
	if c.Type != "" {
		sel[TypeLabel] = c.Type
	}
	if c.Pool != "" {
		sel[PoolLabel] = c.Pool
	}
	if len(sel) > 0 {
		spec.NodeSelector = sel
	}
	var exprs []corev1.NodeSelectorRequirement
	if c.In != "" {
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: PoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{c.In}})
	}
	if c.NotIn != "" {
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: PoolLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{c.NotIn}})
	}
	if len(exprs) > 0 {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
	}
	if c.TolDed {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: Dedicated, Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	}
	if c.TolMaint {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: Maint, Operator: corev1.TolerationOpExists})
	}
	if c.TolAll {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	}
}

// Tolerates: a pod asking c tolerates taint t (the API's matching rules
// for the tolerations Apply writes, written out; PreferNoSchedule binds
// nothing).
func (c Constraints) Tolerates(t corev1.Taint) bool {
	switch {
	case t.Effect == corev1.TaintEffectPreferNoSchedule, c.TolAll:
		return true
	case t.Key == Dedicated:
		return c.TolDed && t.Value == "gpu" && t.Effect == corev1.TaintEffectNoSchedule
	case t.Key == Maint:
		return c.TolMaint
	}
	return false
}

// Untolerated says which of n's taints a pod asking c does not tolerate
// ("": none).
func (c Constraints) Untolerated(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if !c.Tolerates(t) {
			return fmt.Sprintf("taint %v not tolerated", t)
		}
	}
	return ""
}

// Unselected says which of c's nodeSelector and affinity terms n's labels
// fail ("": none). GPU types match case-insensitively, as tide matches
// them.
func (c Constraints) Unselected(n *corev1.Node) string {
	pool := n.Labels[PoolLabel]
	switch {
	case c.Type != "" && !strings.EqualFold(n.Labels[TypeLabel], c.Type):
		return "GPU type " + n.Labels[TypeLabel] + ", not " + c.Type
	case c.Pool != "" && pool != c.Pool:
		return "pool " + pool + " fails nodeSelector " + c.Pool
	case c.In != "" && pool != c.In:
		return "pool " + pool + " fails affinity In " + c.In
	case c.NotIn != "" && pool == c.NotIn:
		return "pool " + pool + " fails affinity NotIn " + c.NotIn
	}
	return ""
}

// Why says why a new pod asking c may not run on node n ("": it may):
// the node is gone (nil), NotReady or cordoned, or it fails
// Untolerated or Unselected.
func (c Constraints) Why(n *corev1.Node) string {
	switch {
	case n == nil:
		return "the node does not exist"
	case !NodeReady(n):
		return "the node is NotReady"
	case n.Spec.Unschedulable:
		return "the node is cordoned"
	}
	if why := c.Untolerated(n); why != "" {
		return why
	}
	return c.Unselected(n)
}

// NodeReady: n's Ready condition is True (false when it has none).
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Qty is l's amount of name: millicores for CPU, whole units (bytes,
// GPUs, pods, slices) for the rest; 0 when l has none.
func Qty(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q := l[name]
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Capacity is how many pods asking c and per GPUs of resource gpu each
// an empty node with allocatable alloc holds. per 0 is a part of a GPU:
// a job's parts go on distinct GPUs, so one a GPU.
func (c Constraints) Capacity(alloc corev1.ResourceList, gpu corev1.ResourceName, per int64) int64 {
	k := Qty(alloc, corev1.ResourcePods)
	if per > 0 {
		k = min(k, Qty(alloc, gpu)/per)
	} else {
		k = min(k, Qty(alloc, gpu))
	}
	if c.CPU > 0 {
		k = min(k, Qty(alloc, corev1.ResourceCPU)/c.CPU)
	}
	if c.Mem > 0 {
		k = min(k, Qty(alloc, corev1.ResourceMemory)/c.Mem)
	}
	return k
}

// Group is the set of nodes one job's workers may share: typ (the
// node's GPU type, or a MIG profile's) on n's site, an edge server
// (site kind "edge") alone.
func Group(n *corev1.Node, typ string) string {
	g := typ + "/" + n.Labels[SiteLabel]
	if n.Labels[SiteKindLabel] == "edge" {
		g += "/" + n.Name
	}
	return g
}

// NewNode draws a node named name as the searches register it: labels
// (hostname, GPU type typ, a pool and, with sites, one time in three an
// edge site (none with noEdge) and one in three an inference site),
// allocatable GPUs, CPU, memory and pods, and one time in four a
// RandomTaint. It has no conditions: the caller makes it Ready as its
// API server would. The caller draws typ first, so that draw comes
// before NewNode's.
func NewNode(rng *rand.Rand, name, typ string, sites, noEdge bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name,
		TypeLabel:                typ,
		PoolLabel:                Pools[rng.Intn(2)],
	}}}
	if sites {
		switch rng.Intn(3) {
		case 1:
			if !noEdge {
				n.Labels[SiteLabel], n.Labels[SiteKindLabel] = "edge", "edge"
			}
		case 2:
			n.Labels[SiteLabel], n.Labels[SiteKindLabel] = "infer", "inference"
		}
	}
	pods := int64(110)
	if rng.Intn(6) == 0 {
		pods = int64(1 + rng.Intn(3))
	}
	n.Status.Allocatable = corev1.ResourceList{
		GPUResource:           *resource.NewQuantity(int64(1+rng.Intn(8)), resource.DecimalSI),
		corev1.ResourceCPU:    *resource.NewQuantity(int64([]int{8, 16, 32, 64}[rng.Intn(4)]), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64([]int{32, 64, 256}[rng.Intn(3)])<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if rng.Intn(4) == 0 {
		n.Spec.Taints = []corev1.Taint{RandomTaint(rng)}
	}
	return n
}

// ToggleCordon cordons n, or uncordons it, and says which.
func ToggleCordon(n *corev1.Node) string {
	n.Spec.Unschedulable = !n.Spec.Unschedulable
	return fmt.Sprintf("unschedulable=%v", n.Spec.Unschedulable)
}

// ToggleTaint clears n's taints, or when it has none gives it a
// RandomTaint, and says which.
func ToggleTaint(rng *rand.Rand, n *corev1.Node) string {
	if len(n.Spec.Taints) > 0 {
		n.Spec.Taints = nil
		return "untainted"
	}
	n.Spec.Taints = []corev1.Taint{RandomTaint(rng)}
	return fmt.Sprintf("tainted %v", n.Spec.Taints[0])
}

// Repool moves n to a pool drawn anew (maybe the one it is in) and says
// which.
func Repool(rng *rand.Rand, n *corev1.Node) string {
	n.Labels[PoolLabel] = Pools[rng.Intn(2)]
	return "pool=" + n.Labels[PoolLabel]
}
