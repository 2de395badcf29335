package kube

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime/debug"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/kube/randsearch"
)

// TestRandomOperations drives a Scheduler with random operations on nodes
// and pods, an in-memory API server standing behind the harness's caches,
// and checks after every round what must hold whatever the policy decides:
//
//   - no pod is bound where it cannot run: a node that is gone, NotReady or
//     cordoned, whose NoSchedule or NoExecute taints it does not tolerate,
//     or that fails its nodeSelector, required node affinity or GPU type;
//   - a node that took a pod this round has room for every live pod bound
//     to it (GPUs, the distinct GPU indices parts hold, each index's parts
//     at most one GPU, CPU, memory, pods);
//   - a gang is bound whole within a round, on one GPU type and one site
//     (on an edge site, one server), and is never left bound in part for
//     more than partialGrace rounds;
//   - when everything else has finished, a pending job that fits on the
//     empty usable nodes is bound within a few rounds, unless the policy
//     declined it (a deadline it cannot meet).
//
// The expectations are modelled here from the pods' and nodes' specs, not
// read from the scheduler. TIDE_KUBE_RANDOM_SEEDS ("200": seeds 1
// to 200, or "300-400")
// and TIDE_KUBE_RANDOM_STEPS search more; TIDE_KUBE_RANDOM_LOG=1 prints
// a failing seed's whole log, not its last 60 operations;
// TIDE_KUBE_RANDOM_DUMP=DIR writes each seed's whole log to DIR/SEED.log
// (two runs' logs compared show whether a seed runs alike every time);
// each seed turns on at random the features of random_features_test.go
// (TideJobs, MIG slices, pair packing, quotas and TideQueues, lent sites,
// held jobs), which TIDE_KUBE_RANDOM_FEATURES=0 turns off.
func TestRandomOperations(t *testing.T) {
	first, last := int64(1), int64(3*len(randomPolicies)) // each policy thrice
	steps := 120
	if s := os.Getenv("TIDE_KUBE_RANDOM_SEEDS"); s != "" {
		a, b, ok := strings.Cut(s, "-")
		var err error
		if ok {
			if first, err = strconv.ParseInt(a, 10, 64); err == nil {
				last, err = strconv.ParseInt(b, 10, 64)
			}
		} else {
			last, err = strconv.ParseInt(a, 10, 64)
		}
		if err != nil {
			t.Fatalf("TIDE_KUBE_RANDOM_SEEDS=%q: want N or A-B", s)
		}
	}
	if s := os.Getenv("TIDE_KUBE_RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TIDE_KUBE_RANDOM_STEPS=%q: want a positive number", s)
		}
		steps = n
	}
	for seed := first; seed <= last; seed++ {
		policy := randomPolicies[int(seed)%len(randomPolicies)]
		t.Run(fmt.Sprintf("seed=%d/%s", seed, policy), func(t *testing.T) {
			runRandom(t, seed, policy, steps)
		})
	}
}

// randomPolicies are the policies the search runs, one per seed in turn
// (those needing GLPK are left out, the test machines lack it, and so is
// tiresias-gittins, which needs a distribution of GPU times).
var randomPolicies = []string{"fifo", "srtf", "tiresias", "edf", "drf", "themis", "gandiva", "gavel-fifo",
	"elasticflow", "edgeflow", "tidal", "fifo:backfill=true", "gandiva-fair", "fifo-perf",
	"allox", "afs", "optimus", "pollux", "deepboot", "aryl", "chronus"}

// elasticPolicies run jobs on whole GPUs only (docs/sharing.md).
var elasticPolicies = map[string]bool{"afs": true, "aryl": true, "deepboot": true, "edgeflow": true, "elasticflow": true,
	"optimus": true, "pollux": true, "tidal": true}

// partialGrace is how many rounds in a row a gang may stay bound in part
// (a lost worker's partners are released the round after it is evicted;
// a node NotReady keeps its workers for NotReadyGrace).
const partialGrace = 4

// The search's step and the host port its ports feature binds.
const (
	rStep = 10 * time.Second
	rPort = 8080 // the host port pods of the ports feature bind
)

// TestRandsearchNames: the names package randsearch restates (it
// cannot import kube, whose tests import it) are kube's.
func TestRandsearchNames(t *testing.T) {
	for _, c := range []struct{ name, restated, kube string }{
		{"GPUResource", string(randsearch.GPUResource), string(GPUResource)},
		{"DefaultSiteLabel", randsearch.SiteLabel, DefaultSiteLabel},
		{"DefaultSiteKindLabel", randsearch.SiteKindLabel, DefaultSiteKindLabel},
	} {
		if c.restated != c.kube {
			t.Errorf("randsearch restates %s as %q; kube's is %q", c.name, c.restated, c.kube)
		}
	}
}

// rjob is a job the test submitted: every pod of it asks the same.
type rjob struct {
	name                   string
	key                    string // the scheduler's workload key
	size                   int    // gang size
	gang                   bool   // annotated as a job (a single pod without it is a job alone)
	gpus                   int    // whole GPUs per pod (0 for a part)
	share                  float64
	prio                   int32
	dur                    time.Duration
	randsearch.Constraints          // what each pod asks beyond its GPUs
	made                   int      // pods made so far
	done                   bool     // a pod succeeded or failed on its own
	partial                int      // rounds in a row bound in part
	pods                   []string // its pods' names, in the order they were made

	// Features the search turns on per seed (random_features_test.go).
	tide      bool                       // a TideJob: tide makes its workers; size is minWorkers
	maxW      int                        // a TideJob's maxWorkers
	mig       string                     // each pod asks for one MIG slice of this profile
	tenant    string                     // the queue it charges ("": its namespace, ns)
	jobType   string                     // a packable TideJob's spec.jobType
	port      bool                       // its pods bind host port rPort
	reruns    int                        // times its controller made it again after it failed
	failed    bool                       // a worker failed on its own (a TideJob then fails)
	ownEnd    map[string]corev1.PodPhase // its pods that ended on their own, and how
	failedFor int                        // rounds a failed TideJob kept live workers
	gone      bool                       // a TideJob deleted
}

