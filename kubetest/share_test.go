package kubetest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/tide-sched/tide/kube"
)

// GPU sharing in tide kube (docs/sharing.md, "tide kube"): parts of GPUs
// bound to a node and a GPU index, MIG slices as extended resources, and
// no GPU over-committed while tide kube is stopped and started again.

// sharePod creates a plain pod asking for part of a GPU (annotations in
// pairs) and for no whole GPU.
func (s *scenario) sharePod(ns, name string, annot ...string) {
	s.t.Helper()
	s.podWith(ns, name, 0, func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = nil }, annot...)
}

// gpuBook is what the live pods bound in a namespace hold, worked from
// their annotations and requests (not by tide's code): parts' shares and
// memory per node and GPU index, whole GPUs and MIG slices per node.
type gpuBook struct {
	share, mem map[string]float64 // "node#index"
	whole      map[string]int     // node
	mig        map[string]int64   // "node resource"
	bad        []string           // parts bound without a readable index
}

// book reads pods. tjShare is the share of each worker of
// the named TideJobs; gpuMem the memory of a GPU on each node, GiB.
func book(pods []corev1.Pod, tjShare map[string]float64, gpuMem map[string]float64) gpuBook {
	b := gpuBook{share: map[string]float64{}, mem: map[string]float64{}, whole: map[string]int{}, mig: map[string]int64{}}
	for i := range pods {
		p := &pods[i]
		node := p.Spec.NodeName
		if node == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		lim := p.Spec.Containers[0].Resources.Limits
		if q, ok := lim[kube.GPUResource]; ok && q.Value() > 0 {
			b.whole[node] += int(q.Value())
			continue
		}
		migs := false
		for name, q := range lim {
			if strings.HasPrefix(string(name), "nvidia.com/mig-") {
				b.mig[node+" "+string(name)] += q.Value()
				migs = true
			}
		}
		if migs {
			continue
		}
		idx := p.Annotations[kube.AnnotGPUIndex]
		if _, err := strconv.Atoi(idx); err != nil {
			b.bad = append(b.bad, fmt.Sprintf("%s on %s with GPU index %q", p.Name, node, idx))
			continue
		}
		sh := tjShare[p.Labels[kube.LabelTideJob]]
		if v := p.Annotations[kube.AnnotGPUFraction]; v != "" {
			sh, _ = strconv.ParseFloat(v, 64)
		}
		m := 0.0
		if v := p.Annotations[kube.AnnotGPUMemory]; v != "" {
			q := resource.MustParse(v)
			m = float64(q.Value()) / (1 << 30)
		}
		if sh == 0 {
			sh = m / gpuMem[node]
		}
		if m == 0 {
			m = sh * gpuMem[node]
		}
		key := node + "#" + idx
		b.share[key] += sh
		b.mem[key] += m
	}
	return b
}

