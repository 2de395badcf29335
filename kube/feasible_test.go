package kube

import (
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// testNode is a Ready node with 4 GPUs, 8 CPUs and 110 pods.
func testNode(name string, edit ...func(*corev1.Node)) *nodeState {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.Allocatable = corev1.ResourceList{GPUResource: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourcePods: resource.MustParse("110")}
	for _, e := range edit {
		e(n)
	}
	return &nodeState{node: n, open: !n.Spec.Unschedulable, alloc: n.Status.Allocatable, used: corev1.ResourceList{}, mine: map[string]*usage{}}
}

// testPod asks for gpus and cpu (cores), edited further by edit.
func testPod(gpus int, cpu string, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	for _, e := range edit {
		e(p)
	}
	return p
}

// TestPlacerFeasibility: the worker placer puts new workers only where
// kube-scheduler's filters would (selector, taints, CPU, cordon), and a
// gang that does not fit whole is left out entirely.
func TestPlacerFeasibility(t *testing.T) {
	names := []string{"n0", "n1", "n2"}
	var cn []cluster.Node
	for _, n := range names {
		cn = append(cn, cluster.Node{Name: n, GPUType: "t", GPUs: 4})
	}
	c, err := cluster.New(cn)
	if err != nil {
		t.Fatal(err)
	}
	taint := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoExecute}}
	}
	cordon := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	selector := func(node string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
	}
	tolerate := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	for _, tc := range []struct {
		name  string
		nodes []func(*corev1.Node) // per node
		pod   *corev1.Pod
		per   int
		gpus  int    // the job's GPUs
		want  string // nodes of its workers, "" = not placed
	}{
		{"selector picks the node", nil, testPod(2, "1", selector("n2")), 2, 2, "n2"},
		{"selector on a missing node", nil, testPod(2, "1", selector("n9")), 2, 2, ""},
		{"cpu beyond every node", nil, testPod(1, "200"), 1, 1, ""},
		{"cpu limits workers per node", nil, testPod(1, "5"), 1, 3, "n0,n1,n2"},
		{"gang does not fit whole", nil, testPod(1, "5"), 1, 4, ""},
		{"taint avoided", []func(*corev1.Node){taint, taint}, testPod(4, "1"), 4, 4, "n2"},
		{"taint tolerated", []func(*corev1.Node){taint, taint, taint}, testPod(4, "1", tolerate), 4, 4, "n0"},
		{"cordoned avoided", []func(*corev1.Node){cordon}, testPod(4, "1"), 4, 4, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			states := map[string]*nodeState{}
			for i, n := range names {
				var edit []func(*corev1.Node)
				if i < len(tc.nodes) {
					edit = append(edit, tc.nodes[i])
				}
				states[n] = testNode(n, edit...)
			}
			sh := newShape(tc.pod, tc.per, "")
			p := workerPlacer{per: func(string) int { return tc.per },
				room: func() nodeFit { return newPlacement(states, nil, func(string) *shape { return sh }) }}
			got := p.Place(c, nil, []engine.Assignment{{Job: "j", GPUs: tc.gpus}})
			var on []string
			for node, k := range workersOn(c, got["j"], tc.per) {
				for i := 0; i < k; i++ {
					on = append(on, node)
				}
			}
			sort.Strings(on)
			if g := strings.Join(on, ","); g != tc.want {
				t.Errorf("workers on %q, want %q", g, tc.want)
			}
		})
	}
}

