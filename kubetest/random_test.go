package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/kube/randsearch"
)

// TestKubeRandom is kube's random operations search (kube/random_ops_test.go)
// against the real API server: per seed a tide scheduler runs as in
// production (its informers, its own rounds, its API calls) while the
// test applies random operations through client-go, plays the kubelets
// and the garbage collector, and checks after every step, once tide has
// settled (its caches hold the step's writes and a round since made no
// change), what must hold whatever the policy decides:
//
//   - no pod tide bound this step is on a node it cannot run on in any state
//     the node had during the step: gone, NotReady, cordoned, a NoSchedule
//     or NoExecute taint it does not tolerate, its nodeSelector, required
//     affinity or GPU type failed;
//   - a node that took a pod this step has room for every live pod bound
//     to it, terminating ones included (GPUs, the distinct GPU indices
//     parts hold, each index's parts at most one GPU, CPU, memory, pods);
//   - a gang (or a TideJob's minimum) is bound whole, on one GPU type and
//     site (an edge site: one server), never in part for more than
//     rPartialSteps steps, and a TideJob has at most maxWorkers bound;
//   - tide logs no error more than a few times, and does not panic;
//   - at the end, churn stopped and everything bound finishing in waves,
//     every pending job that fits on the empty usable nodes is bound,
//     unless its policy declined it.
//
// What the in-memory search cannot reach is here: informer lag, conflicts
// on tide's writes, binds of pods deleted or bound meanwhile, pods that
// stay Terminating (grace periods; no kubelet on a NotReady or deleted
// node), deleted nodes whose pods stay bound (no pod garbage collector),
// nodes re-registered under a name pods are still bound to, evictions
// through the API, TideJobs through the CRD and their status subresource.
//
// The operations of a seed draw only on the seed's generator and the
// test's own record, but what tide does meanwhile may differ with timing,
// and so may the names of a TideJob's workers (the API server draws them):
// an operation that picks one of them can pick another worker in another
// run, and the steps after it differ. TIDE_KUBETEST_RANDOM_SEEDS ("5":
// seed 5 alone, or "300-340")
// and TIDE_KUBETEST_RANDOM_STEPS search more; TIDE_KUBETEST_RANDOM_LOG=1
// prints a failing seed's whole operation log and tide's log, not their
// tails (TIDE_KUBETEST_RANDOM_DEBUG=1: tide's debug log too);
// TIDE_KUBETEST_RANDOM_KCM=1 runs kube-controller-manager's
// garbage collector, node lifecycle, taint eviction and pod GC beside.
func TestKubeRandom(t *testing.T) {
	first, last := int64(1), int64(3)
	steps := 40
	if s := os.Getenv("TIDE_KUBETEST_RANDOM_SEEDS"); s != "" {
		a, b, ok := strings.Cut(s, "-")
		var err error
		if ok {
			if first, err = strconv.ParseInt(a, 10, 64); err == nil {
				last, err = strconv.ParseInt(b, 10, 64)
			}
		} else if first, err = strconv.ParseInt(a, 10, 64); err == nil {
			last = first
		}
		if err != nil || last < first {
			t.Fatalf("TIDE_KUBETEST_RANDOM_SEEDS=%q: want N or A-B", s)
		}
	}
	if s := os.Getenv("TIDE_KUBETEST_RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TIDE_KUBETEST_RANDOM_STEPS=%q: want a positive number", s)
		}
		steps = n
	}
	e := startEnv(t)
	kcm := os.Getenv("TIDE_KUBETEST_RANDOM_KCM") != ""
	if kcm {
		e.startControllers(t)
	}
	for _, prio := range []int32{100, 200} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rnd-%d", prio)}, Value: prio}
		if _, err := e.cs.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for seed := first; seed <= last; seed++ {
		policy := rPolicies[int(seed)%len(rPolicies)]
		t.Run(fmt.Sprintf("seed=%d/%s", seed, policy), func(t *testing.T) {
			runKubeRandom(t, e, seed, policy, steps, kcm)
		})
	}
}

// rPolicies are the policies the search runs, one per seed in turn (those
// needing GLPK, or a distribution of GPU times, left out).
var rPolicies = []string{"fifo", "srtf", "tiresias", "edf", "drf", "themis", "gandiva", "gavel-fifo",
	"elasticflow", "edgeflow", "tidal", "fifo:backfill=true", "gandiva-fair", "fifo-perf",
	"allox", "afs", "optimus", "pollux", "deepboot", "aryl", "chronus"}

// rElastic are the policies that run jobs on whole GPUs only.
var rElastic = map[string]bool{"afs": true, "aryl": true, "deepboot": true, "edgeflow": true, "elasticflow": true,
	"optimus": true, "pollux": true, "tidal": true}

const (
	rPartialSteps = 3 // settled steps a gang may stay bound in part
	rFenceAnnot   = "tide-sched.io/random-fence"
	rMaxPasses    = 12 // settle passes per step before checking anyway
)

// rjob is a job the test submitted: all its pods ask the same.
type rjob struct {
	name                   string
	size                   int  // gang size (a TideJob's minWorkers)
	maxW                   int  // a TideJob's maxWorkers
	gang                   bool // annotated as a job
	tide                   bool // a TideJob: tide makes its workers
	gpus                   int  // whole GPUs per pod (0: a part)
	share                  float64
	prio                   int32
	dur                    time.Duration
	randsearch.Constraints // what each pod asks beyond its GPUs
	made                   int
	done                   bool // a pod ended on its own, or the TideJob was deleted
	failed                 bool // a pod failed on its own
	gone                   bool // a TideJob deleted
	partial                int  // settled steps in a row bound in part
	failedFor              int  // steps a failed TideJob kept live workers
	rejects                int  // a TideJob's workers its kubelets rejected
	rejectedAt             time.Time
}

// backingOff: j is a TideJob whose workers tide may not make again yet
// after its last rejected one (kube's backoff: 1 s, doubling, on the wall
// clock), with a second for its rounds.
func (j *rjob) backingOff() bool {
	return j.tide && j.rejects > 0 && time.Since(j.rejectedAt) < time.Second<<min(j.rejects-1, 8)+time.Second
}

// rclock is the engine's clock: the wall clock, moved on by the test (10 s
// a step, more in quiet) so that policies deciding every few minutes do.
type rclock struct{ off atomic.Int64 }

func (c *rclock) Now() float64 {
	return float64(time.Now().Add(time.Duration(c.off.Load())).UnixNano()) / 1e9
}
func (c *rclock) time() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *rclock) move(d time.Duration) { c.off.Add(int64(d)) }

// rlog keeps tide's log lines and counts its errors.
type rlog struct {
	mu     sync.Mutex
	lines  []string
	errs   map[string]int // error message -> count
	stderr bool
}

func (l *rlog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSpace(string(b))
	l.lines = append(l.lines, s)
	if len(l.lines) > 4000 {
		l.lines = append([]string(nil), l.lines[2000:]...)
	}
	if strings.Contains(s, "level=ERROR") {
		msg := s
		if i := strings.Index(s, "msg="); i >= 0 {
			msg = s[i:]
		}
		l.errs[msg]++
	}
	if l.stderr {
		os.Stderr.Write(append(bytes.TrimSpace(b), '\n'))
	}
	return len(b), nil
}