// overCommitted says how b over-commits the nodes ("" when it does not):
// a GPU index out of its node's range, a GPU whose parts sum to more than
// its compute or memory, a node whose whole GPUs and GPUs with parts
// exceed its GPUs, MIG slices beyond the node's allocatable.
func (b gpuBook) overCommitted(gpus map[string]int, gpuMem map[string]float64, mig map[string]int64) string {
	var out []string
	out = append(out, b.bad...)
	parts := map[string]int{}
	for key, sh := range b.share {
		node, idx, _ := strings.Cut(key, "#")
		i, _ := strconv.Atoi(idx)
		parts[node]++
		if i < 0 || i >= gpus[node] {
			out = append(out, fmt.Sprintf("GPU %s: node %s has GPUs 0-%d", key, node, gpus[node]-1))
		}
		if sh > 1+1e-9 || b.mem[key] > gpuMem[node]+1e-9 {
			out = append(out, fmt.Sprintf("GPU %s holds parts of share %.3g and %.3g GiB (it has 1 and %g GiB)", key, sh, b.mem[key], gpuMem[node]))
		}
	}
	for node, g := range gpus {
		if b.whole[node]+parts[node] > g {
			out = append(out, fmt.Sprintf("node %s: %d whole GPUs and %d GPUs with parts, it has %d", node, b.whole[node], parts[node], g))
		}
	}
	for key, n := range b.mig {
		if n > mig[key] {
			out = append(out, fmt.Sprintf("node and resource %s: %d MIG slices bound, %d allocatable", key, n, mig[key]))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// guard checks, every 100 ms until stopped, that the namespace's pods
// never over-commit a GPU; stop returns the first over-commitment seen
// ("" when none) and how many times it looked.
func (s *scenario) guard(ns string, tjShare, gpuMem map[string]float64, gpus map[string]int, mig map[string]int64) (stop func() (string, int)) {
	return s.guardWith(ns, func(pods []corev1.Pod) string { return book(pods, tjShare, gpuMem).overCommitted(gpus, gpuMem, mig) })
}

// guardWith runs over on the namespace's pods every 100 ms until
// stopped; stop returns the first thing over said ("" when none) and how
// many times it looked.
func (s *scenario) guardWith(ns string, over func([]corev1.Pod) string) (stop func() (string, int)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var first string
	looks := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if l, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
				looks++
				if why := over(l.Items); why != "" && first == "" {
					first = why
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() (string, int) { cancel(); wg.Wait(); return first, looks }
}

// testShare: fractional pods and a TideJob of fractional workers are
// packed onto GPU indices of a node, never over a GPU's compute or
// memory; a whole-GPU pod waits while every GPU holds parts; a TideJob's
// workers select their GPU by environment. tide kube is stopped (after a
// part ended, so a fresh packing would differ from the real one), more
// parts are submitted, and a new tide kube adopts the bound parts by their
// recorded indices: nothing moves, and the new parts go only where there
// is room, as parts end. A background guard checks throughout that no GPU
// is over-committed.
func testShare(t *testing.T, e *env) {
	s := e.scenario(t, "tide-share", "share")
	const ns = "share"
	s.node("share-0", 2, "A100")
	s.editNode("share-0", func(n *corev1.Node) { n.Labels[kube.LabelGPUMemory] = "40960" }) // 40 GiB, as GPU feature discovery labels it
	// A node of MIG slices alone (no GPU outside MIG), as NVIDIA's device
	// plugin's mixed strategy shows it.
	const slice = "nvidia.com/mig-1g.10gb"
	s.node("share-mig", 0, "A100")
	s.nodeStatus("share-mig", func(n *corev1.Node) { n.Status.Allocatable[slice] = resource.MustParse("2") })
	gpus := map[string]int{"share-0": 2, "share-mig": 0}
	gpuMem := map[string]float64{"share-0": 40}
	tjShare := map[string]float64{"tj": 0.25}
	s.kubeletLoop(ns, 200*time.Millisecond)
	stopGuard := s.guard(ns, tjShare, gpuMem, gpus, map[string]int64{"share-mig " + slice: 2})
	_, stop := s.start(kube.Config{Policy: "fifo:backfill=true"})
	// Two workers of 0.25 (on two GPUs: a job's parts take distinct
	// GPUs), then 0.5 + 0.25 + 20 GiB (0.5) + 0.25: two GPUs' worth.
	s.tidejob(ns, "tj", 2, 2, 1, func(tj *kube.TideJob) { tj.Spec.GPUFraction = "0.25" })
	eventually(t, 30*time.Second, func() (bool, string) {
		n := s.workers(ns, "tj")
		return n == 2, fmt.Sprintf("%d of 2 workers bound", n)
	})
	// Creation times count in whole seconds: the pods come strictly
	// after the TideJob, so FIFO never puts them ahead of it.
	time.Sleep(1100 * time.Millisecond)
	s.sharePod(ns, "p1", kube.AnnotGPUFraction, "0.5")
	s.sharePod(ns, "p2", kube.AnnotGPUFraction, "25%")
	s.sharePod(ns, "p3", kube.AnnotGPUMemory, "20Gi")
	s.sharePod(ns, "p4", kube.AnnotGPUFraction, "0.25")
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(bound(s.pods(ns), "p1", "p2", "p3", "p4")) + s.workers(ns, "tj")
		return n == 6, fmt.Sprintf("%d of 6 parts bound", n)
	})
	s.pod(ns, "w1", 1)
	for _, name := range []string{"m1", "m2", "m3"} {
		s.podWith(ns, name, 0, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{slice: resource.MustParse("1")}
		})
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods(ns), "m1", "m2", "m3")
		return len(got) == 2, fmt.Sprintf("MIG pods bound: %v; want two (the node has two slices)", got)
	})
	time.Sleep(time.Second) // rounds: w1 must wait, both GPUs hold parts; the third MIG pod waits
	if got := bound(s.pods(ns), "w1"); len(got) > 0 {
		t.Fatalf("whole-GPU pod w1 bound beside parts on both of share-0's GPUs")
	}
	for _, p := range s.workerPods(ns, "tj") {
		c := p.Spec.Containers[0]
		env := map[string]string{}
		for _, ev := range c.Env {
			env[ev.Name] = ev.Value
		}
		if idx := p.Annotations[kube.AnnotGPUIndex]; env["NVIDIA_VISIBLE_DEVICES"] != idx || idx == "" || env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "25" || env["TIDE_GPU_MEM_GIB"] != "10" {
			t.Errorf("worker %s at GPU index %q has env %v; want NVIDIA_VISIBLE_DEVICES of its index, 25%% of the threads, 10 GiB", p.Name, idx, env)
		}
		if _, ok := c.Resources.Limits[kube.GPUResource]; ok {
			t.Errorf("worker %s asks the device plugin for %v GPUs; a part asks for none", p.Name, c.Resources.Limits[kube.GPUResource])
		}
	}
	// p1 (a half) ends and tide stops: the parts left are no longer the
	// packing a fresh placement would make of them, so only their
	// recorded indices say where they are. A half and a quarter arrive
	// meanwhile; a new tide starts.
	p1Idx := s.pods(ns)["p1"].Annotations[kube.AnnotGPUIndex]
	s.end(ns, corev1.PodSucceeded, "p1")
	time.Sleep(500 * time.Millisecond)
	stop()
	before := s.where(ns)
	s.sharePod(ns, "p5", kube.AnnotGPUFraction, "0.5")
	s.sharePod(ns, "p6", kube.AnnotGPUMemory, "10Gi")
	sch, stop2 := s.start(kube.Config{Policy: "fifo:backfill=true"})
	eventually(t, 20*time.Second, func() (bool, string) {
		p := s.pods(ns)["p5"]
		return p.Spec.NodeName != "", "p5 (a half) not bound after the restart, though p1's GPU has room"
	})
	time.Sleep(time.Second) // more rounds: p6 must wait, nothing may move
	if got := s.pods(ns)["p5"].Annotations[kube.AnnotGPUIndex]; got != p1Idx {
		t.Fatalf("p5 bound to GPU index %q; want %s, the one GPU p1 left room on", got, p1Idx)
	}
	if got := bound(s.pods(ns), "p6", "w1"); len(got) > 0 {
		t.Fatalf("after the restart %v bound; want none (every GPU full)", got)
	}
	if got := bound(s.pods(ns), "m1", "m2", "m3"); len(got) != 2 {
		t.Fatalf("after the restart MIG pods %v bound; want two (the node's two slices)", got)
	}
	for name, node := range before {
		if s.where(ns)[name] != node {
			t.Fatalf("after the restart pod %s moved from %s to %q", name, node, s.where(ns)[name])
		}
	}
	// p2 and p4 (a quarter each) end: p6 fits; a MIG pod ends: the third
	// takes its slice.
	s.end(ns, corev1.PodSucceeded, "p2", "p4")
	s.end(ns, corev1.PodSucceeded, bound(s.pods(ns), "m1", "m2", "m3")[0])
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods(ns), "p6", "m1", "m2", "m3")
		return len(got) == 4, fmt.Sprintf("bound %v; want p6 after two quarters ended, and all three MIG pods (one ended, two live)", got)
	})
	// Once more: stop and start, then everything but w1 ends: w1 runs
	// (on a GPU no part holds any more).
	stop2()
	// (Not its failed binds: stopping it may cancel a bind the API
	// server has already done.)
	if st := sch.Stats(); st.Evicted != 0 {
		t.Errorf("the second tide evicted %d pods; want none (the parts adopted where they run)", st.Evicted)
	}
	_, _ = s.start(kube.Config{Policy: "fifo:backfill=true"})
	for name := range s.where(ns) {
		if name != "w1" {
			s.endIfThere(ns, name)
		}
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		got := bound(s.pods(ns), "w1")
		return len(got) == 1, "w1 not bound once every part ended: " + fmt.Sprint(s.where(ns))
	})
	why, looks := stopGuard()
	if why != "" {
		t.Errorf("over-committed: %s", why)
	}
	if looks < 10 {
		t.Errorf("the guard looked %d times; too few to mean anything", looks)
	}
}

// endIfThere marks pod name Succeeded unless it is gone already: the new
// tide may delete a TideJob's worker between the listing and the update
// (a pod that is gone has ended as this test wants). A conflict with
// tide's own write is retried.
func (s *scenario) endIfThere(ns, name string) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := s.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodSucceeded
		_, err = s.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
}
