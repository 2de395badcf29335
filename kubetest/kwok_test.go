package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/kube"
)

// kwok (sigs.k8s.io/kwok) plays the kubelets of fake nodes: it marks them
// Ready, renews their leases (the node lifecycle controller's heartbeat),
// moves bound pods to Running and finishes deleting pods being deleted.
// The suite builds it from the Go module proxy with go install (once; the
// binary is kept in the user cache directory, the build in Go's cache) and
// reads its stage files from the module cache, so nothing of it is copied
// here.

// kwokVersion is the kwok the suite runs.
const kwokVersion = "v0.8.0"

// kwokStages are the stage files kwok runs with, from its module: nodes
// become Ready at once, pods run at once and go at once when deleted.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// kwokBinary returns kwok's binary (TIDE_KWOK, or built once into the user
// cache directory) and its module's directory.
func kwokBinary(t *testing.T) (bin, dir string) {
	t.Helper()
	tmp := t.TempDir() // outside tide's modules
	run := func(env []string, args ...string) []byte {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = tmp, append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	mod := "sigs.k8s.io/kwok@" + kwokVersion
	var info struct{ Dir string }
	if err := json.Unmarshal(run(nil, "mod", "download", "-json", mod), &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: no directory (%v)", mod, err)
	}
	if bin = os.Getenv("TIDE_KWOK"); bin != "" {
		return bin, info.Dir
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	gobin := filepath.Join(cache, "tide-kubetest", "kwok-"+kwokVersion)
	bin = filepath.Join(gobin, "kwok")
	if _, err := os.Stat(bin); err != nil {
		t.Logf("building kwok %s (a few minutes of CPU the first time)", kwokVersion)
		run([]string{"GOBIN=" + gobin, "GOFLAGS=-buildvcs=false"}, "install", "sigs.k8s.io/kwok/cmd/kwok@"+kwokVersion)
	}
	return bin, info.Dir
}

// startKwok runs kwok against e's API server for the nodes selected by
// args (--manage-...) until stop is called or the test ends. Its log goes
// to the test's log when the test fails.
func (e *env) startKwok(t *testing.T, bin, dir string, args ...string) (stop func()) {
	t.Helper()
	return e.startKwokStages(t, bin, dir, kwokStages, args...)
}

// startKwokStages is startKwok with the stage files given (paths in
// kwok's module).
func (e *env) startKwokStages(t *testing.T, bin, dir string, stages []string, args ...string) (stop func()) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(e.cfg, kc); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--kubeconfig=" + kc, "--node-lease-duration-seconds=8"}, args...)
	for _, st := range stages {
		args = append(args, "--config="+filepath.Join(dir, st))
	}
	cmd := exec.Command(bin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		<-done
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("kwok %v log:\n%s", args, tail(log.String(), 4000))
		}
	})
	return stop
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// kwokNode registers a node of gpus GPUs, 64 CPUs and 512 GiB for the kwok
// instance whose label selector is tide.test/kwok=group, and waits until
// kwok has made it Ready and the node lifecycle controller has lifted
// its not-ready taint.
func (s *scenario) kwokNode(name string, gpus int, group string) {
	s.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": "A100",
		"kubernetes.io/hostname": name}}}
	if _, err := s.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.nodes = append(s.nodes, name)
	s.nodeStatus(name, func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi")}
		n.Status.Allocatable = n.Status.Capacity
	})
	s.editNode(name, func(n *corev1.Node) { n.Labels["tide.test/kwok"] = group })
}

// waitNodesUp waits until the nodes are Ready without taints.
func (s *scenario) waitNodesUp(names ...string) {
	s.t.Helper()
	eventually(s.t, 60*time.Second, func() (bool, string) {
		for _, name := range names {
			n, err := s.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready || len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("node %s: ready %v, taints %v", name, ready, n.Spec.Taints)
			}
		}
		return true, ""
	})
}