type krand struct {
	t         *testing.T
	e         *env
	rng       *rand.Rand
	seed      int64
	policy    string
	ns, sched string
	fence     string // the fence pod's and node's name
	fenceN    int
	clock     *rclock
	sch       *kube.Scheduler
	tlog      *rlog
	panicked  atomic.Value // string
	log       []string
	step      int
	kcm       bool
	tideJobs  bool
	sites     bool
	noEdge    bool
	oneType   string
	nodes     []string                  // every node the test made, in order
	alive     map[string]bool           // nodes that exist now
	snaps     map[string][]*corev1.Node // each node's states this step (nil: gone)
	jobs      map[string]*rjob          // by name
	podJob    map[string]*rjob          // plain pod -> its job
	boundAt   map[types.UID]string      // pods bound at the last check
	termSince map[types.UID]int         // terminating pod -> step the kubelet first saw it so
	touched   map[string]bool           // jobs an operation touched this step
	notReady  map[string]time.Time      // NotReady node -> when the test made it so
	seenNR    map[string]time.Time      // NotReady node -> a settled check by which tide's rounds had seen it so
	nextJob   int
	cfg       kube.Config
	stopTide  func()
}

func runKubeRandom(t *testing.T, e *env, seed int64, policy string, steps int, kcm bool) {
	rng := rand.New(rand.NewSource(seed))
	k := &krand{t: t, e: e, rng: rng, seed: seed, policy: policy, kcm: kcm,
		ns: fmt.Sprintf("rnd-%d", seed), sched: fmt.Sprintf("tide-rnd-%d", seed), fence: fmt.Sprintf("rnd%d-fence", seed),
		clock: &rclock{}, alive: map[string]bool{}, snaps: map[string][]*corev1.Node{}, jobs: map[string]*rjob{},
		podJob: map[string]*rjob{}, notReady: map[string]time.Time{}, seenNR: map[string]time.Time{}, boundAt: map[types.UID]string{}, termSince: map[types.UID]int{},
		tlog: &rlog{errs: map[string]int{}, stderr: os.Getenv("TIDE_KUBETEST_LOG") != ""}}
	k.sites = rng.Intn(3) == 0
	k.tideJobs = rng.Intn(2) == 0
	// ElasticFlow and EdgeFlow plan a homogeneous cloud (flow.cloudOf);
	// Pollux's searches know no sites; Tidal keeps jobs without a deadline
	// off edge servers (as kube/random_ops_test.go).
	if p := strings.Split(policy, ":")[0]; p == "elasticflow" || p == "edgeflow" {
		k.oneType, k.sites = []string{"V100", "A100"}[rng.Intn(2)], false
	}
	if strings.HasPrefix(policy, "pollux") {
		k.sites = false
	}
	k.noEdge = strings.HasPrefix(policy, "tidal")
	grace := time.Duration(0)
	if rng.Intn(2) == 0 {
		grace = 30 * time.Second // evicted pods terminate until the kubelet is done with them
	}
	notReady := []time.Duration{time.Second, 3 * time.Second, kube.DefaultNotReadyGrace}[rng.Intn(3)]
	k.logf("seed %d: policy %s, sites %v, tidejobs %v, one type %q, eviction grace %s, NotReady grace %s, kcm %v",
		seed, policy, k.sites, k.tideJobs, k.oneType, grace, notReady, kcm)
	k.setup()
	level := slog.LevelInfo
	if os.Getenv("TIDE_KUBETEST_RANDOM_DEBUG") != "" {
		level = slog.LevelDebug
	}
	k.cfg = kube.Config{Client: e.tideCS, Dynamic: e.tideDyn, SchedulerName: k.sched, Policy: policy, Clock: k.clock,
		Grace: &grace, NotReadyGrace: notReady, Round: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(k.tlog, &slog.HandlerOptions{Level: level})).With("seed", seed)}
	k.startTide()
	t.Cleanup(k.teardown)
	for i := 0; i < 2+rng.Intn(3); i++ {
		k.addNode()
	}
	carry := false
	for k.step = 0; k.step < steps; k.step++ {
		if !carry {
			k.beginStep()
		}
		for i := 0; i < 1+rng.Intn(3); i++ {
			// Half the time tide's round on the last operation is under
			// way when the next comes (binds of pods just deleted).
			if d := rng.Intn(60); i > 0 && d < 30 {
				time.Sleep(time.Duration(d) * time.Millisecond)
			}
			k.operate()
		}
		// Now and then the next step's operations come while tide is at
		// work on these (binding pods being deleted, evicting pods gone,
		// writing status beside other writers): checked together.
		if carry = rng.Intn(4) == 0 && k.step < steps-1; carry {
			continue
		}
		k.settle()
		k.check()
		k.clock.move(10 * time.Second)
	}
	k.quiet()
	k.checkLog()
	st := k.sch.Stats()
	t.Logf("seed %d, %s: %d steps, %d jobs; tide: %d rounds, %d bound (%d failed binds), %d evicted (%d lost), %d workers made",
		seed, policy, k.step, len(k.jobs), st.Rounds, st.Bound, st.BindErrors, st.Evicted, st.Lost, st.Created)
}

// startTide starts a tide scheduler, as a process of its own would be.
func (k *krand) startTide() {
	sch, err := kube.New(k.cfg)
	if err != nil {
		k.t.Fatal(err)
	}
	k.sch = sch
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var once sync.Once
	k.stopTide = func() {
		var err error
		once.Do(func() { cancel(); err = <-done })
		// Stopped before its caches synced, it says so: not a failure.
		if err != nil && !errors.Is(err, context.Canceled) {
			k.fail("tide: %v", err)
		}
	}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				k.panicked.Store(fmt.Sprintf("%v\n%s", r, debug.Stack()))
				done <- nil
			}
		}()
		done <- sch.Run(ctx)
	}()
}

// setup makes the seed's namespace and fences: a pod no scheduler binds
// and a node with no GPUs, whose annotations tell when tide's caches hold
// the test's earlier writes (kube.Scheduler.Cached).
func (k *krand) setup() {
	ctx := context.Background()
	if _, err := k.e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns}}, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
	k.e.grantWorkers(k.t, k.ns)
	meta := metav1.ObjectMeta{Name: k.fence, Namespace: k.ns, Annotations: map[string]string{rFenceAnnot: "0"}}
	if _, err := k.e.cs.CoreV1().Pods(k.ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{SchedulerName: "rnd-fence",
		Containers: []corev1.Container{{Name: "fence", Image: "none"}}}}, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
	meta.Namespace = ""
	if _, err := k.e.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: meta}, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// teardown stops tide and removes what the seed made: no namespace
