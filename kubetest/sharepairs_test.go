package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/kube"
)

// Packed whole-GPU pairs in tide kube (docs/sharing.md, "tide kube"):
// TideJobs of job types the pair table knows are bound by GPU index and
// may share a GPU two at a time; a restart moves nothing.

// pairTable: three one-GPU job types on V100s (iterations/s), alone and
// in pairs; every pair helps (packed over alone: A+B 0.6+0.6, A+C
// 0.6+0.625, B+C 0.6+0.625).
const pairTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 6.0], "('C', 1)": [6.0, 5.0]},
 "('B', 1)": {"null": 10.0, "('C', 1)": [6.0, 5.0]},
 "('C', 1)": {"null": 8.0}
}}`

// pairUse says how the live bound pods of a namespace over-commit its
// nodes' GPUs ("" when they do not), worked from the pods alone: a GPU
// index holding workers of more than two TideJobs, or of a job that is
// not packable (packable names those that are) beside another, an index
// out of its node's range, or a node whose whole-GPU pods and GPU
// indices in use exceed its GPUs.
func pairUse(pods []corev1.Pod, packable map[string]bool, gpus map[string]int) string {
	onIndex := map[string]map[string]bool{} // "node#index" -> TideJobs
	whole := map[string]int{}
	indices := map[string]int{}
	var out []string
	for i := range pods {
		p := &pods[i]
		node := p.Spec.NodeName
		if node == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if q, ok := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]; ok && q.Value() > 0 {
			whole[node] += int(q.Value())
			continue
		}
		idx, ok := p.Annotations[kube.AnnotGPUIndex]
		if !ok {
			out = append(out, fmt.Sprintf("pod %s on %s asks for no GPU and has no GPU index", p.Name, node))
			continue
		}
		key := node + "#" + idx
		if onIndex[key] == nil {
			onIndex[key] = map[string]bool{}
			indices[node]++
			var i int
			if _, err := fmt.Sscan(idx, &i); err != nil || i < 0 || i >= gpus[node] {
				out = append(out, fmt.Sprintf("GPU index %s: node %s has GPUs 0-%d", key, node, gpus[node]-1))
			}
		}
		onIndex[key][p.Labels[kube.LabelTideJob]] = true
	}
	for key, jobs := range onIndex {
		var names []string
		alone := false
		for j := range jobs {
			names = append(names, j)
			alone = alone || !packable[j]
		}
		sort.Strings(names)
		if len(names) > 2 || (len(names) > 1 && alone) {
			out = append(out, fmt.Sprintf("GPU %s holds %v", key, names))
		}
	}
	for node, g := range gpus {
		if whole[node]+indices[node] > g {
			out = append(out, fmt.Sprintf("node %s: %d whole GPUs and %d GPU indices in use, it has %d", node, whole[node], indices[node], g))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// slotOf says where TideJob name's one live worker is: "node#index", the
// node alone for a whole-GPU worker, "" when none is bound; more than one
// live worker fails the test.
func (s *scenario) slotOf(ns, name string) string {
	s.t.Helper()
	ws := s.workerPods(ns, name)
	if len(ws) > 1 {
		s.t.Fatalf("TideJob %s has %d live workers; want at most one", name, len(ws))
	}
	if len(ws) == 0 || ws[0].Spec.NodeName == "" {
		return ""
	}
	if i, ok := ws[0].Annotations[kube.AnnotGPUIndex]; ok {
		return ws[0].Spec.NodeName + "#" + i
	}
	return ws[0].Spec.NodeName
}

// podEnv is a pod's first container's environment.
func podEnv(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// testSharePairs: under gandiva:pack=true with a pair table, on a node of
// one GPU, two packable TideJobs (types A and B) are bound to its GPU
// index 0 together, each selecting it by environment with half its
// threads and asking the device plugin for no GPU. A third packable job
// (C) and a job with no type wait. tide kube is stopped and a new one
// started: it adopts the pair where it runs, evicts and binds nothing.
// When a's worker ends, c joins b on index 0 (made packed: half the
// threads); the untyped job never shares, and runs on a whole GPU once b
// and c end. A guard reading the pods every 100 ms finds no GPU holding
// more than two jobs, or a job that is not packable beside another,
// throughout.
func testSharePairs(t *testing.T, e *env) {
	s := e.scenario(t, "tide-pairs", "pairs")
	const ns, node = "pairs", "pairs-0"
	s.node(node, 1, "V100")
	table := filepath.Join(t.TempDir(), "pairs.json")
	if err := os.WriteFile(table, []byte(pairTable), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := kube.Config{Policy: "gandiva:pack=true:quantum=3600", PairThroughputs: table}
	s.kubeletLoop(ns, 200*time.Millisecond)
	packable := map[string]bool{"a": true, "b": true, "c": true}
	stopGuard := s.guardWith(ns, func(pods []corev1.Pod) string { return pairUse(pods, packable, map[string]int{node: 1}) })
	_, stop := s.start(cfg)
	typed := func(typ string) func(*kube.TideJob) {
		return func(tj *kube.TideJob) {
			tj.Spec.JobType = typ
			tj.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}
		}
	}
	s.tidejob(ns, "a", 1, 1, 1, typed("A"))
	s.tidejob(ns, "b", 1, 1, 1, typed("B"))
	eventually(t, 30*time.Second, func() (bool, string) {
		a, b := s.slotOf(ns, "a"), s.slotOf(ns, "b")
		return a == node+"#0" && b == node+"#0", fmt.Sprintf("a on %q, b on %q; want both on %s#0", a, b, node)
	})
	for _, name := range []string{"a", "b"} {
		p := s.workerPods(ns, name)[0]
		if env := podEnv(p); env["NVIDIA_VISIBLE_DEVICES"] != "0" || env["CUDA_VISIBLE_DEVICES"] != "0" || env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "50" {
			t.Errorf("worker of %s has env %v; want GPU 0 selected and half its threads", name, env)
		}
		if _, ok := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]; ok {
			t.Errorf("worker of %s asks the device plugin for a GPU; a packable worker asks for none", name)
		}
	}
	// Creation times count in whole seconds: c and d come strictly after.
	time.Sleep(1100 * time.Millisecond)
	s.tidejob(ns, "c", 1, 1, 1, typed("C"))
	s.tidejob(ns, "d", 1, 1, 1, typed(""))
	time.Sleep(1500 * time.Millisecond) // rounds: c and d must wait
	if c, d := s.slotOf(ns, "c"), s.slotOf(ns, "d"); c != "" || d != "" {
		t.Fatalf("c on %q, d on %q; want both waiting (the GPU holds a pair)", c, d)
	}
	// A restart.
	stop()
	before := s.where(ns)
	sch, stop2 := s.start(cfg)
	time.Sleep(2 * time.Second) // rounds of the new tide: nothing may move
	if after := s.where(ns); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after the restart the bound pods are %v; want %v, as before", after, before)
	}
	if st := sch.Stats(); st.Evicted != 0 || st.Bound != 0 {
		t.Fatalf("the new tide evicted %d and bound %d pods; want none (the pair adopted where it runs, c and d waiting)", st.Evicted, st.Bound)
	}
	// a ends: c joins b.
	for _, p := range s.workerPods(ns, "a") {
		s.end(ns, corev1.PodSucceeded, p.Name)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		b, c := s.slotOf(ns, "b"), s.slotOf(ns, "c")
		return b == node+"#0" && c == node+"#0", fmt.Sprintf("b on %q, c on %q; want c to join b on %s#0", b, c, node)
	})
	if d := s.slotOf(ns, "d"); d != "" {
		t.Fatalf("d bound to %q beside a pair; want it waiting", d)
	}
	if env := podEnv(s.workerPods(ns, "c")[0]); env["NVIDIA_VISIBLE_DEVICES"] != "0" || env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "50" {
		t.Errorf("c, made to join b, has env %v; want GPU 0 and half its threads", env)
	}
	// b and c end: d runs alone on a whole GPU, its template untouched.
	for _, name := range []string{"b", "c"} {
		for _, p := range s.workerPods(ns, name) {
			s.end(ns, corev1.PodSucceeded, p.Name)
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		d := s.slotOf(ns, "d")
		return d == node, fmt.Sprintf("d on %q; want it on %s with a whole GPU", d, node)
	})
	p := s.workerPods(ns, "d")[0]
	if q := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]; q.Value() != 1 || podEnv(p)["NVIDIA_VISIBLE_DEVICES"] != "all" {
		t.Errorf("d's worker asks for %v GPUs with env %v; want 1 from the device plugin and its template's env", q.String(), podEnv(p))
	}
	stop2()
	why, looks := stopGuard()
	if why != "" {
		t.Errorf("over-committed: %s", why)
	}
	if looks < 10 {
		t.Errorf("the guard looked %d times; too few to mean anything", looks)
	}
}