// TestKubeNodes (case 1) runs its own control plane whose node lifecycle
// controller declares a node NotReady 10 s after its last heartbeat, with
// kwok as the nodes' kubelets: one kwok for k-2, one for the others. A
// rigid TideJob of 3 workers and 4 single pods, 4 GPUs each (so the job
// is on two nodes at least, and room for a lost worker is never cut in
// pieces), run on 8 nodes of 8 GPUs: room enough for the job after four
// nodes are lost. Then, one node at a time: a cordon, a NotReady blink,
// k-2's kwok killed (no more heartbeats: NotReady past tide's grace), a
// NoExecute taint and a deletion. Each takes exactly the pods on that node;
// every other pod stays where it was; the TideJob, which each change hits
// (the node chosen holds one of its workers, but for k-2), gets its lost
// worker back on another node, keeping the others; nothing is bound to a
// node tide may no longer use.
func TestKubeNodes(t *testing.T) {
	bin, dir := kwokBinary(t)
	t.Log("starting etcd, kube-apiserver, kube-controller-manager and kwok")
	e := startEnv(t)
	e.startControllersGrace(t, 10*time.Second)
	s := e.scenario(t, "tide-kwok", "kwok")
	var names []string
	for i := 0; i < 8; i++ {
		name, group := fmt.Sprintf("k-%d", i), "pool"
		if i == 2 {
			group = "solo"
		}
		s.kwokNode(name, 8, group)
		names = append(names, name)
	}
	e.startKwok(t, bin, dir, "--manage-nodes-with-label-selector=tide.test/kwok=pool")
	stopSolo := e.startKwok(t, bin, dir, "--manage-nodes-with-label-selector=tide.test/kwok=solo")
	s.waitNodesUp(names...)
	sch, _ := s.start(kube.Config{Policy: "fifo", NotReadyGrace: 2 * time.Second})
	s.tidejob("kwok", "r", 3, 3, 4, func(tj *kube.TideJob) { tj.Spec.Duration = "10h" })
	for i := 0; i < 4; i++ {
		s.pod("kwok", fmt.Sprintf("p%d", i), 4, kube.AnnotDuration, "10h")
	}
	lost := map[string]bool{}
	// whole waits until r has its 3 workers running on usable nodes.
	whole := func(what string) {
		t.Helper()
		eventually(t, 60*time.Second, func() (bool, string) {
			var on []string
			for _, p := range s.workerPods("kwok", "r") {
				if p.Spec.NodeName != "" && !lost[p.Spec.NodeName] && p.Status.Phase == corev1.PodRunning {
					on = append(on, p.Spec.NodeName)
				}
			}
			return len(on) == 3, fmt.Sprintf("%s: r runs workers on %v, want 3 on usable nodes", what, on)
		})
	}
	whole("at start")
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(s.where("kwok"))
		return n == 7, fmt.Sprintf("%d of 7 pods bound", n)
	})
	// rNode is a usable node holding one of r's workers.
	rNode := func() string {
		var out []string
		for _, p := range s.workerPods("kwok", "r") {
			if n := p.Spec.NodeName; n != "" && !lost[n] && n != "k-2" {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		if len(out) == 0 {
			t.Fatal("r has no worker on a usable node")
		}
		return out[0]
	}
	// change applies a change to node and checks that the pods on it, and
	// only they, go.
	change := func(what, node string, apply func()) {
		t.Helper()
		before := s.where("kwok")
		others := map[string]string{}
		for name, n := range before {
			if n != node {
				others[name] = n
			}
		}
		t.Logf("%s (%s)", what, node)
		apply()
		lost[node] = true
		eventually(t, 60*time.Second, func() (bool, string) {
			var left []string
			for name, n := range s.where("kwok") {
				if n == node {
					left = append(left, name)
				}
			}
			return len(left) == 0, fmt.Sprintf("%s: %v still on %s", what, left, node)
		})
		s.stays("kwok", others, 3*time.Second, what)
	}

	node := rNode()
	change("cordon", node, func() { s.editNode(node, func(n *corev1.Node) { n.Spec.Unschedulable = true }) })
	whole("after the cordon")

	blink := rNode()
	before := s.where("kwok")
	t.Logf("%s NotReady for a moment (kwok sets it Ready again)", blink)
	s.setReady(blink, false)
	s.stays("kwok", before, 5*time.Second, "after a NotReady blink")

	change("kwok of k-2 killed: no heartbeat, NotReady", "k-2", stopSolo)
	whole("after k-2 went NotReady")

	node = rNode()
	change("NoExecute taint", node, func() {
		s.editNode(node, func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
		})
	})
	whole("after the taint")

	node = rNode()
	change("delete", node, func() {
		if err := s.cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	whole("after the deletion")
	for name, n := range s.where("kwok") {
		if lost[n] {
			t.Errorf("pod %s bound to %s, a node tide may no longer use", name, n)
		}
	}
	st := sch.Stats()
	if st.Evicted != st.Lost || st.BindErrors != 0 {
		t.Errorf("stats %+v, want every eviction a lost worker's, no failed bind", st)
	}
	if tj := s.getTideJob("kwok", "r"); tj.Status.Phase != kube.PhaseRunning && tj.Status.Phase != kube.PhasePending {
		t.Errorf("r's phase %s, want Running or Pending (a lost worker is not a failure)", tj.Status.Phase)
	}
}
