package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/kube"
)

// tideSA is the identity of tide's service account (deploy/rbac.yaml).
var tideSA = rest.ImpersonationConfig{UserName: "system:serviceaccount:tide-system:tide",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:tide-system", "system:authenticated"}}

// asTide is cfg acting as tide's service account, with only the rights
// deploy/rbac.yaml grants.
func asTide(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = tideSA
	return c
}

// electSpec is a scheduler process's leader election (schedSpec.Elect).
type electSpec struct {
	Namespace, Name, Identity                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (e *electSpec) run(ctx context.Context, s *kube.Scheduler, cfg *rest.Config) error {
	ec, err := kube.ElectionClient(cfg)
	if err != nil {
		return err
	}
	return s.RunElected(ctx, kube.Election{Client: ec, Namespace: e.Namespace, Name: e.Name, Identity: e.Identity,
		LeaseDuration: e.LeaseDuration, RenewDeadline: e.RenewDeadline, RetryPeriod: e.RetryPeriod})
}

// TestFailover runs two tide processes under leader election, as
// deploy/ does, against a backlog of 440 pods (280 single one-GPU pods and
// 20 gangs of 8) on 60 nodes of 8 GPUs, 16 CPUs and 64 GiB. The leader's
// client is slowed to 20 requests/s so the drain takes a while; when about
// 100 pods are bound the leader is killed (SIGKILL: no release, no
// goodbye), possibly in the middle of a gang. Then:
//
//   - the standby did nothing before it led: every bind seen after it
//     took the Lease is one of its successful binds, and none before;
//   - it took the Lease within the lease duration (plus retry periods and
//     slack for this loaded machine) of the kill;
//   - no bind of it failed (it never bound a pod already bound), and no
//     pod was seen bound twice;
//   - no node ever held more GPUs, CPU or memory than it has;
//   - every pod, all of them fitting, ends bound, each gang whole.
func TestFailover(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	const (
		nodes, singles, gangs, gangSize = 60, 280, 20, 8
		ns, sched                       = "failover", "tide-failover"
		killAt                          = 100
	)
	lease := electSpec{Namespace: "tide-system", Name: sched,
		LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{kube.GPUResource: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	parallel(nodes, func(i int) {
		if err := readyNode(ctx, e.cs, fmt.Sprintf("failover-%02d", i), alloc); err != nil {
			t.Error(err)
		}
	})
	total := singles + gangs*gangSize
	parallel(total, func(i int) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%03d", i)},
			Spec: corev1.PodSpec{SchedulerName: sched, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
					Limits:   corev1.ResourceList{kube.GPUResource: resource.MustParse("1")}}}}}}
		if i >= singles {
			g := (i - singles) / gangSize
			p.Annotations = map[string]string{kube.AnnotJob: fmt.Sprintf("g-%02d", g), kube.AnnotGangSize: strconv.Itoa(gangSize)}
		}
		if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		return
	}
	obs := observeBinds(t, e, ns, alloc)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(asTide(e.cfg), kubeconfig); err != nil {
		t.Fatal(err)
	}
	start := func(id string) *runningScheduler {
		el := lease
		el.Identity = id
		spec := schedSpec{Kind: "tide", Policy: "fifo", Name: sched, Kubeconfig: kubeconfig, QPS: 20, Burst: 20,
			Out: filepath.Join(t.TempDir(), id+".json"), Elect: &el}
		r, err := startScheduler(spec, filepath.Join(t.TempDir(), id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !r.exited() {
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		})
		return r
	}
	procs := map[string]*runningScheduler{"replica-a": start("replica-a"), "replica-b": start("replica-b")}
	holder := func() string {
		l, err := e.cs.CoordinationV1().Leases(lease.Namespace).Get(ctx, lease.Name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		n := obs.count()
		return n >= killAt, fmt.Sprintf("%d pods bound, waiting for %d (leader %q)", n, killAt, holder())
	})
	leader := holder()
	old, standbyID := procs[leader], ""
	for id := range procs {
		if id != leader {
			standbyID = id
		}
	}
	if old == nil || standbyID == "" {
		t.Fatalf("lease held by %q, want one of the replicas", leader)
	}
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-old.done
	seenAtKill := obs.count() // the old leader's binds, or fewer (the watch lags)
	// A bind the leader sent just before SIGKILL can still land, and the
	// watch lags the API server: let both settle before counting what the
	// old leader bound. The standby cannot take the Lease before it
	// expires (lease duration after the last renewal), so a short wait
	// well inside it still counts only the old leader's binds; if the
	// standby has the Lease already, the count is ambiguous and says so.
	time.Sleep(2 * time.Second)
	atKill := obs.count()
	settledBeforeTakeover := holder() != standbyID
	if atKill >= total {
		t.Fatalf("the drain ended (%d pods) before the leader was killed: nothing tested", atKill)
	}
	var tookOver time.Time
	limit := lease.LeaseDuration + 3*lease.RetryPeriod + 10*time.Second // slack for a loaded machine
	eventually(t, limit, func() (bool, string) {
		if h := holder(); h == standbyID {
			tookOver = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("lease still held by %q after the kill", holder())
	})
	beforeTakeover := obs.count()
	t.Logf("killed %s with %d of %d pods bound; %s took the lease %.1f s later (lease duration %v); %d bound by then",
		leader, atKill, total, standbyID, tookOver.Sub(killed).Seconds(), lease.LeaseDuration, beforeTakeover)
	eventually(t, 3*time.Minute, func() (bool, string) {
		n := obs.count()
		return n == total, fmt.Sprintf("%d of %d pods bound", n, total)
	})
	time.Sleep(time.Second) // a few more rounds: nothing may move
	standby := procs[standbyID]
	res, _, err := standby.stop()
	if err != nil {
		t.Fatalf("standby: %v\n%s", err, standby.logTail())
	}
	st := res.Stats
	if st.BindErrors != 0 {
		t.Errorf("standby: %d failed binds (a pod bound already?)\n%s", st.BindErrors, standby.logTail())
	}
	// The standby's binds are exactly the pods the old leader left unbound
	// (there is room for every pod, so nothing needs evicting). The count
	// at takeover is only logged: the standby may bind a few pods between
	// taking the Lease and this test seeing it.
	if st.Evicted != 0 {
		t.Errorf("standby evicted %d pods: want none", st.Evicted)
	}
	switch want := total - atKill; {
	case settledBeforeTakeover && st.Bound != want:
		t.Errorf("standby bound %d pods; the old leader had bound %d of %d: want %d binds", st.Bound, atKill, total, want)
	case !settledBeforeTakeover && st.Bound > total-seenAtKill:
		t.Errorf("standby bound %d pods, more than the %d left unbound when the leader died", st.Bound, total-seenAtKill)
	case !settledBeforeTakeover:
		t.Logf("the standby took the Lease within 2 s of the kill: its %d binds checked only against the %d seen unbound then", st.Bound, total-seenAtKill)
	}
	obs.check(t)
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perGang := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s unbound", p.Name)
		}
		if j := p.Annotations[kube.AnnotJob]; j != "" && p.Spec.NodeName != "" {
			perGang[j]++
		}
	}
	for g := 0; g < gangs; g++ {
		if n := perGang[fmt.Sprintf("g-%02d", g)]; n != gangSize {
			t.Errorf("gang g-%02d: %d of %d pods bound", g, n, gangSize)
		}
	}
}