type rworld struct {
	t      *testing.T
	rng    *rand.Rand
	h      *harness
	seed   int64
	policy string
	now    time.Time
	step   int
	log    []string

	mu     sync.Mutex // the API server's state: the reactors run on the scheduler's call workers
	nodes  map[string]*corev1.Node
	pods   map[string]*corev1.Pod
	bound  map[string]string // pod -> node, bound this round
	noBind map[string]bool   // job -> one of its binds failed this round
	evicts []string

	dying    map[string]int // terminating pod -> rounds before it is gone
	jobs     map[string]*rjob
	podJob   map[string]*rjob
	sites    bool
	lag      float64         // chance the pod cache misses a round's sync
	fresh    bool            // the scheduler's pod cache was synced this round
	freshAt  int             // the step of the last round whose pod cache was synced
	freshNow time.Time       // the clock at that round
	endedAt  map[string]int  // ended pod -> the step it ended
	listed   map[string]bool // pods a synced pod cache listed
	tick     time.Duration   // the clock's move after each round
	oneType  string          // the GPU type of every node, "" for either
	noEdge   bool            // no edge site
	nextNode int
	nextJob  int
	uid      int
	feat     *features // what else the search exercises (random_features_test.go)
}

type rclock struct{ w *rworld }

func (c rclock) Now() float64 { return float64(c.w.now.UnixNano()) / 1e9 }