// controller runs, so pods go one by one.
func (k *krand) teardown() {
	k.stopTide()
	ctx := context.Background()
	zero := int64(0)
	if k.tideJobs {
		_ = k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	_ = k.e.cs.CoreV1().Pods(k.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	for _, n := range append(k.nodes, k.fence) {
		_ = k.e.cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
	}
	_ = k.e.cs.CoreV1().Namespaces().Delete(ctx, k.ns, metav1.DeleteOptions{})
}

func (k *krand) logf(format string, args ...any) {
	k.log = append(k.log, fmt.Sprintf("%d: ", k.step)+fmt.Sprintf(format, args...))
}

// fail ends the seed naming it, the step and the operations before.
func (k *krand) fail(format string, args ...any) {
	k.t.Helper()
	tail, tl := k.log, k.tideLog()
	if os.Getenv("TIDE_KUBETEST_RANDOM_LOG") == "" {
		if len(tail) > 60 {
			tail = tail[len(tail)-60:]
		}
		if len(tl) > 40 {
			tl = tl[len(tl)-40:]
		}
	}
	k.t.Fatalf("seed %d, policy %s, step %d: %s\nlast operations:\n  %s\ntide's log (TIDE_KUBETEST_RANDOM_LOG=1: all):\n  %s\nrerun: TIDE_KUBETEST_RANDOM_SEEDS=%d TIDE_KUBETEST_RANDOM_STEPS=%d go test -vet=off -run TestKubeRandom -count=1 .",
		k.seed, k.policy, k.step, fmt.Sprintf(format, args...), strings.Join(tail, "\n  "), strings.Join(tl, "\n  "), k.seed, k.stepsArg())
}

func (k *krand) stepsArg() int {
	if n, err := strconv.Atoi(os.Getenv("TIDE_KUBETEST_RANDOM_STEPS")); err == nil {
		return n
	}
	return 40
}

func (k *krand) tideLog() []string {
	k.tlog.mu.Lock()
	defer k.tlog.mu.Unlock()
	return append([]string(nil), k.tlog.lines...)
}

// pick returns a random element of keys, sorted ("" when none). It draws
// once whatever keys holds: the seed's draws are the same every run even
// where what there is to pick from depends on what tide did.
func (k *krand) pick(keys []string) string {
	r := k.rng.Intn(1 << 30)
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return keys[r%len(keys)]
}

// hash is a number of the seed and name, for what the kubelets do: they
// act on what tide did, so they must not draw on the seed's generator.
func (k *krand) hash(name string) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%s", k.seed, name)
	return int(h.Sum32() >> 1)
}

func (k *krand) aliveNodes() []string {
	var out []string
	for _, n := range k.nodes {
		if k.alive[n] {
			out = append(out, n)
		}
	}
	return out
}

func (k *krand) liveJobs(keep func(*rjob) bool) []string {
	var out []string
	for name, j := range k.jobs {
		if !j.done && keep(j) {
			out = append(out, name)
		}
	}
	return out
}

// beginStep notes each node's state before the step's operations.
func (k *krand) beginStep() {
	k.snaps, k.touched = map[string][]*corev1.Node{}, map[string]bool{}
	for _, n := range k.serverNodes() {
		k.snaps[n.Name] = []*corev1.Node{n}
	}
}

// serverNodes lists the test's nodes as the API server holds them.
func (k *krand) serverNodes() map[string]*corev1.Node {
	l, err := k.e.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	out := map[string]*corev1.Node{}
	for i := range l.Items {
		if n := &l.Items[i]; strings.HasPrefix(n.Name, fmt.Sprintf("rnd%d-n", k.seed)) {
			out[n.Name] = n
		}
	}
	return out
}

// serverPods lists the seed's pods (the fence left out).
func (k *krand) serverPods() []*corev1.Pod {
	l, err := k.e.cs.CoreV1().Pods(k.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range l.Items {
		if l.Items[i].Name != k.fence {
			out = append(out, &l.Items[i])
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

func ended(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// running: p holds room on its node (bound, not ended; terminating or not).
func running(p *corev1.Pod) bool { return p.Spec.NodeName != "" && !ended(p) }

// jobOf is the job a pod of the seed belongs to.
func (k *krand) jobOf(p *corev1.Pod) *rjob {
	if name := p.Labels[kube.LabelTideJob]; name != "" {
		return k.jobs[name]
	}
	return k.podJob[p.Name]
}

// jobPods are j's pods on the API server.
func (k *krand) jobPods(j *rjob, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if k.jobOf(p) == j {
			out = append(out, p)
		}
	}
	return out
}

// operate applies one random operation.
func (k *krand) operate() {
	r := k.rng.Intn(100)
	switch {
	case r < 7:
		if len(k.aliveNodes()) < 8 || k.rng.Intn(4) == 0 {
			k.addNode()
		}
	case r < 11:
		k.editNode("cordon", false, randsearch.ToggleCordon)
	case r < 15:
		k.editNode("taint", false, func(n *corev1.Node) string { return randsearch.ToggleTaint(k.rng, n) })
	case r < 17:
		// No pod garbage collector: its pods stay bound to the name.
		if name := k.pick(k.aliveNodes()); name != "" {
			if err := k.e.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				k.t.Fatal(err)
			}
			k.alive[name] = false
			k.snaps[name] = append(k.snaps[name], nil)
			delete(k.notReady, name)
			k.logf("delete node %s", name)
		}
	case r < 18:
		// Its kubelet registers it again: the pods still bound to it are
		// its own.
		var gone []string
		for _, n := range k.nodes {
			if !k.alive[n] {
				gone = append(gone, n)
			}
		}
		if name := k.pick(gone); name != "" {
			k.makeNode(name)
		}
	case r < 21:
		k.editNode("gpus", true, func(n *corev1.Node) string {
			g := resource.NewQuantity(int64(k.rng.Intn(9)), resource.DecimalSI)
			n.Status.Allocatable[kube.GPUResource], n.Status.Capacity[kube.GPUResource] = *g, *g
			return fmt.Sprintf("%s GPUs", g)
		})
	case r < 24:
		k.editNode("ready", true, func(n *corev1.Node) string {
			c := &n.Status.Conditions[0]
			if c.Status == corev1.ConditionTrue {
				c.Status, c.Reason = corev1.ConditionFalse, "KubeletNotReady"
			} else {
				c.Status, c.Reason = corev1.ConditionTrue, "KubeletReady"
			}
			c.LastTransitionTime = metav1.Now()
			return fmt.Sprintf("Ready=%s", c.Status)
		})
	case r < 25:
		k.editNode("pool", false, func(n *corev1.Node) string { return randsearch.Repool(k.rng, n) })
	case r < 26:
		k.drain()
	case r < 41:
		if k.tideJobs && k.rng.Intn(3) == 0 {
			k.submitTideJob()
		} else {
			k.submit()
		}
	case r < 45:
		k.remake()
	case r < 57:
		k.finishJob()
	case r < 62:
		k.finishPod()
	case r < 69:
		k.userDelete()
	case r < 73:
		k.collect()
	case r < 75:
		k.clock.move(5 * time.Minute)
		k.logf("clock +5m")
	case r < 78:
		if k.tideJobs {
			k.deleteTideJob()
		}
	case r < 80:
		if k.tideJobs {
			k.editTideJob()
		}
	case r < 81:
		// A new tide process (a crash, an upgrade) rebuilds what it
		// knows from the API server alone.
		k.stopTide()
		k.startTide()
		k.logf("tide restarted")
	}
}

func (k *krand) addNode() {
	name := fmt.Sprintf("rnd%d-n%d", k.seed, len(k.nodes))
	k.nodes = append(k.nodes, name)
	k.makeNode(name)
}

// makeNode registers a node as its kubelet and device plugin would (a
// create, then its status), clears the not-ready taint admission put on
// it, as the node lifecycle controller does, and gives it random taints.
func (k *krand) makeNode(name string) {
	n := randsearch.NewNode(k.rng, name, k.nodeType(), k.sites, k.noEdge)
	alloc, taints := n.Status.Allocatable, n.Spec.Taints
	n.Status, n.Spec = corev1.NodeStatus{}, corev1.NodeSpec{}
	ctx := context.Background()
	got, err := k.e.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	k.alive[name] = true
	k.snaps[name] = append(k.snaps[name], got)
	k.update(name, true, func(n *corev1.Node) {
		n.Status.Capacity, n.Status.Allocatable = alloc, alloc
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	})
	k.update(name, false, func(n *corev1.Node) { n.Spec.Taints = taints })
	k.logf("add node %s: %s GPUs %s, cpu %s, mem %s, pods %d, labels %v, taints %v", name,
		alloc.Name(kube.GPUResource, resource.DecimalSI), n.Labels[randsearch.TypeLabel], alloc.Cpu(), alloc.Memory(), alloc.Pods().Value(), n.Labels, taints)
}

func (k *krand) nodeType() string {
	if k.oneType != "" {
		return k.oneType
	}
	return []string{"V100", "A100"}[k.rng.Intn(2)]
}

// update writes a change to a node's status or spec, retrying on
// conflicts, and notes the node's new state.
func (k *krand) update(name string, status bool, edit func(*corev1.Node)) {
	nodes := k.e.cs.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(n)
		write := nodes.Update
		if status {
			write = nodes.UpdateStatus
		}
		got, err := write(context.Background(), n, metav1.UpdateOptions{})
		if err == nil {
			k.snaps[name] = append(k.snaps[name], got)
			if _, was := k.notReady[name]; randsearch.NodeReady(got) {
				delete(k.notReady, name)
			} else if !was {
				k.notReady[name] = time.Now()
			}
		}
		return err
	})
	if err != nil {
		k.t.Fatalf("node %s: %v", name, err)
	}
}

// editNode changes a random live node; edit says what it did (it runs
// once, its choice kept on a conflict's retry).
func (k *krand) editNode(what string, status bool, edit func(*corev1.Node) string) {
	name := k.pick(k.aliveNodes())
	if name == "" {
		return
	}
	var said string
	var after *corev1.Node
	k.update(name, status, func(n *corev1.Node) {
		if after == nil {
			said = edit(n)
			after = n.DeepCopy()
			return
		}
		// A retry makes the same change to the node read again (edit
		// draws on the seed's generator once).
		if status {
			n.Status.Allocatable, n.Status.Capacity, n.Status.Conditions = after.Status.Allocatable, after.Status.Capacity, after.Status.Conditions
		} else {
			n.Spec, n.Labels = after.Spec, after.Labels
		}
	})
	k.logf("node %s: %s: %s", name, what, said)
}

// drain cordons a node and evicts its pods through the Eviction API, as
// kubectl drain does.
func (k *krand) drain() {
	name := k.pick(k.aliveNodes())
	if name == "" {
		return
	}
	k.update(name, false, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	var evicted []string
	for _, p := range k.serverPods() {
		if p.Spec.NodeName != name || ended(p) || p.DeletionTimestamp != nil {
			continue
		}
		err := k.e.cs.PolicyV1().Evictions(k.ns).Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: p.Name}})
		if err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatalf("evicting %s: %v", p.Name, err)
		}
		if j := k.jobOf(p); j != nil {
			k.touched[j.name] = true
		}
		evicted = append(evicted, p.Name)
	}
	k.logf("drain node %s: evicted %v", name, evicted)
}