// TestImpossible: a job no node shape can host is named, with why; its
// workers count only within one GPU type and site (on an edge site, one
// server), where the engine places one job.
func TestImpossible(t *testing.T) {
	const typeLabel = "nvidia.com/gpu.product"
	labels := func(kv ...string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			for i := 0; i < len(kv); i += 2 {
				n.Labels[kv[i]] = kv[i+1]
			}
		}
	}
	two := map[string]*nodeState{"n0": testNode("n0"), "n1": testNode("n1")}
	mixed := map[string]*nodeState{"n0": testNode("n0", labels(typeLabel, "A100")), "n1": testNode("n1", labels(typeLabel, "a100")),
		"n2": testNode("n2", labels(typeLabel, "V100"))}
	sites := map[string]*nodeState{"n0": testNode("n0", labels(DefaultSiteLabel, "east")), "n1": testNode("n1", labels(DefaultSiteLabel, "west"))}
	edge := map[string]*nodeState{"e0": testNode("e0", labels(DefaultSiteLabel, "edge", DefaultSiteKindLabel, "edge")),
		"e1": testNode("e1", labels(DefaultSiteLabel, "edge", DefaultSiteKindLabel, "edge"))}
	badKind := map[string]*nodeState{"n0": testNode("n0", labels(DefaultSiteKindLabel, "moon"))}
	s := &Scheduler{cfg: Config{GPUTypeLabel: typeLabel, Sites: SiteLabels{Site: DefaultSiteLabel, Kind: DefaultSiteKindLabel}}}
	for _, tc := range []struct {
		name  string
		nodes map[string]*nodeState
		pod   *corev1.Pod
		per   int
		minW  int
		want  string // in the message; "" = possible
	}{
		{"fits", two, testPod(4, "1"), 4, 2, ""},
		{"per-worker GPUs", two, testPod(16, "1"), 16, 1, "Insufficient nvidia.com/gpu"},
		{"cpu", two, testPod(1, "200"), 1, 1, "Insufficient cpu"},
		{"gang larger than the nodes", two, testPod(4, "1"), 4, 3, "at most 2"},
		{"selector", two, testPod(1, "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "x"} }), 1, 1,
			"didn't match Pod's node affinity/selector"},
		{"one type holds the gang", mixed, testPod(4, "1"), 4, 2, ""},
		{"the gang needs two types", mixed, testPod(4, "1"), 4, 3, "at most 2 of them together (3 across 2 such sets"},
		{"one site holds the gang", sites, testPod(2, "1"), 2, 2, ""},
		{"the gang needs two sites", sites, testPod(4, "1"), 4, 2, "at most 1 of them together (2 across 2"},
		{"one edge server holds the gang", edge, testPod(1, "1"), 1, 4, ""},
		{"the gang needs two edge servers", edge, testPod(2, "1"), 2, 3, "at most 2 of them together (4 across 2"},
		{"the node's site kind is refused", badKind, testPod(1, "1"), 1, 1, "1 node(s) left out of tide's sites"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := impossible(tc.nodes, newShape(tc.pod, tc.per, ""), tc.minW, typeLabel, s.jobGroup)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("impossible = %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// TestImpossibleNamesTheWorker: a job whose workers take part of a GPU or
// a MIG slice is named so when no node can host it, not as workers of "0
// GPUs" (the whole GPUs its pods ask the device plugin for).
func TestImpossibleNamesTheWorker(t *testing.T) {
	two := map[string]*nodeState{"n0": testNode("n0"), "n1": testNode("n1")}
	s := &Scheduler{cfg: Config{Sites: SiteLabels{Site: DefaultSiteLabel, Kind: DefaultSiteKindLabel}}}
	for _, tc := range []struct {
		name string
		w    *workload
		want string
	}{
		{"whole GPUs", &workload{per: 2}, "a worker of 2 GPUs"},
		{"part of a GPU", &workload{per: 1, part: part{share: 0.5}}, "a worker of part of a GPU"},
		{"a MIG slice", &workload{per: 1, part: part{mig: "1g.10gb"}}, "a worker of a 1g.10gb MIG slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 200 CPUs: no node can host a worker.
			tc.w.pods = []*corev1.Pod{testPod(tc.w.podGPUs(), "200")}
			got := impossible(two, s.shapeOf(tc.w), 1, "", s.jobGroup)
			if !strings.Contains(got, tc.want) {
				t.Errorf("impossible = %q, want it to name %q", got, tc.want)
			}
		})
	}
}

// TestPartNeverOnMIGOnlyNode: a worker taking part of a GPU can never run
// on a node whose GPUs are all cut into MIG slices (no whole GPU
// allocatable): a job whose selector leaves it only such a node is one no
// node can ever host, not one waiting for room; a MIG slice's worker and a
// part with a node of whole GPUs beside are not.
func TestPartNeverOnMIGOnlyNode(t *testing.T) {
	migOnly := func(n *corev1.Node) {
		n.Status.Allocatable[GPUResource] = resource.MustParse("0")
		n.Status.Allocatable["nvidia.com/mig-1g.10gb"] = resource.MustParse("7")
	}
	s := &Scheduler{cfg: Config{Sites: SiteLabels{Site: DefaultSiteLabel, Kind: DefaultSiteKindLabel}}}
	for _, tc := range []struct {
		name  string
		w     *workload
		nodes map[string]*nodeState
		never bool
	}{
		{"part, MIG-only node", &workload{per: 1, part: part{share: 0.5}}, map[string]*nodeState{"m0": testNode("m0", migOnly)}, true},
		{"part, a whole-GPU node beside", &workload{per: 1, part: part{share: 0.5}},
			map[string]*nodeState{"m0": testNode("m0", migOnly), "n0": testNode("n0")}, false},
		{"MIG slice, MIG-only node", &workload{per: 1, part: part{mig: "1g.10gb"}}, map[string]*nodeState{"m0": testNode("m0", migOnly)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.pods = []*corev1.Pod{testPod(tc.w.podGPUs(), "1")}
			got := impossible(tc.nodes, s.shapeOf(tc.w), 1, "", s.jobGroup)
			if never := strings.HasPrefix(got, "no node can ever host"); never != tc.never {
				t.Errorf("impossible = %q, want never %v", got, tc.never)
			}
		})
	}
}