func runRandom(t *testing.T, seed int64, policy string, steps int) {
	rng := rand.New(rand.NewSource(seed))
	w := &rworld{t: t, rng: rng, seed: seed, policy: policy, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		nodes: map[string]*corev1.Node{}, pods: map[string]*corev1.Pod{}, dying: map[string]int{},
		jobs: map[string]*rjob{}, podJob: map[string]*rjob{}, endedAt: map[string]int{}, listed: map[string]bool{}, sites: rng.Intn(3) == 0, tick: rStep}
	if rng.Intn(3) == 0 {
		w.lag = 0.25
	}
	// ElasticFlow and EdgeFlow plan a homogeneous cloud, of its first
	// node's type, and nothing when there is none (flow.cloudOf): their
	// clusters have one type, all in the cloud.
	if p := strings.Split(policy, ":")[0]; p == "elasticflow" || p == "edgeflow" {
		w.oneType, w.sites = []string{"V100", "A100"}[rng.Intn(2)], false
	}
	// Pollux's searches know no sites (pollux.go, oneUnit): a job they
	// spread across two sites runs on neither. Its clusters have one site.
	if strings.HasPrefix(policy, "pollux") {
		w.sites = false
	}
	// Tidal runs jobs without a deadline on the cloud and inference
	// sites only (the knapsack's pools; edge servers take deadline jobs).
	w.noEdge = strings.HasPrefix(policy, "tidal")
	// One API call at a time: the calls' order is then the round's, and
	// a seed runs alike every time (the API server names created workers
	// in the order they come).
	cfg := Config{Policy: policy, Clock: rclock{w}, Parallel: 1}
	w.feat = w.pickFeatures(&cfg)
	w.policy = cfg.Policy
	w.h = newHarnessWith(t, cfg)
	w.h.s.now = func() time.Time { return w.now }
	w.h.cs.PrependReactor("create", "pods", w.react)
	w.h.cs.PrependReactor("delete", "pods", w.reactDelete)
	w.wireFeatures()
	defer func() {
		if r := recover(); r != nil {
			w.fail("panic: %v\n%s", r, debug.Stack())
		}
	}()
	for i := 0; i < 2+rng.Intn(3); i++ {
		w.addNode()
	}
	for w.step = 0; w.step < steps; w.step++ {
		for k := 0; k < 1+rng.Intn(3); k++ {
			w.operate()
		}
		w.round()
	}
	if d := os.Getenv("TIDE_KUBE_RANDOM_DUMP"); d != "" {
		defer func() {
			if err := os.WriteFile(fmt.Sprintf("%s/%d.log", d, seed), []byte(strings.Join(w.log, "\n")+"\n"), 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	w.quiet()
}

func (w *rworld) fail(format string, args ...any) {
	w.t.Helper()
	tail := w.log
	if len(tail) > 60 && os.Getenv("TIDE_KUBE_RANDOM_LOG") == "" { // set: the whole log
		tail = tail[len(tail)-60:]
	}
	w.t.Fatalf("seed %d, policy %s, step %d: %s\nlast operations:\n  %s", w.seed, w.policy, w.step,
		fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (w *rworld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%d: ", w.step)+fmt.Sprintf(format, args...))
}

// react is the API server's side of bindings and evictions.
func (w *rworld) react(a k8stesting.Action) (bool, runtime.Object, error) {
	c := a.(k8stesting.CreateAction)
	w.mu.Lock()
	defer w.mu.Unlock()
	gr := schema.GroupResource{Resource: "pods"}
	switch c.GetSubresource() {
	case "binding":
		b := c.GetObject().(*corev1.Binding)
		p := w.pods[b.Name]
		fail := func(err error) (bool, runtime.Object, error) {
			if j := w.podJob[b.Name]; j != nil {
				w.noBind[j.name] = true
			}
			return true, nil, err
		}
		switch {
		case p == nil || (b.UID != "" && p.UID != b.UID):
			return fail(apierrors.NewNotFound(gr, b.Name))
		case p.Spec.NodeName != "":
			return fail(apierrors.NewConflict(gr, b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, p.Spec.NodeName)))
		case p.DeletionTimestamp != nil:
			return fail(fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", b.Name))
		}
		p = p.DeepCopy()
		p.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
		w.pods[b.Name] = p
		w.bound[b.Name] = b.Target.Name
		return true, nil, nil
	case "eviction":
		name := c.GetObject().(metav1.Object).GetName()
		if w.pods[name] == nil {
			return true, nil, apierrors.NewNotFound(gr, name)
		}
		w.evicts = append(w.evicts, name)
		return true, nil, nil
	case "":
		return w.createWorker(c.GetObject().(*corev1.Pod))
	}
	return false, nil, nil
}

// pick returns a random element of a sorted copy of keys ("" when none).
func (w *rworld) pick(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return keys[w.rng.Intn(len(keys))]
}

func (w *rworld) nodeNames() []string { return sortedKeys(w.nodes) }

func (w *rworld) podNames(keep func(*corev1.Pod) bool) []string {
	var out []string
	for _, name := range sortedKeys(w.pods) {
		if keep(w.pods[name]) {
			out = append(out, name)
		}
	}
	return out
}

func live(p *corev1.Pod) bool { return !podTerminal(p) }

// operate applies one random operation to the API server's state.
func (w *rworld) operate() {
	r := w.rng.Intn(100)
	switch {
	case r < 8:
		if len(w.nodes) < 8 || w.rng.Intn(4) == 0 {
			w.addNode()
		}
	case r < 12:
		w.editNode("cordon", randsearch.ToggleCordon)
	case r < 16:
		w.editNode("taint", func(n *corev1.Node) string { return randsearch.ToggleTaint(w.rng, n) })
	case r < 18:
		if name := w.pick(w.nodeNames()); name != "" {
			delete(w.nodes, name)
			w.logf("delete node %s", name)
		}
	case r < 21:
		w.editNode("gpus", func(n *corev1.Node) string {
			g := w.rng.Intn(9)
			n.Status.Allocatable[GPUResource] = *resource.NewQuantity(int64(g), resource.DecimalSI)
			return fmt.Sprintf("%d GPUs", g)
		})
	case r < 24:
		w.editNode("ready", func(n *corev1.Node) string {
			c := &n.Status.Conditions[0]
			if c.Status == corev1.ConditionTrue {
				c.Status = corev1.ConditionFalse
			} else {
				c.Status = corev1.ConditionTrue
			}
			return fmt.Sprintf("Ready=%s", c.Status)
		})
	case r < 25:
		w.editNode("pool", func(n *corev1.Node) string { return randsearch.Repool(w.rng, n) })
	case r < 40:
		w.submit()
	case r < 45:
		w.remake()
	case r < 58:
		w.finish(corev1.PodSucceeded, "")
	case r < 61:
		w.finishOne(corev1.PodSucceeded, "")
	case r < 63:
		w.finishOne(corev1.PodFailed, "")
	case r < 64:
		w.finishOne(corev1.PodFailed, "OutOfnvidia.com/gpu")
	case r < 70:
		w.userDelete()
	case r < 74:
		// Only pods a round saw ended: tide reads a job's end from its
		// pods (a TideJob's, then, from the status it wrote), and the
		// terminated-pod collector is not faster than its informer.
		gone := w.podNames(func(p *corev1.Pod) bool { return podTerminal(p) && w.endedAt[p.Name] <= w.freshAt })
		for _, name := range gone {
			delete(w.pods, name)
		}
		if len(gone) > 0 {
			sort.Strings(gone)
			w.logf("ended pods deleted: %v", gone)
		}
	case r < 76:
		w.now = w.now.Add(5 * time.Minute)
		w.logf("clock +5m")
	default:
		w.operateFeature(r)
	}
}

func (w *rworld) addNode() {
	name := fmt.Sprintf("n%d", w.nextNode)
	w.nextNode++
	n := randsearch.NewNode(w.rng, name, w.nodeType(), w.sites, w.noEdge)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	w.featureNode(n)
	w.nodes[name] = n
	w.logf("add node %s: %s GPUs %s, cpu %s, mem %s, pods %d, labels %v, taints %v", name,
		n.Status.Allocatable.Name(GPUResource, resource.DecimalSI), n.Labels[randsearch.TypeLabel], n.Status.Allocatable.Cpu(),
		n.Status.Allocatable.Memory(), n.Status.Allocatable.Pods().Value(), n.Labels, n.Spec.Taints)
}

func (w *rworld) nodeType() string {
	if w.oneType != "" {
		return w.oneType
	}
	return []string{"V100", "A100"}[w.rng.Intn(2)]
}

func (w *rworld) editNode(what string, edit func(*corev1.Node) string) {
	name := w.pick(w.nodeNames())
	if name == "" {
		return
	}
	n := w.nodes[name].DeepCopy()
	w.logf("node %s: %s", name, edit(n))
	w.nodes[name] = n
}

// submit makes a new job and some or all of its pods.
func (w *rworld) submit() {
	rng := w.rng
	if w.feat.tideJobs && rng.Intn(2) == 0 {
		w.submitTideJob()
		return
	}
	d := randsearch.DrawPodJob(rng)
	j := &rjob{name: fmt.Sprintf("j%d", w.nextJob), size: d.Size, gang: d.Gang, gpus: d.GPUs, share: d.Share, prio: d.Prio, dur: d.Dur}
	w.nextJob++
	j.Constraints = randsearch.Draw(rng, true)
	j.key = "pods/ns/" + j.name
	if !j.gang {
		j.key = "pods/ns/" + j.name + "-0"
	}
	w.featureJob(j)
	w.jobs[j.name] = j
	k := j.size
	if j.size > 1 && rng.Intn(4) == 0 {
		k = 1 + rng.Intn(j.size-1) // the rest come later (remake)
	}
	w.logf("submit %s: %d pods (%d now) of %d GPUs/share %g/mig %q, cpu %dm, mem %dGi, type %q, pool %q in [%s] notIn %q, tol ded=%v maint=%v all=%v, prio %d, dur %s, deadline %s, queue %q, host port %v",
		j.name, j.size, k, j.gpus, j.share, j.mig, j.CPU, j.Mem>>30, j.Type, j.Pool, j.In, j.NotIn, j.TolDed, j.TolMaint, j.TolAll, j.prio, j.dur, j.Deadline, j.tenant, j.port)
	for i := 0; i < k; i++ {
		w.makePod(j)
	}
}

func (w *rworld) makePod(j *rjob) {
	w.uid++
	name := fmt.Sprintf("%s-%d", j.name, j.made)
	j.made++
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(fmt.Sprintf("u%d", w.uid)),
		CreationTimestamp: metav1.NewTime(w.now), Annotations: map[string]string{AnnotDuration: j.dur.String()}},
		Spec:   corev1.PodSpec{SchedulerName: "tide", Priority: &j.prio, Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	res := &p.Spec.Containers[0].Resources
	res.Limits, res.Requests = corev1.ResourceList{}, corev1.ResourceList{}
	if j.gpus > 0 {
		res.Limits[GPUResource] = *resource.NewQuantity(int64(j.gpus), resource.DecimalSI)
	} else if j.share > 0 {
		p.Annotations[AnnotGPUFraction] = strconv.FormatFloat(j.share, 'g', -1, 64)
	}
	if j.gang {
		p.Annotations[AnnotJob] = j.name
		p.Annotations[AnnotGangSize] = strconv.Itoa(j.size)
	}
	if j.Deadline > 0 {
		p.Annotations[AnnotDeadline] = w.now.Add(j.Deadline).Format(time.RFC3339)
	}
	j.Constraints.Apply(&p.Spec)
	if j.mig != "" {
		delete(res.Limits, GPUResource)
		l := *resource.NewQuantity(1, resource.DecimalSI)
		res.Limits[corev1.ResourceName(migPrefix+j.mig)], res.Requests[corev1.ResourceName(migPrefix+j.mig)] = l, l
	}
	if j.tenant != "" {
		p.Annotations[AnnotQueue] = j.tenant
	}
	if j.port {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: rPort, HostPort: rPort}}
	}
	w.pods[name] = p
	w.podJob[name] = j
	j.pods = append(j.pods, name)
}

// livePods are j's pods that are neither terminal nor being deleted.
func (w *rworld) livePods(j *rjob) (out []*corev1.Pod) {
	for _, name := range j.pods {
		if p := w.pods[name]; p != nil && live(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// ended: one of j's pods succeeded or failed on its own (its gang is no
// longer one the scheduler completes or releases).
func (w *rworld) ended(j *rjob) bool { return j.done }

func (w *rworld) jobNames(keep func(*rjob) bool) []string {
	var out []string
	for _, name := range sortedKeys(w.jobs) {
		if keep(w.jobs[name]) {
			out = append(out, name)
		}
	}
	return out
}

// remake gives a gang short of pods a new one, as its controller would;
// with the rerun feature, a plain gang that failed on its own (and none
// of whose pods succeeded) too: its controller makes its pods again (a
// Job replaces the failed pod and keeps it), and it runs again.
func (w *rworld) remake() {
	name := w.pick(w.jobNames(func(j *rjob) bool {
		return j.gang && !j.tide && len(w.livePods(j)) < j.size && (!w.ended(j) || w.feat.rerun && w.failedOnly(j))
	}))
	if name == "" {
		return
	}
	j := w.jobs[name]
	if w.ended(j) {
		j.done, j.failed, j.ownEnd, j.partial = false, false, nil, 0
		j.reruns++
		w.logf("rerun %s (run %d): its controller makes it again after it failed; live %d of %d", name, j.reruns+1, len(w.livePods(j)), j.size)
	}
	w.makePod(j)
	w.logf("remake a pod of %s: %s-%d", name, name, j.made-1)
}

// failedOnly: j ended, and only by failures of its own pods.
func (w *rworld) failedOnly(j *rjob) bool {
	if !j.failed {
		return false
	}
	for _, ph := range j.ownEnd {
		if ph != corev1.PodFailed {
			return false
		}
	}
	return true
}

func (w *rworld) boundJobs() []string {
	return w.jobNames(func(j *rjob) bool {
		for _, p := range w.livePods(j) {
			if p.Spec.NodeName != "" {
				return true
			}
		}
		return false
	})
}

// finish ends every live pod of a bound job.
func (w *rworld) finish(phase corev1.PodPhase, reason string) {
	name := w.pick(w.boundJobs())
	if name == "" {
		return
	}
	for _, p := range w.livePods(w.jobs[name]) {
		w.setPhase(p.Name, phase, reason)
	}
	w.logf("job %s: all pods %s", name, phase)
}

func (w *rworld) finishOne(phase corev1.PodPhase, reason string) {
	// Not a pod being deleted: one ending while tide evicts it may be
	// gone before a round sees how it ended.
	name := w.pick(w.podNames(func(p *corev1.Pod) bool { return live(p) && p.Spec.NodeName != "" && p.DeletionTimestamp == nil }))
	if name == "" {
		return
	}
	w.setPhase(name, phase, reason)
	w.logf("pod %s %s %s", name, phase, reason)
}

func (w *rworld) setPhase(name string, phase corev1.PodPhase, reason string) {
	p := w.pods[name].DeepCopy()
	p.Status.Phase, p.Status.Reason = phase, reason
	code := int32(0)
	if phase == corev1.PodFailed {
		code = 1
	}
	// As the kubelet writes it: when the container finished.
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(w.now)}}}}
	w.pods[name] = p
	w.endedAt[name] = w.step
	if j := w.podJob[name]; j != nil && (phase == corev1.PodSucceeded || failedOnItsOwn(p)) {
		j.done = true
		j.failed = j.failed || failedOnItsOwn(p)
		if j.ownEnd == nil {
			j.ownEnd = map[string]corev1.PodPhase{}
		}
		j.ownEnd[name] = phase
	}
}

// userDelete deletes a live pod, at once or with a grace period: one
// tide's pod cache listed (a user sees a pod, tide created it or not,
// after tide's informer does; deleted unseen, a worker tide created and
// bound is one it keeps counting for the minute it waits for its cache,
// scheduler.go, s.created).
func (w *rworld) userDelete() {
	name := w.pick(w.podNames(func(p *corev1.Pod) bool { return live(p) && p.DeletionTimestamp == nil && w.listed[p.Name] }))
	if name == "" {
		return
	}
	w.terminate(name, "user deleted")
}

func (w *rworld) terminate(name, why string) {
	if w.pods[name].Spec.NodeName == "" || w.rng.Intn(2) == 0 {
		delete(w.pods, name)
		delete(w.dying, name)
		w.logf("%s: pod %s gone", why, name)
		return
	}
	p := w.pods[name].DeepCopy()
	now := metav1.NewTime(w.now)
	p.DeletionTimestamp = &now
	w.pods[name] = p
	w.dying[name] = 1 + w.rng.Intn(3)
	w.logf("%s: pod %s terminating", why, name)
}

// sync copies the API server's state into the scheduler's caches (the
// pods' now and then a round late, as a watch lags; never a minute late).
func (w *rworld) sync() {
	var nodes []any
	for _, n := range w.nodes {
		nodes = append(nodes, n.DeepCopy())
	}
	if err := w.h.nodes.Replace(nodes, ""); err != nil {
		w.t.Fatal(err)
	}
	w.syncFeatures()
	// A watch lags seconds, not minutes: tide trusts its cache over its
	// memory of a worker it created once a minute has passed (scheduler.go,
	// s.created), and a cache that missed a pod that long missed it for
	// good (a relist after its deletion).
	w.fresh = w.rng.Float64() >= w.lag || w.now.Sub(w.freshNow) >= time.Minute
	if !w.fresh {
		return
	}
	w.freshAt, w.freshNow = w.step, w.now
	var pods []any
	for _, p := range w.pods {
		pods = append(pods, p.DeepCopy())
		w.listed[p.Name] = true
	}
	if err := w.h.pods.Replace(pods, ""); err != nil {
		w.t.Fatal(err)
	}
}

// round runs one scheduling round on the synced caches, checks what it
// did, then lets the pods it bound start, the pods it evicted go and the
// clock move on.
func (w *rworld) round() {
	w.t.Helper()
	w.sync()
	w.bound, w.noBind, w.evicts = map[string]string{}, map[string]bool{}, nil
	if err := w.h.s.Round(context.Background()); err != nil {
		w.fail("round: %v", err)
	}
	if !w.fresh {
		w.logf("round on a stale pod cache")
	}
	w.check()
	var bound []string
	for name, node := range w.bound {
		bound = append(bound, name+"->"+node)
	}
	sort.Strings(bound)
	sort.Strings(w.evicts)
	if len(bound) > 0 || len(w.evicts) > 0 {
		w.logf("round: bound %v, evicted %v", bound, w.evicts)
	}
	for _, name := range w.evicts {
		p := w.pods[name]
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		if podTerminal(p) && w.endedAt[name] > w.freshAt {
			// Ended since the cache tide evicted it on: its informer
			// sees the end within milliseconds, before the eviction
			// deletes it (a round on a cache that stale is a model's
			// artefact); it is left to the collector (operate). A
			// failure tide cannot tell from its eviction's (a pod it
			// evicts may well fail of it): it is the eviction's, and
			// the job goes on.
			w.logf("evicted: pod %s ended before tide saw it: left to the collector", name)
			if j := w.podJob[name]; j != nil && failedOnItsOwn(p) {
				p = p.DeepCopy()
				p.Status.Reason = "Evicted"
				w.pods[name] = p
				delete(j.ownEnd, name)
				j.failed, j.done = false, j.gone
				for _, ph := range j.ownEnd {
					j.done, j.failed = true, j.failed || ph == corev1.PodFailed
				}
				w.logf("evicted: pod %s failed as tide evicted it: the eviction's failure, not %s's", name, j.name)
			}
			continue
		}
		w.terminate(name, "evicted")
	}
	for _, name := range sortedKeys(w.dying) {
		if w.dying[name]--; w.dying[name] <= 0 {
			delete(w.dying, name)
			delete(w.pods, name)
		}
	}
	for _, name := range w.podNames(func(p *corev1.Pod) bool { return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending }) {
		if w.rng.Intn(4) > 0 {
			p := w.pods[name].DeepCopy()
			p.Status.Phase = corev1.PodRunning
			w.pods[name] = p
		}
	}
	if w.feat.tidal {
		w.bindServing()
	}
	w.now = w.now.Add(w.tick)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// allowed: a pod of j may run on n at all (labels and taints), and why not.
func (j *rjob) allowed(n *corev1.Node) string {
	if why := j.Untolerated(n); why != "" {
		return why
	}
	if j.mig != "" && randsearch.Qty(n.Status.Allocatable, corev1.ResourceName(migPrefix+j.mig)) <= 0 {
		return "no MIG slices " + j.mig
	}
	return j.Unselected(n)
}

// group is the set of nodes one job's workers may share: a GPU type on a
// site, an edge server alone.
// oneGroup fails when the pods on of job j (a "gang" or a "tidejob")
// are bound across GPU types, sites or edge servers (group).
func (w *rworld) oneGroup(kind string, j *rjob, on []*corev1.Pod) {
	groups := map[string]bool{}
	for _, p := range on {
		if n := w.nodes[p.Spec.NodeName]; n != nil {
			groups[w.group(j, n)] = true
		}
	}
	if len(groups) > 1 {
		w.fail("%s %s bound across GPU types, sites or edge servers: %v", kind, j.name, groups)
	}
}

func (w *rworld) group(j *rjob, n *corev1.Node) string {
	if j.mig != "" {
		return randsearch.Group(n, "mig-"+j.mig) // slices are a GPU type of their own (mig.go)
	}
	return randsearch.Group(n, n.Labels[randsearch.TypeLabel])
}

// check checks the round just run.
func (w *rworld) check() {
	w.t.Helper()
	touched := map[string]bool{}
	for name, node := range w.bound {
		j := w.podJob[name]
		touched[node] = true
		n := w.nodes[node]
		switch {
		case n == nil:
			w.fail("pod %s bound to node %s, which does not exist", name, node)
		case !randsearch.NodeReady(n):
			w.fail("pod %s bound to node %s, which is NotReady", name, node)
		case n.Spec.Unschedulable:
			w.fail("pod %s bound to node %s, which is cordoned", name, node)
		}
		if why := j.allowed(n); why != "" {
			w.fail("pod %s of %s bound to node %s: %s", name, j.name, node, why)
		}
	}
	for node := range touched {
		w.checkRoom(node)
	}
	w.checkFeatures()
	for _, name := range sortedKeys(w.jobs) {
		j := w.jobs[name]
		if j.tide {
			continue // checkTideJob
		}
		if !j.gang || w.ended(j) {
			j.partial = 0
			continue
		}
		var on []*corev1.Pod
		fresh := false
		for _, p := range w.livePods(j) {
			if p.Spec.NodeName != "" {
				on = append(on, p)
				if _, ok := w.bound[p.Name]; ok {
					fresh = true
				}
			}
		}
		if fresh && w.fresh && !w.noBind[j.name] && len(on) != j.size {
			w.fail("gang %s bound %d of its %d pods this round", j.name, len(on), j.size)
		}
		if fresh {
			w.oneGroup("gang", j, on)
		}
		if len(on) > 0 && len(on) < j.size {
			if w.fresh { // a round on a stale cache cannot see why to release it
				j.partial++
			}
			if j.partial > partialGrace {
				w.fail("gang %s bound in part (%d of %d pods) for %d rounds", j.name, len(on), j.size, j.partial)
			}
		} else {
			j.partial = 0
		}
	}
}

// checkRoom: node has room for every live pod bound to it: GPUs (whole
// ones, and the indices parts and packable workers hold), each index's
// parts at most one GPU and never beside a packable worker, at most two
// packable jobs on an index (a pair), MIG slices of each profile, CPU,
// memory and pods. Pods of other schedulers (serving) count by their
// GPU limit. A node's GPUs and slices are checked when the round bound a
// pod taking them there: the pods bound before may hold more than a node
// that shrank since has (tide evicts them), and a pod asking for another
// resource (a MIG slice beside GPUs taken) may be bound there meanwhile,
// as the kubelet admits it.
func (w *rworld) checkRoom(node string) {
	n := w.nodes[node]
	alloc := n.Status.Allocatable
	var gpus, cpu, mem, pods int64
	shares := map[int]float64{}
	packed := map[int]map[string]bool{} // index -> packable jobs there
	slices := map[string]int64{}        // MIG profile -> slices taken
	takesGPUs, takesSlices := false, map[string]bool{}
	var names []string
	for name, p := range w.pods {
		if p.Spec.NodeName != node || !live(p) {
			continue
		}
		names = append(names, name)
		pods++
		j := w.podJob[name]
		if j == nil { // another scheduler's
			gpus += podGPUs(p)
			cpu += randsearch.Qty(p.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)
			continue
		}
		_, now := w.bound[name]
		cpu += j.CPU
		mem += j.Mem
		if j.mig != "" {
			slices[j.mig]++
			takesSlices[j.mig] = takesSlices[j.mig] || now
			continue
		}
		takesGPUs = takesGPUs || now
		if j.share == 0 && j.jobType == "" {
			gpus += int64(j.gpus)
			continue
		}
		i, err := strconv.Atoi(p.Annotations[AnnotGPUIndex])
		if err != nil || i < 0 || (now && int64(i) >= randsearch.Qty(alloc, GPUResource)) {
			w.fail("%s %s bound to %s at GPU index %q, not one of its %d GPUs", map[bool]string{true: "part", false: "packable worker"}[j.share > 0],
				name, node, p.Annotations[AnnotGPUIndex], randsearch.Qty(alloc, GPUResource))
		}
		if j.share > 0 {
			shares[i] += j.share
		} else {
			if packed[i] == nil {
				packed[i] = map[string]bool{}
			}
			packed[i][j.name] = true
		}
	}
	sort.Strings(names)
	var onPort []string
	for _, name := range names {
		if bindsPort(w.pods[name]) {
			onPort = append(onPort, name)
		}
	}
	if len(onPort) > 1 {
		w.fail("node %s: %d live pods bind host port %d: %v", node, len(onPort), rPort, onPort)
	}
	for i, s := range shares {
		if s > 1+1e-9 {
			w.fail("node %s: GPU index %d holds parts of %g GPUs (pods %v)", node, i, s, names)
		}
		if len(packed[i]) > 0 {
			w.fail("node %s: GPU index %d holds parts beside packable jobs %v (pods %v)", node, i, sortedKeys(packed[i]), names)
		}
	}
	for i, js := range packed {
		if len(js) > 2 {
			w.fail("node %s: GPU index %d holds %d packable jobs %v, a pair at most (pods %v)", node, i, len(js), sortedKeys(js), names)
		}
	}
	indices := len(shares)
	for i := range packed {
		if _, ok := shares[i]; !ok {
			indices++
		}
	}
	if g := gpus + int64(indices); takesGPUs && g > randsearch.Qty(alloc, GPUResource) {
		var at []string
		for _, name := range names {
			if i, ok := w.pods[name].Annotations[AnnotGPUIndex]; ok {
				at = append(at, name+"#"+i)
			}
		}
		w.fail("node %s: %d GPUs taken (%d whole, %d holding parts or pairs), %d allocatable (pods %v, GPU indices %v)\n%s",
			node, g, gpus, indices, randsearch.Qty(alloc, GPUResource), names, at, w.engineState())
	}
	for prof, k := range slices {
		if a := randsearch.Qty(alloc, corev1.ResourceName(migPrefix+prof)); takesSlices[prof] && k > a {
			w.fail("node %s: %d MIG slices %s taken, %d allocatable (pods %v)", node, k, prof, a, names)
		}
	}
	if cpu > randsearch.Qty(alloc, corev1.ResourceCPU) || mem > randsearch.Qty(alloc, corev1.ResourceMemory) || pods > randsearch.Qty(alloc, corev1.ResourcePods) {
		w.fail("node %s: pods ask for %dm CPU, %dGi memory, %d pods; allocatable %v (pods %v)", node, cpu, mem>>30, pods, alloc, names)
	}
}

// bindsPort: p binds host port rPort.
func bindsPort(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.HostPort == rPort {
				return true
			}
		}
	}
	return false
}

// capacity is how many workers of j empty node n holds.
func (j *rjob) capacity(n *corev1.Node) int64 {
	k := j.Capacity(n.Status.Allocatable, GPUResource, int64(j.gpus))
	if j.mig != "" {
		k = j.Capacity(n.Status.Allocatable, corev1.ResourceName(migPrefix+j.mig), 1)
	}
	if j.port {
		k = min(k, 1)
	}
	return k
}

// fitsEmpty: j's gang fits on the usable nodes were they empty.
func (w *rworld) fitsEmpty(j *rjob) bool {
	room := map[string]int64{}
	for _, n := range w.nodes {
		if !randsearch.NodeReady(n) || n.Spec.Unschedulable || j.allowed(n) != "" {
			continue
		}
		g := w.group(j, n)
		room[g] += j.capacity(n)
		if room[g] >= int64(j.size) {
			return true
		}
	}
	return false
}

// engineState says, for a failure's message, which engine GPUs each
// active job holds and which engine node (a node, or its MIG slices) each
// GPU is.
func (w *rworld) engineState() string {
	var b strings.Builder
	for _, st := range w.h.s.eng.Active() {
		fmt.Fprintf(&b, "  engine: %s (tenant %q) %s on GPUs %v\n", st.Job.ID, st.Job.Tenant, st.State, st.GPUs)
	}
	for _, n := range w.h.s.eng.Snapshot().Cluster.Nodes {
		fmt.Fprintf(&b, "  engine node %s: GPUs %d-%d, type %s\n", n.Name, n.First, int(n.First)+n.GPUs-1, n.GPUType)
	}
	return b.String()
}

// describe says what j asks and what each node offers it.
func (w *rworld) describe(j *rjob) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %+v\n", j.name, *j)
	for _, st := range w.h.s.eng.Active() {
		fmt.Fprintf(&b, "  engine: %s %s on %d GPUs (%v) of %d type %q share %g prio %d: %s\n", st.Job.ID, st.State, len(st.GPUs), st.GPUs, st.Job.GPUs, st.Job.GPUType, st.Job.Share, st.Job.Priority, st.Reason().Text)
	}
	for _, name := range sortedKeys(w.nodes) {
		n := w.nodes[name]
		var on []string
		for _, p := range w.pods {
			if p.Spec.NodeName == name && live(p) {
				on = append(on, p.Name)
			}
		}
		sort.Strings(on)
		if st := w.h.s.cur.states[name]; st != nil {
			wl := w.h.s.cur.work[j.key]
			why := "no workload"
			if wl != nil && wl.shape != nil {
				why = wl.shape.why(st, st.used, st.pods, nil)
			}
			fmt.Fprintf(&b, "  tide sees %s: open %v lost %v used %v pods %d, why not: %q\n", name, st.open, st.lost, st.used, st.pods, why)
		}
		fmt.Fprintf(&b, "  node %s: ready %v cordoned %v taints %v labels %v alloc gpu %d cpu %dm mem %dGi pods %d; group %q, allowed %q, holds %d; bound %v\n",
			name, randsearch.NodeReady(n), n.Spec.Unschedulable, n.Spec.Taints, n.Labels, randsearch.Qty(n.Status.Allocatable, GPUResource),
			randsearch.Qty(n.Status.Allocatable, corev1.ResourceCPU), randsearch.Qty(n.Status.Allocatable, corev1.ResourceMemory)>>30,
			randsearch.Qty(n.Status.Allocatable, corev1.ResourcePods), w.group(j, n), j.allowed(n), j.capacity(n), on)
	}
	return b.String()
}