// submit makes a job of plain pods and some or all of them.
func (k *krand) submit() {
	rng := k.rng
	d := randsearch.DrawPodJob(rng)
	j := &rjob{name: fmt.Sprintf("j%d", k.nextJob), size: d.Size, gang: d.Gang, gpus: d.GPUs, share: d.Share, prio: d.Prio, dur: d.Dur}
	k.nextJob++
	j.Constraints = randsearch.Draw(rng, true)
	k.jobs[j.name] = j
	n := j.size
	if j.size > 1 && rng.Intn(4) == 0 {
		n = 1 + rng.Intn(j.size-1) // the rest come later (remake)
	}
	k.logf("submit %s: %d pods (%d now) of %d GPUs/share %g, cpu %dm, mem %dGi, type %q, pool %q in %q notIn %q, tol ded=%v maint=%v all=%v, prio %d, dur %s, deadline %s",
		j.name, j.size, n, j.gpus, j.share, j.CPU, j.Mem>>30, j.Type, j.Pool, j.In, j.NotIn, j.TolDed, j.TolMaint, j.TolAll, j.prio, j.dur, j.Deadline)
	for i := 0; i < n; i++ {
		k.makePod(j)
	}
}

// podSpec is what every pod of j asks (a TideJob's template: tide adds
// the GPUs and the part).
func (k *krand) podSpec(j *rjob) corev1.PodSpec {
	spec := corev1.PodSpec{SchedulerName: k.sched, Containers: []corev1.Container{{Name: "c", Image: "trainer"}}}
	if j.prio > 0 {
		spec.PriorityClassName = fmt.Sprintf("rnd-%d", j.prio)
	}
	res := &spec.Containers[0].Resources
	res.Limits, res.Requests = corev1.ResourceList{}, corev1.ResourceList{}
	if j.gpus > 0 && !j.tide {
		res.Limits[kube.GPUResource] = *resource.NewQuantity(int64(j.gpus), resource.DecimalSI)
	}
	c := j.Constraints
	if j.tide {
		c.Type = "" // the TideJob's GPUType
	}
	c.Apply(&spec)
	return spec
}

func (k *krand) makePod(j *rjob) {
	name := fmt.Sprintf("%s-%d", j.name, j.made)
	j.made++
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name, Annotations: map[string]string{kube.AnnotDuration: j.dur.String()}},
		Spec: k.podSpec(j)}
	if j.share > 0 {
		p.Annotations[kube.AnnotGPUFraction] = strconv.FormatFloat(j.share, 'g', -1, 64)
	}
	if j.gang {
		p.Annotations[kube.AnnotJob] = j.name
		p.Annotations[kube.AnnotGangSize] = strconv.Itoa(j.size)
	}
	if j.Deadline > 0 {
		p.Annotations[kube.AnnotDeadline] = k.clock.time().Add(j.Deadline).Format(time.RFC3339)
	}
	if _, err := k.e.cs.CoreV1().Pods(k.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		k.t.Fatalf("creating pod %s: %v", name, err)
	}
	k.podJob[name] = j
	k.touched[j.name] = true
}

