// Package kubetest runs tide's Kubernetes scheduler against a real
// kube-apiserver backed by a real etcd, both started inside the test
// process from k8s.io/kubernetes (this module exists so that tide's own
// module does not depend on it). The tests play the kubelet: they mark
// bound pods Running and finish them.
package kubetest

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"sigs.k8s.io/yaml"

	"github.com/tide-sched/tide/kube"
)

// env is a running control plane.
type env struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	dyn dynamic.Interface
	// tideCS and tideDyn act as tide's service account, with only the
	// rights deploy/rbac.yaml grants: the schedulers under test use them.
	tideCS  kubernetes.Interface
	tideDyn dynamic.Interface
	calls   *callLog // the calls tideCS and tideDyn made (ops_test.go)
}

// counted is e with clients that count their requests in c (the live
// runner's note says where its API calls went).
func (e *env) counted(c *apiCalls) *env {
	out := *e
	out.cs = kubernetes.NewForConfigOrDie(c.wrap(e.cfg, "driver"))
	out.dyn = dynamic.NewForConfigOrDie(c.wrap(e.cfg, "driver"))
	tc := c.wrap(asTide(e.cfg), "tide")
	out.tideCS = kubernetes.NewForConfigOrDie(tc)
	out.tideDyn = dynamic.NewForConfigOrDie(tc)
	return &out
}

// startEnv starts etcd and a kube-apiserver for the rest of t, and installs
// tide's CRD from deploy/. Cleanups stop the API server before etcd.
func startEnv(t testing.TB) *env {
	t.Helper()
	etcd := testserver.RunEtcd(t, nil)
	sc := storagebackend.NewDefaultConfig(path.Join("/", "tide-kubetest"), nil)
	sc.Transport.ServerList = etcd.Endpoints()
	srv := apiservertesting.StartTestServerOrDie(t, nil,
		[]string{"--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount", "--authorization-mode=RBAC"}, sc)
	t.Cleanup(srv.TearDownFn)
	cfg := rest.CopyConfig(srv.ClientConfig)
	cfg.QPS, cfg.Burst = 5000, 10000
	e := &env{cfg: cfg}
	e.cs = kubernetes.NewForConfigOrDie(cfg)
	e.dyn = dynamic.NewForConfigOrDie(cfg)
	e.apply(t, filepath.Join("..", "deploy", "crd.yaml"))
	e.apply(t, filepath.Join("..", "deploy", "crd-tidequeue.yaml"))
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := e.dyn.Resource(kube.TideJobResource).Namespace("default").List(context.Background(), metav1.ListOptions{})
		if err == nil {
			_, err = e.dyn.Resource(kube.TideQueueResource).List(context.Background(), metav1.ListOptions{})
		}
		return err == nil, fmt.Sprint("TideJob and TideQueue APIs: ", err)
	})
	e.apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	tc := asTide(cfg)
	e.calls = &callLog{}
	e.calls.wrap(tc)
	e.tideCS = kubernetes.NewForConfigOrDie(tc)
	e.tideDyn = dynamic.NewForConfigOrDie(tc)
	// The role must actually be enforced, or the tests prove nothing about it.
	if _, err := e.tideCS.CoreV1().Secrets("default").List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tide's service account listing secrets: %v, want forbidden (is RBAC on?)", err)
	}
	e.calls.reset() // that probe was the test's, not tide's
	return e
}

// apply creates the objects of a YAML manifest (documents split by ---).
func (e *env) apply(t testing.TB, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		res := gv.WithResource(strings.ToLower(u.GetKind()) + "s")
		if u.GetKind() == "CustomResourceDefinition" {
			res.Resource = "customresourcedefinitions"
		}
		var ri dynamic.ResourceInterface = e.dyn.Resource(res)
		switch u.GetKind() {
		case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition":
		default:
			ns := u.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			_, err := e.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			ri = e.dyn.Resource(res).Namespace(ns)
		}
		if _, err := ri.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
}