// quiet lets everything finish: gangs short of pods get them, bound jobs
// complete every few rounds, and every pending job that fits on the
// empty usable nodes must be bound in time, unless the policy declined it.
func (w *rworld) quiet() {
	w.t.Helper()
	w.logf("quiet")
	for _, name := range sortedKeys(w.dying) {
		delete(w.pods, name)
	}
	w.dying = map[string]int{}
	for _, name := range sortedKeys(w.jobs) {
		j := w.jobs[name]
		for j.gang && !j.tide && !w.ended(j) && len(w.livePods(j)) < j.size {
			w.makePod(j)
		}
	}
	w.quietFeatures()
	// The jobs that do not fit the usable nodes are deleted: one at the
	// head of a queue (FIFO's, Gavel's FIFO pass) legitimately holds the
	// jobs behind it, and the check is about jobs that can run.
	for _, name := range sortedKeys(w.jobs) {
		j := w.jobs[name]
		if w.ended(j) || (w.fitsEmpty(j) && w.withinQuota(j)) {
			continue
		}
		for _, p := range w.livePods(j) {
			delete(w.pods, p.Name)
		}
		j.done = true
		w.deleteTideJob(j)
		w.logf("job %s does not fit the usable nodes (or its queue's quota): deleted", name)
	}
	// Nodes NotReady stay so: their workers are lost past the grace.
	// Rounds are minutes apart: policies that decide every few minutes
	// (leases, quanta, Gavel's allocation) get to decide.
	w.lag, w.tick = 0, 2*time.Minute
	waiting := func() []string {
		return w.jobNames(func(j *rjob) bool {
			if w.ended(j) {
				return false
			}
			for _, p := range w.livePods(j) {
				if p.Spec.NodeName != "" {
					return false
				}
			}
			return (j.tide || len(w.livePods(j)) == j.size) && w.fitsEmpty(j)
		})
	}
	for iter := 0; iter < len(w.jobs)+8 && len(waiting()) > 0; iter++ {
		for r := 0; r < 4; r++ {
			w.round()
			w.step++
		}
		for _, name := range w.podNames(func(p *corev1.Pod) bool { return live(p) && p.Spec.NodeName != "" }) {
			w.setPhase(name, corev1.PodSucceeded, "")
		}
	}
	for _, name := range sortedKeys(w.jobs) {
		j := w.jobs[name]
		if !w.fitsEmpty(j) || w.ended(j) || (!j.tide && len(w.livePods(j)) < j.size) {
			continue
		}
		bound := false
		for _, p := range w.livePods(j) {
			bound = bound || p.Spec.NodeName != ""
		}
		if bound {
			continue
		}
		st := w.h.s.eng.Job(w.h.s.ids[j.key])
		if st != nil && st.State == job.Declined {
			continue
		}
		if st != nil && j.Deadline > 0 && strings.HasPrefix(st.Reason().Text, "held, not declined") {
			continue // tidal holds a deadline job it may still admit (when nodes it counts on come back)
		}
		if j.share > 0 && elasticPolicies[strings.Split(w.policy, ":")[0]] && strings.Contains(w.h.s.unsched[j.key], "is elastic") {
			continue // elastic policies run whole GPUs only, and say so
		}
		state, reason := "not in the engine", w.h.s.unsched[j.key]
		if st != nil {
			state, reason = string(st.State), st.Reason().Text
		}
		tide := ""
		if wl := w.h.s.work[w.h.s.ids[j.key]]; wl != nil {
			tide = w.h.s.tideReason(wl)
		}
		w.fail("job %s fits on the empty usable nodes but was never bound (%s: %q; tide's reason %q)\n%s", j.name, state, reason, tide, w.describe(j))
	}
}