func (k *krand) submitTideJob() {
	rng := k.rng
	j := &rjob{name: fmt.Sprintf("j%d", k.nextJob), tide: true, gang: true, size: 1 + rng.Intn(3), prio: int32(rng.Intn(3) * 100),
		dur: time.Duration(1+rng.Intn(30)) * 10 * time.Minute}
	k.nextJob++
	j.maxW = j.size
	if rng.Intn(2) == 0 {
		j.maxW += 1 + rng.Intn(3)
	}
	if rng.Intn(6) == 0 {
		j.share, j.maxW = []float64{0.25, 0.5}[rng.Intn(2)], j.size
	} else {
		j.gpus = []int{1, 1, 2, 4}[rng.Intn(4)]
	}
	j.Constraints = randsearch.Draw(rng, false)
	k.jobs[j.name] = j
	spec := kube.TideJobSpec{MinWorkers: j.size, MaxWorkers: j.maxW, GPUsPerWorker: max(j.gpus, 1), GPUType: j.Type,
		Priority: int(j.prio), Duration: j.dur.String(), Template: corev1.PodTemplateSpec{Spec: k.podSpec(j)}}
	spec.Template.Spec.PriorityClassName = ""
	if j.share > 0 {
		spec.GPUFraction = fmt.Sprint(j.share)
	}
	if j.Deadline > 0 {
		d := metav1.NewTime(k.clock.time().Add(j.Deadline))
		spec.Deadline = &d
	}
	tj := &kube.TideJob{TypeMeta: metav1.TypeMeta{APIVersion: kube.Group + "/" + kube.Version, Kind: "TideJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: j.name}, Spec: spec}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		k.t.Fatalf("creating tidejob %s: %v", j.name, err)
	}
	k.touched[j.name] = true
	k.logf("submit tidejob %s: %d..%d workers of %d GPUs/share %g type %q, cpu %dm, mem %dGi, pool %q notIn %q, tol ded=%v maint=%v, prio %d, dur %s, deadline %s",
		j.name, j.size, j.maxW, j.gpus, j.share, j.Type, j.CPU, j.Mem>>30, j.Pool, j.NotIn, j.TolDed, j.TolMaint, j.prio, j.dur, j.Deadline)
}

// deleteTideJob deletes a TideJob and, as the garbage collector would,
// its workers (gracefully: bound ones terminate until their kubelet is
// done).
func (k *krand) deleteTideJob() {
	name := k.pick(k.liveJobs(func(j *rjob) bool { return j.tide }))
	if name == "" {
		return
	}
	j := k.jobs[name]
	if err := k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatal(err)
	}
	j.done, j.gone = true, true
	k.touched[name] = true
	var gone []string
	for _, p := range k.jobPods(j, k.serverPods()) {
		if err := k.e.cs.CoreV1().Pods(k.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatal(err)
		}
		gone = append(gone, p.Name)
	}
	k.logf("delete tidejob %s, its workers %v", name, gone)
}