// TestKube shares one control plane among the scenarios (starting one
// takes seconds; each scenario uses its own namespaces, nodes and
// scheduler name).
func TestKube(t *testing.T) {
	t.Log("starting etcd and kube-apiserver")
	e := startEnv(t)
	e.startControllers(t)
	t.Run("Bind", func(t *testing.T) { testBind(t, e) })
	t.Run("Gang", func(t *testing.T) { testGang(t, e) })
	t.Run("Evict", func(t *testing.T) { testEvict(t, e) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, e) })
	t.Run("Elastic", func(t *testing.T) { testElastic(t, e) })
	t.Run("Quota", func(t *testing.T) { testQuota(t, e) })
	t.Run("Queues", func(t *testing.T) { testQueues(t, e) })
	t.Run("ReclaimBlocked", func(t *testing.T) { testReclaimBlocked(t, e) })
	t.Run("FillIdle", func(t *testing.T) { testFillIdle(t, e) })
	t.Run("Elect", func(t *testing.T) { testElect(t, e) })
	t.Run("Manifests", func(t *testing.T) { testManifests(t, e) })
	// The cases (docs/kubernetes.md, "An ordinary day").
	t.Run("NodeChanges", func(t *testing.T) { testNodeChanges(t, e) })
	t.Run("ElasticSettles", func(t *testing.T) { testElasticSettles(t, e) })
	t.Run("Impossible", func(t *testing.T) { testImpossible(t, e) })
	t.Run("WorkerFailures", func(t *testing.T) { testWorkerFailures(t, e) })
	t.Run("RefusedWorker", func(t *testing.T) { testRefusedWorker(t, e) })
	t.Run("PartialGangRelease", func(t *testing.T) { testPartialGangRelease(t, e) })
	t.Run("Constraints", func(t *testing.T) { testConstraints(t, e) })
	t.Run("Feedback", func(t *testing.T) { testFeedback(t, e) })
	t.Run("Share", func(t *testing.T) { testShare(t, e) }) // GPU sharing (share_test.go)
	// Packed whole-GPU pairs (sharepairs_test.go).
	t.Run("SharePairs", func(t *testing.T) { testSharePairs(t, e) })
	t.Run("MissingCRD", func(t *testing.T) { testMissingCRD(t, e) })
	t.Run("RBAC", func(t *testing.T) { testRBAC(t, e) }) // last: it checks the calls of those before
}

// scenario is one test's corner of the cluster.
type scenario struct {
	*env
	t     *testing.T
	sched string // scheduler name
	nodes []string
}

func (e *env) scenario(t *testing.T, sched string, namespaces ...string) *scenario {
	s := &scenario{env: e, t: t, sched: sched}
	for _, ns := range namespaces {
		_, err := e.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.grantWorkers(t, ns)
	}
	t.Cleanup(func() {
		for _, n := range s.nodes {
			_ = e.cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	return s
}

// node registers a Ready node with GPUs of a type, 64 CPUs, 512 GiB and
// 110 pods, as a kubelet and NVIDIA's device plugin would, and clears
// the not-ready taint admission put on it (as the node lifecycle
// controller does once it sees the node Ready, a few seconds later).
func (s *scenario) node(name string, gpus int, typ string) {
	s.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": typ,
		"kubernetes.io/hostname": name}}}
	ctx := context.Background()
	if _, err := s.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.nodes = append(s.nodes, name)
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	s.nodeStatus(name, func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{kube.GPUResource: q, corev1.ResourcePods: resource.MustParse("110"),
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
		n.Status.Allocatable = n.Status.Capacity
	})
	s.setReady(name, true)
	s.editNode(name, func(n *corev1.Node) { n.Spec.Taints = nil })
}

// nodeStatus changes a node's status, retrying on conflicts with the
// node controllers.
func (s *scenario) nodeStatus(name string, edit func(*corev1.Node)) {
	s.t.Helper()
	s.updateNode(name, edit, s.cs.CoreV1().Nodes().UpdateStatus)
}

