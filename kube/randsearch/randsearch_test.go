package randsearch

import (
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// nodes are every node the searches can make, as far as labels and one
// taint go.
func nodes() []*corev1.Node {
	taints := [][]corev1.Taint{nil}
	for _, e := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule} {
		for _, key := range []string{Dedicated, Maint, Soft} {
			for _, v := range []string{"", "gpu"} {
				taints = append(taints, []corev1.Taint{{Key: key, Value: v, Effect: e}})
			}
		}
	}
	var out []*corev1.Node
	for _, typ := range Types {
		for _, pool := range Pools {
			for _, ts := range taints {
				out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{TypeLabel: typ, PoolLabel: pool}},
					Spec: corev1.NodeSpec{Taints: ts}})
			}
		}
	}
	return out
}

// TestRulesMatchKubernetes: for the constraints Draw makes, Untolerated
// and Unselected say a pod that Apply built may not run on a node exactly
// when Kubernetes' own taint and node affinity rules say so.
func TestRulesMatchKubernetes(t *testing.T) {
	ns := nodes()
	for _, plain := range []bool{true, false} {
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 2000; i++ {
			c := Draw(rng, plain)
			if !plain && (c.In != "" || c.TolAll) {
				t.Fatalf("a TideJob's constraints %+v ask In or tolerate all", c)
			}
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
			c.Apply(&pod.Spec)
			sel := nodeaffinity.GetRequiredNodeAffinity(pod)
			for _, n := range ns {
				_, untol := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
					return t.Effect != corev1.TaintEffectPreferNoSchedule
				}, false)
				if got := c.Untolerated(n); (got != "") != untol {
					t.Errorf("%+v on taints %v: Untolerated %q, Kubernetes finds one untolerated: %v", c, n.Spec.Taints, got, untol)
				}
				match, err := sel.Match(n)
				if err != nil {
					t.Fatal(err)
				}
				if got := c.Unselected(n); (got == "") != match {
					t.Errorf("%+v on labels %v: Unselected %q, Kubernetes matches: %v", c, n.Labels, got, match)
				}
			}
		}
	}
}

// TestCapacity: Capacity is the least of what each asked resource allows.
func TestCapacity(t *testing.T) {
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	alloc := corev1.ResourceList{GPUResource: q(8), corev1.ResourceCPU: q(16), corev1.ResourceMemory: q(64 << 30), corev1.ResourcePods: q(110)}
	for _, c := range []struct {
		name string
		cons Constraints
		per  int64
		want int64
	}{
		{"GPUs bound", Constraints{}, 3, 2},
		{"parts one a GPU", Constraints{}, 0, 8},
		{"CPU bound", Constraints{CPU: 6000}, 1, 2},
		{"memory bound", Constraints{Mem: 40 << 30}, 1, 1},
	} {
		if got := c.cons.Capacity(alloc, GPUResource, c.per); got != c.want {
			t.Errorf("%s: Capacity %d, want %d", c.name, got, c.want)
		}
	}
	few := alloc.DeepCopy()
	few[corev1.ResourcePods] = q(1)
	if got := (Constraints{}).Capacity(few, GPUResource, 1); got != 1 {
		t.Errorf("pods bound: Capacity %d, want 1", got)
	}
}