// readyNode registers a Ready, untainted node with the given allocatable
// resources, as a kubelet and NVIDIA's device plugin would.
func readyNode(ctx context.Context, cs kubernetes.Interface, name string, alloc corev1.ResourceList) error {
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"nvidia.com/gpu.product": "a100", "kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status.Capacity = alloc
	n.Status.Allocatable = alloc
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	if n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if len(n.Spec.Taints) > 0 { // the not-ready taint admission added; no node controller clears it
		n.Spec.Taints = nil
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}
	return err
}

// bindObserver watches a namespace's pods and checks, at every event, that
// no node holds more GPUs, CPU or memory than it has and that no pod is
// bound twice.
type bindObserver struct {
	mu    sync.Mutex
	alloc corev1.ResourceList
	on    map[types.UID]string // pod -> node, once seen bound
	bound map[types.UID]bool   // pods bound now
	used  map[string]corev1.ResourceList
	errs  []string
}

func observeBinds(t *testing.T, e *env, ns string, alloc corev1.ResourceList) *bindObserver {
	o := &bindObserver{alloc: alloc, on: map[types.UID]string{}, bound: map[types.UID]bool{}, used: map[string]corev1.ResourceList{}}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	f := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(n any) { o.see(nil, n.(*corev1.Pod)) },
		UpdateFunc: func(old, n any) { o.see(old.(*corev1.Pod), n.(*corev1.Pod)) },
		DeleteFunc: func(old any) {
			if p, ok := old.(*corev1.Pod); ok {
				o.see(p, nil)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return o
}

// holds is what a pod holds on its node: GPUs (limit), CPU and memory
// (requests); nothing once it has ended or is unbound.
func holds(p *corev1.Pod) (node string, r corev1.ResourceList) {
	if p == nil || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", nil
	}
	r = corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for k, q := range c.Resources.Requests {
			if k != kube.GPUResource { // defaulted from the limit: counted below
				add(r, k, q)
			}
		}
		if q, ok := c.Resources.Limits[kube.GPUResource]; ok {
			add(r, kube.GPUResource, q)
		}
	}
	return p.Spec.NodeName, r
}

func add(r corev1.ResourceList, k corev1.ResourceName, q resource.Quantity) {
	sum := r[k]
	sum.Add(q)
	r[k] = sum
}

func (o *bindObserver) see(old, cur *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n, r := holds(old); n != "" {
		for k, q := range r {
			u := o.used[n][k]
			u.Sub(q)
			o.used[n][k] = u
		}
	}
	if cur == nil {
		delete(o.bound, old.UID)
		return
	}
	if cur.Spec.NodeName != "" {
		if prev, ok := o.on[cur.UID]; ok && prev != cur.Spec.NodeName {
			o.errs = append(o.errs, fmt.Sprintf("pod %s bound twice: to %s, then to %s", cur.Name, prev, cur.Spec.NodeName))
		}
		o.on[cur.UID] = cur.Spec.NodeName
		o.bound[cur.UID] = true
	}
	if n, r := holds(cur); n != "" {
		if o.used[n] == nil {
			o.used[n] = corev1.ResourceList{}
		}
		for k, q := range r {
			add(o.used[n], k, q)
			if u, c := o.used[n][k], o.alloc[k]; !c.IsZero() && u.Cmp(c) > 0 {
				o.errs = append(o.errs, fmt.Sprintf("node %s: pods hold %s of %s, it has %s", n, u.String(), k, c.String()))
			}
		}
	}
}

func (o *bindObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.bound)
}

func (o *bindObserver) check(t *testing.T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, e := range o.errs {
		if i == 20 {
			t.Errorf("... and %d more", len(o.errs)-20)
			break
		}
		t.Error(e)
	}
}

// grantWorkers lets tide create TideJob workers in ns, as an operator
// does for each namespace that holds TideJobs (deploy/rbac.yaml).
func (e *env) grantWorkers(t testing.TB, ns string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tide-workers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tide-workers"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tide", Namespace: "tide-system"}}}
	if _, err := e.cs.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("granting tide worker creation in %s: %v", ns, err)
	}
}