// editNode changes a node's spec (cordon, taints), retrying on conflicts
// with the node controllers.
func (s *scenario) editNode(name string, edit func(*corev1.Node)) {
	s.t.Helper()
	s.updateNode(name, edit, s.cs.CoreV1().Nodes().Update)
}

// updateNode reads a node, edits it and writes it with write, retrying on
// conflicts.
func (s *scenario) updateNode(name string, edit func(*corev1.Node), write func(context.Context, *corev1.Node, metav1.UpdateOptions) (*corev1.Node, error)) {
	s.t.Helper()
	for i := 0; ; i++ {
		n, err := s.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		edit(n)
		_, err = write(context.Background(), n, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 20 {
			s.t.Fatal(err)
		}
	}
}

// setReady sets a node's Ready condition, as its kubelet (or the node
// controller, for a node that stopped reporting) would.
func (s *scenario) setReady(name string, ready bool) {
	s.t.Helper()
	st, reason := corev1.ConditionTrue, "KubeletReady"
	if !ready {
		st, reason = corev1.ConditionFalse, "KubeletNotReady"
	}
	s.nodeStatus(name, func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: reason}}
	})
}

// start runs a tide scheduler until the scenario ends (or stop is called).
func (s *scenario) start(cfg kube.Config) (*kube.Scheduler, context.CancelFunc) {
	s.t.Helper()
	cfg.Client, cfg.Dynamic, cfg.SchedulerName = s.tideCS, s.tideDyn, s.sched
	if cfg.Grace == nil {
		zero := time.Duration(0)
		cfg.Grace = &zero
	}
	if cfg.Round == 0 {
		cfg.Round = 200 * time.Millisecond
	}
	cfg.Log = testLogger(s.t)
	sch, err := kube.New(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sch.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("scheduler: %v", err)
		}
	}
	var once bool
	s.t.Cleanup(func() {
		if !once {
			stop()
		}
	})
	return sch, func() { once = true; stop() }
}

// pod makes a pod for tide asking for gpus, with annotations in pairs.
func (s *scenario) pod(ns, name string, gpus int, annot ...string) *corev1.Pod {
	s.t.Helper()
	return s.podWith(ns, name, gpus, nil, annot...)
}

// pods lists a namespace's pods by name.
func (s *scenario) pods(ns string) map[string]*corev1.Pod {
	s.t.Helper()
	l, err := s.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// kubelet marks the namespaces' bound pending pods Running and Ready,
// and finishes deleting pods being deleted (their containers stopped).
func (s *scenario) kubelet(nss ...string) {
	for _, ns := range nss {
		for _, p := range s.pods(ns) {
			if p.DeletionTimestamp != nil {
				zero := int64(0)
				_ = s.cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				continue
			}
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending {
				continue
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			_, _ = s.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		}
	}
}

// end finishes pods as their containers exiting would.
func (s *scenario) end(ns string, phase corev1.PodPhase, names ...string) {
	s.t.Helper()
	for _, name := range names {
		// The kubelet loop and tide write the same pod's status: read it
		// again on a conflict, as a kubelet would.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := s.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = phase
			_, err = s.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			s.t.Fatal(err)
		}
	}
}

// checkCapacity fails when the live pods bound to a node ask for more GPUs
// than it has.
func (s *scenario) checkCapacity(capacity map[string]int, nss ...string) {
	s.t.Helper()
	used := map[string]int{}
	for _, ns := range nss {
		for _, p := range s.pods(ns) {
			if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				q := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]
				used[p.Spec.NodeName] += int(q.Value())
			}
		}
	}
	for n, u := range used {
		if c, ok := capacity[n]; ok && u > c {
			s.t.Errorf("node %s: pods hold %d GPUs, it has %d", n, u, c)
		}
	}
}

// bound lists the names of bound pods among names ("" entries for unbound).
func bound(pods map[string]*corev1.Pod, names ...string) []string {
	var out []string
	for _, n := range names {
		if p := pods[n]; p != nil && p.Spec.NodeName != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// eventually polls cond until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