// editTideJob changes a TideJob's spec (maxWorkers, priority) while tide
// writes its status.
func (k *krand) editTideJob() {
	name := k.pick(k.liveJobs(func(j *rjob) bool { return j.tide }))
	more, prio := k.rng.Intn(3), int32(k.rng.Intn(3)*100)
	if name == "" {
		return
	}
	j := k.jobs[name]
	j.maxW, j.prio = j.size+more, prio
	if j.share > 0 {
		j.maxW = j.size
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"maxWorkers":%d,"priority":%d}}`, j.maxW, j.prio))
	if _, err := k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		k.t.Fatalf("editing tidejob %s: %v", name, err)
	}
	k.touched[name] = true
	k.logf("tidejob %s: maxWorkers %d, priority %d", name, j.maxW, j.prio)
}

// remake gives a gang short of live pods another, as its controller would.
func (k *krand) remake() {
	pods := k.serverPods()
	name := k.pick(k.liveJobs(func(j *rjob) bool {
		return j.gang && !j.tide && len(k.livePods(j, pods)) < j.size
	}))
	if name == "" {
		return
	}
	j := k.jobs[name]
	k.makePod(j)
	k.logf("remake a pod of %s: %s-%d", name, name, j.made-1)
}

// livePods are j's pods neither ended nor being deleted.
func (k *krand) livePods(j *rjob, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range k.jobPods(j, pods) {
		if !ended(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// finishJob ends every live bound pod of a job, as their containers
// exiting would (the job is picked among those not ended; one with no
// pod bound is left alone).
func (k *krand) finishJob() {
	name := k.pick(k.liveJobs(func(*rjob) bool { return true }))
	if name == "" {
		return
	}
	var names []string
	for _, p := range k.livePods(k.jobs[name], k.serverPods()) {
		if p.Spec.NodeName != "" {
			k.setPhase(p.Name, corev1.PodSucceeded, "")
			names = append(names, p.Name)
		}
	}
	k.logf("job %s: pods %v Succeeded", name, names)
}

// finishPod ends one live bound pod, succeeded or failed.
func (k *krand) finishPod() {
	phase, reason := corev1.PodSucceeded, ""
	switch k.rng.Intn(4) {
	case 0:
		phase = corev1.PodFailed
	case 1:
		phase, reason = corev1.PodFailed, "OutOfnvidia.com/gpu"
	}
	// Picked among the live bound pods' jobs, then the job's first such
	// pod, so that the choice draws alike whatever tide bound.
	pods := k.serverPods()
	name := k.pick(k.liveJobs(func(*rjob) bool { return true }))
	if name == "" {
		return
	}
	for _, p := range k.livePods(k.jobs[name], pods) {
		if p.Spec.NodeName != "" {
			k.setPhase(p.Name, phase, reason)
			k.logf("pod %s %s %s", p.Name, phase, reason)
			return
		}
	}
	k.logf("job %s: no pod bound to end", name)
}

// setPhase ends a pod as its kubelet would.
func (k *krand) setPhase(name string, phase corev1.PodPhase, reason string) {
	var p *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		p, err = k.e.cs.CoreV1().Pods(k.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase, p.Status.Reason = phase, reason
		_, err = k.e.cs.CoreV1().Pods(k.ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		k.t.Fatalf("pod %s %s: %v", name, phase, err)
	}
	j := k.jobOf(p)
	if j == nil {
		return
	}
	k.touched[j.name] = true
	// A pod the kubelet rejected failed of tide's placement, not on its own.
	if phase == corev1.PodFailed && reason != "" {
		j.rejects++
		j.rejectedAt = time.Now()
	}
	if phase == corev1.PodSucceeded || reason == "" {
		j.done = true
		j.failed = j.failed || phase == corev1.PodFailed
	}
}

// userDelete deletes a live pod, at once or with a grace period.
func (k *krand) userDelete() {
	name := k.pick(k.liveJobs(func(*rjob) bool { return true }))
	which, now := k.rng.Intn(1<<30), k.rng.Intn(2) == 0
	if name == "" {
		return
	}
	j := k.jobs[name]
	live := k.livePods(j, k.serverPods())
	if len(live) == 0 {
		return
	}
	p := live[which%len(live)]
	opts := metav1.DeleteOptions{}
	if now {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if err := k.e.cs.CoreV1().Pods(k.ns).Delete(context.Background(), p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
		k.t.Fatal(err)
	}
	k.touched[name] = true
	k.logf("user deleted pod %s (at once: %v)", p.Name, now)
}

// collect deletes ended pods, as the terminated-pod collector would.
func (k *krand) collect() {
	var gone []string
	for _, p := range k.serverPods() {
		if ended(p) {
			if err := k.e.cs.CoreV1().Pods(k.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				k.t.Fatal(err)
			}
			gone = append(gone, p.Name)
		}
	}
	if len(gone) > 0 {
		k.logf("ended pods deleted: %v", gone)
	}
}

// kubelet plays the nodes' kubelets once: bound pending pods on Ready
// nodes start, and pods being deleted there are gone a step or two after
// it first saw them so. A NotReady or deleted node has no kubelet: its
// pods stay as they are. It reports whether it wrote anything.
func (k *krand) kubelet(nodes map[string]*corev1.Node) bool {
	wrote := false
	ctx := context.Background()
	for _, p := range k.serverPods() {
		n := nodes[p.Spec.NodeName]
		if n == nil || !randsearch.NodeReady(n) {
			continue
		}
		switch {
		case p.DeletionTimestamp != nil:
			since, ok := k.termSince[p.UID]
			if !ok {
				k.termSince[p.UID], since = k.step, k.step
			}
			if k.step-since >= k.hash(p.Name)%3 {
				zero := int64(0)
				err := k.e.cs.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
					Preconditions: &metav1.Preconditions{UID: &p.UID}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					k.t.Fatalf("kubelet deleting %s: %v", p.Name, err)
				}
				wrote = true
			}
		case p.Status.Phase == corev1.PodPending:
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
			if _, err := k.e.cs.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				k.t.Fatalf("kubelet starting %s: %v", p.Name, err)
			}
			wrote = true
		}
	}
	return wrote
}

// writeFences writes a new value on the fence pod and node and waits until
// tide's caches hold them: tide's next round then sees the test's
// earlier writes (an informer applies a kind's changes in order).
func (k *krand) writeFences() {
	k.fenceN++
	v := strconv.Itoa(k.fenceN)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, rFenceAnnot, v))
	ctx := context.Background()
	if _, err := k.e.cs.CoreV1().Pods(k.ns).Patch(ctx, k.fence, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.e.cs.CoreV1().Nodes().Patch(ctx, k.fence, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		k.t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(2 * time.Millisecond) {
		a, _ := k.sch.Cached("pod", k.ns, k.fence, rFenceAnnot)
		b, _ := k.sch.Cached("node", "", k.fence, rFenceAnnot)
		if a == v && b == v {
			return
		}
		if time.Since(start) > 30*time.Second {
			k.fail("tide's caches did not see fence %s within 30 s (pod %q, node %q)", v, a, b)
		}
	}
}

// settle lets tide catch up with the step: the kubelets act, tide's
// caches take in every write, and a whole round runs since; until that
// round changed nothing and the kubelets had nothing to do. With nothing
// changing but what tide and the kubelets do, and the engine's clock
// still, tide must come to rest: rMaxPasses passes that each bound,
// evicted or made pods are a loop.
func (k *krand) settle() {
	first := k.sch.Stats()
	for pass := 0; ; pass++ {
		if pass == rMaxPasses {
			last := k.sch.Stats()
			k.fail("tide did not settle: in %d passes since the step's operations it bound %d pods, evicted %d, made %d, with nothing else changing\n%s",
				pass, last.Bound-first.Bound, last.Evicted-first.Evicted, last.Created-first.Created, k.state())
		}
		if p := k.panicked.Load(); p != nil {
			k.fail("tide panicked: %s", p)
		}
		wrote := k.kubelet(k.serverNodes())
		k.writeFences()
		before := k.sch.Stats() // waits for a round under way
		for start := time.Now(); k.sch.Stats().Rounds <= before.Rounds; time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				if p := k.panicked.Load(); p != nil {
					k.fail("tide panicked: %s", p)
				}
				k.fail("tide ran no round for 30 s")
			}
		}
		after := k.sch.Stats()
		if !wrote && after.Bound == before.Bound && after.Evicted == before.Evicted && after.Created == before.Created &&
			after.BindErrors == before.BindErrors && after.EvictErrors == before.EvictErrors && after.CreateErrors == before.CreateErrors {
			return
		}
	}
}

func (k *krand) check() {
	k.t.Helper()
	pods := k.serverPods()
	nodes := k.serverNodes()
	for name, n := range nodes {
		k.snaps[name] = append(k.snaps[name], n)
	}
	now := map[types.UID]string{}
	fresh := map[string]bool{}         // jobs with a pod bound this step
	took := map[string][]*corev1.Pod{} // nodes that took a pod this step, and those pods
	for _, p := range pods {
		if !running(p) {
			continue
		}
		now[p.UID] = p.Spec.NodeName
		if _, ok := k.boundAt[p.UID]; ok {
			continue
		}
		j := k.jobOf(p)
		if j == nil {
			k.fail("pod %s bound to %s belongs to no job of the test", p.Name, p.Spec.NodeName)
		}
		fresh[j.name] = true
		took[p.Spec.NodeName] = append(took[p.Spec.NodeName], p)
		var whys []string
		for _, n := range k.snaps[p.Spec.NodeName] {
			why := j.Why(n)
			if why == "" {
				whys = nil
				break
			}
			whys = append(whys, why)
		}
		if len(k.snaps[p.Spec.NodeName]) == 0 {
			whys = []string{"no such node this step"}
		}
		if whys != nil {
			k.fail("pod %s of %s bound to node %s, where it cannot run in any state the node had this step: %v", p.Name, j.name, p.Spec.NodeName, whys)
		}
	}
	k.boundAt = now
	for _, node := range sortedKeys(took) {
		k.checkRoom(node, pods, took[node])
	}
	for _, name := range sortedKeys(k.jobs) {
		k.checkGang(k.jobs[name], pods, nodes, fresh[name])
	}
	k.checkLost(pods, nodes)
}

func nodeTaints(n *corev1.Node) []corev1.Taint {
	if n == nil {
		return nil
	}
	return n.Spec.Taints
}

// checkLost: tide, settled, has evicted every worker on a node it can no
// longer run on (gone, cordoned, a NoExecute taint it does not tolerate,
// NotReady past the grace period; docs/kubernetes.md). What the kubelets
// do not finish stays Terminating: evicted is enough. A Ready node whose
// allocatable GPUs fell below what its workers hold keeps them, as the
// kubelet does (its device plugin restarting, GPUs gone unhealthy), and
// takes no new pod meanwhile: checkRoom sees to that.
//
// tide counts a node's grace from the first round that saw it NotReady,
// which under load can come well after the test's write: the grace is
// counted here from the first settled check after that write (settle ran
// a round with the write in tide's caches), not from the write. Counted
// from the write, a worker still within tide's grace failed the check
// (seed 563 at 100 steps under pollux, on the shared 2-core machine:
// 'NotReady for 2.011s' against a grace of 1 s and a second's margin; it
// passed alone, 4 runs of 4).
func (k *krand) checkLost(pods []*corev1.Pod, nodes map[string]*corev1.Node) {
	grace := k.cfg.NotReadyGrace + time.Second // and a round
	defer func() {
		for name, n := range nodes {
			at, ok := k.notReady[name]
			if randsearch.NodeReady(n) || !ok {
				delete(k.seenNR, name)
			} else if seen, ok := k.seenNR[name]; !ok || seen.Before(at) {
				k.seenNR[name] = time.Now()
			}
		}
	}()
	for _, p := range pods {
		if !running(p) || p.DeletionTimestamp != nil {
			continue
		}
		j, n := k.jobOf(p), nodes[p.Spec.NodeName]
		why := ""
		switch {
		case n == nil:
			why = "was deleted"
		case n.Spec.Unschedulable:
			why = "is cordoned"
		case !randsearch.NodeReady(n) && !k.seenNR[n.Name].IsZero() && !k.seenNR[n.Name].Before(k.notReady[n.Name]) && time.Since(k.seenNR[n.Name]) > grace:
			why = fmt.Sprintf("has been NotReady for %v (%v since a settled check saw it so)", time.Since(k.notReady[n.Name]).Round(time.Millisecond),
				time.Since(k.seenNR[n.Name]).Round(time.Millisecond))
		}
		for _, t := range nodeTaints(n) {
			if t.Effect == corev1.TaintEffectNoExecute && !strings.HasPrefix(t.Key, "node.kubernetes.io/") && !j.Tolerates(t) {
				why = fmt.Sprintf("has taint %v", t)
			}
		}
		if why != "" {
			k.fail("pod %s of %s still on node %s, which %s, with tide settled", p.Name, j.name, p.Spec.NodeName, why)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// checkRoom: node has room, in the most it allowed this step, for every
// pod bound to it that has not ended (terminating ones hold theirs until
// their kubelet is done), in the CPU and memory the pods bound there this
// step (fresh) ask for: as kube-scheduler's NodeResourcesFit, a pod is
// checked against the resources it requests. A node re-registered smaller
// under a pod still bound to it is over its CPU before any bind, and the
// check failed the bind of a pod that asks for no CPU (seed 609 at 80
// steps with the controller manager: a terminating 16-CPU pod on the node
// re-registered with 8 CPUs, and a worker asking memory alone bound
// beside it).
func (k *krand) checkRoom(node string, pods, fresh []*corev1.Pod) {
	asks := map[corev1.ResourceName]bool{}
	for _, p := range fresh {
		for _, c := range p.Spec.Containers {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				asks[r] = asks[r] || randsearch.Qty(c.Resources.Requests, r) > 0
			}
		}
	}
	alloc := map[corev1.ResourceName]int64{}
	for _, n := range k.snaps[node] {
		if n == nil {
			continue
		}
		for _, r := range []corev1.ResourceName{kube.GPUResource, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			alloc[r] = max(alloc[r], randsearch.Qty(n.Status.Allocatable, r))
		}
	}
	var gpus, cpu, mem, count int64
	shares := map[int]float64{}
	var names []string
	for _, p := range pods {
		if p.Spec.NodeName != node || !running(p) {
			continue
		}
		names = append(names, p.Name)
		count++
		for _, c := range p.Spec.Containers {
			cpu += randsearch.Qty(c.Resources.Requests, corev1.ResourceCPU)
			mem += randsearch.Qty(c.Resources.Requests, corev1.ResourceMemory)
			gpus += randsearch.Qty(c.Resources.Limits, kube.GPUResource)
		}
		// A part asks the device plugin for no GPU (a TideJob's worker
		// carries no fraction annotation): its job says what it takes.
		if j := k.jobOf(p); j != nil && j.share > 0 {
			share := j.share
			i, err := strconv.Atoi(p.Annotations[kube.AnnotGPUIndex])
			if err != nil || i < 0 || int64(i) >= alloc[kube.GPUResource] {
				k.fail("part %s bound to %s at GPU index %q, not one of its %d GPUs", p.Name, node, p.Annotations[kube.AnnotGPUIndex], alloc[kube.GPUResource])
			}
			shares[i] += share
		}
	}
	for i, s := range shares {
		if s > 1+1e-9 {
			k.fail("node %s: GPU index %d holds parts of %g GPUs (pods %v)", node, i, s, names)
		}
	}
	if g := gpus + int64(len(shares)); g > alloc[kube.GPUResource] {
		k.fail("node %s: %d GPUs taken (%d whole, %d holding parts), at most %d allocatable this step (pods %v)", node, g, gpus, len(shares), alloc[kube.GPUResource], names)
	}
	if (asks[corev1.ResourceCPU] && cpu > alloc[corev1.ResourceCPU]) || (asks[corev1.ResourceMemory] && mem > alloc[corev1.ResourceMemory]) || count > alloc[corev1.ResourcePods] {
		k.fail("node %s: pods ask for %dm CPU, %dGi memory, %d pods; at most %dm, %dGi, %d allocatable this step (pods %v)", node, cpu, mem>>30, count,
			alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory]>>30, alloc[corev1.ResourcePods], names)
	}
}

// checkGang: a gang (a TideJob's minimum) bound this step is bound whole
// unless an operation touched it, on one GPU type and site, and none is
// bound in part for long; a failed TideJob's workers go.
func (k *krand) checkGang(j *rjob, pods []*corev1.Pod, nodes map[string]*corev1.Node, fresh bool) {
	if !j.gang {
		return
	}
	live := k.livePods(j, pods)
	var on []*corev1.Pod
	groups := map[string]bool{}
	for _, p := range live {
		if p.Spec.NodeName != "" {
			on = append(on, p)
			if n := nodes[p.Spec.NodeName]; n != nil {
				groups[randsearch.Group(n, n.Labels[randsearch.TypeLabel])] = true
			}
		}
	}
	if j.tide && j.failed && !j.gone {
		if len(live) > 0 {
			if j.failedFor++; j.failedFor > rPartialSteps {
				k.fail("tidejob %s failed %d steps ago and still has %d live workers", j.name, j.failedFor, len(live))
			}
		}
		return
	}
	if j.done {
		j.partial = 0
		return
	}
	if j.tide && len(on) > j.maxW {
		k.fail("tidejob %s has %d workers bound, maxWorkers %d", j.name, len(on), j.maxW)
	}
	if fresh && !k.touched[j.name] && len(on) > 0 && len(on) < j.size && (j.tide || len(live) == j.size) {
		k.fail("%s bound %d of its %d pods this step, no operation touching it", j.name, len(on), j.size)
	}
	if fresh && len(groups) > 1 {
		k.fail("%s bound across GPU types, sites or edge servers: %v", j.name, sortedKeys(groups))
	}
	if len(on) > 0 && len(on) < j.size && !j.backingOff() {
		if j.partial++; j.partial > rPartialSteps {
			k.fail("%s bound in part (%d of %d pods) for %d steps", j.name, len(on), j.size, j.partial)
		}
	} else {
		j.partial = 0
	}
}

// fits: j's gang fits on the usable nodes were they empty.
func (k *krand) fits(j *rjob, nodes map[string]*corev1.Node) bool {
	room := map[string]int64{}
	for _, n := range nodes {
		if j.Why(n) != "" {
			continue
		}
		g := randsearch.Group(n, n.Labels[randsearch.TypeLabel])
		if room[g] += j.Capacity(n.Status.Allocatable, kube.GPUResource, int64(j.gpus)); room[g] >= int64(j.size) {
			return true
		}
	}
	return false
}

// quiet stops the churn and lets everything finish: gangs short of pods
// get them, what is bound ends in waves, and every pending job that fits
// on the empty usable nodes must be bound by the end, unless its policy
// declined it.
func (k *krand) quiet() {
	k.logf("quiet")
	k.beginStep()
	nodes := k.serverNodes()
	for _, name := range sortedKeys(k.jobs) {
		j := k.jobs[name]
		if j.done {
			continue
		}
		if !k.fits(j, nodes) {
			k.dropJob(j)
			continue
		}
		for j.gang && !j.tide && len(k.livePods(j, k.serverPods())) < j.size {
			k.makePod(j)
		}
	}
	waiting := func(pods []*corev1.Pod) []string {
		var out []string
		for _, name := range sortedKeys(k.jobs) {
			j := k.jobs[name]
			live := k.livePods(j, pods)
			if j.done || (!j.tide && len(live) < j.size) || k.excused(j, pods) != "" {
				continue
			}
			bound := false
			for _, p := range live {
				bound = bound || p.Spec.NodeName != ""
			}
			if !bound {
				out = append(out, name)
			}
		}
		return out
	}
	idle := 0 // waves in a row in which nothing was bound
	for wave := 0; wave < len(k.jobs)+8 && idle < 3 && len(waiting(k.serverPods())) > 0; wave++ {
		before := k.sch.Stats().Bound
		for r := 0; r < 3; r++ {
			k.clock.move(2 * time.Minute)
			k.settle()
			k.check()
			k.step++
		}
		var ended []string
		for _, p := range k.serverPods() {
			if running(p) && p.DeletionTimestamp == nil {
				k.setPhase(p.Name, corev1.PodSucceeded, "")
				ended = append(ended, p.Name)
			}
		}
		if idle++; k.sch.Stats().Bound != before || len(ended) > 0 {
			idle = 0
		}
		k.logf("quiet wave %d: waiting %v; pods %v Succeeded", wave, waiting(k.serverPods()), ended)
	}
	pods := k.serverPods()
	for _, name := range sortedKeys(k.jobs) {
		if why := k.excused(k.jobs[name], pods); why != "" && !k.jobs[name].done {
			k.t.Logf("seed %d: job %s left waiting: %s", k.seed, name, why)
		}
	}
	for _, name := range waiting(pods) {
		k.fail("job %s fits on the empty usable nodes but was never bound (tide says %q)\n%s", name, k.reason(k.jobs[name], pods), k.describe(k.jobs[name]))
	}
}

// excused returns why tide may leave j waiting for good, "" if it may not:
// its policy declined it (a deadline it cannot meet), holds it for nodes it
// counts on, or runs whole GPUs only and j asks for parts.
func (k *krand) excused(j *rjob, pods []*corev1.Pod) string {
	why := k.reason(j, pods)
	if strings.HasPrefix(why, "declined") || strings.HasPrefix(why, "held, not declined") ||
		(j.share > 0 && rElastic[strings.Split(k.policy, ":")[0]] && strings.Contains(why, "is elastic")) {
		return why
	}
	return ""
}

// dropJob deletes a job that does not fit the usable nodes: one at the
// head of a queue legitimately holds the jobs behind it.
func (k *krand) dropJob(j *rjob) {
	if j.tide {
		if err := k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).Delete(context.Background(), j.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatal(err)
		}
	}
	zero := int64(0)
	for _, p := range k.jobPods(j, k.serverPods()) {
		if err := k.e.cs.CoreV1().Pods(k.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatal(err)
		}
	}
	j.done, j.gone = true, j.tide
	k.logf("job %s does not fit the usable nodes: deleted", j.name)
}

// reason is why tide says a pending job waits (kube.Scheduler.Waiting;
// its pods' conditions are rewritten at most every 30 s).
func (k *krand) reason(j *rjob, pods []*corev1.Pod) string {
	key := "pods/" + k.ns + "/" + j.name
	switch {
	case j.tide:
		key = "tidejob/" + k.ns + "/" + j.name
	case !j.gang:
		if live := k.livePods(j, pods); len(live) > 0 {
			key = "pods/" + k.ns + "/" + live[0].Name
		}
	}
	return k.sch.Waiting(key)
}

// state says, for a failure's message, what each node holds and why
// tide says each job not done waits.
func (k *krand) state() string {
	var b strings.Builder
	pods := k.serverPods()
	nodes := k.serverNodes()
	for _, name := range sortedKeys(nodes) {
		n := nodes[name]
		var on []string
		for _, p := range pods {
			if p.Spec.NodeName == name && running(p) {
				on = append(on, fmt.Sprintf("%s(%s,deleting=%v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
			}
		}
		fmt.Fprintf(&b, "  node %s: ready %v cordoned %v taints %v gpus %d cpu %dm mem %dGi pods %d; holds %v\n", name, randsearch.NodeReady(n), n.Spec.Unschedulable,
			n.Spec.Taints, randsearch.Qty(n.Status.Allocatable, kube.GPUResource), randsearch.Qty(n.Status.Allocatable, corev1.ResourceCPU),
			randsearch.Qty(n.Status.Allocatable, corev1.ResourceMemory)>>30, randsearch.Qty(n.Status.Allocatable, corev1.ResourcePods), on)
	}
	for _, name := range sortedKeys(k.jobs) {
		if j := k.jobs[name]; !j.done {
			fmt.Fprintf(&b, "  job %s (%d..%d of %d GPUs/share %g, cpu %dm, mem %dGi, prio %d): tide says %q\n", name, j.size, max(j.size, j.maxW),
				j.gpus, j.share, j.CPU, j.Mem>>30, j.prio, k.reason(j, pods))
		}
	}
	return b.String()
}

// describe says what j asks and what each node offers it.
func (k *krand) describe(j *rjob) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %+v\n", j.name, *j)
	if j.tide {
		if u, err := k.e.dyn.Resource(kube.TideJobResource).Namespace(k.ns).Get(context.Background(), j.name, metav1.GetOptions{}); err == nil {
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			fmt.Fprintf(&b, "  its status: %v\n", st)
		}
	}
	pods := k.serverPods()
	for name, n := range k.serverNodes() {
		var on []string
		for _, p := range pods {
			if p.Spec.NodeName == name && running(p) {
				on = append(on, fmt.Sprintf("%s(%s,deleting=%v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
			}
		}
		fmt.Fprintf(&b, "  node %s: ready %v cordoned %v taints %v labels %v alloc %v; why not %q, holds %d; bound %v\n",
			name, randsearch.NodeReady(n), n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Status.Allocatable, j.Why(n), j.Capacity(n.Status.Allocatable, kube.GPUResource, int64(j.gpus)), on)
	}
	return b.String()
}

// checkLog fails a seed whose tide logged an error again and again.
func (k *krand) checkLog() {
	k.tlog.mu.Lock()
	errs := make(map[string]int, len(k.tlog.errs))
	for m, n := range k.tlog.errs {
		errs[m] = n
	}
	k.tlog.mu.Unlock()
	total := 0
	for _, n := range errs {
		total += n
	}
	if total > 5 {
		var b strings.Builder
		for _, m := range sortedKeys(errs) {
			fmt.Fprintf(&b, "\n  %d times: %s", errs[m], m)
		}
		k.fail("tide logged %d errors:%s", total, b.String())
	}
}
