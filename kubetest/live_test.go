package kubetest

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/report"
	scen "github.com/tide-sched/tide/scenario"
	"github.com/tide-sched/tide/sim"
)

// The live scenario runner (docs/kubernetes.md, "Live scenarios"): a
// scenario file run against the real API server, tide kube scheduling its
// trace's jobs as TideJobs with the policy and performance model the
// simulator builds from the same file. The driver stands in for everything
// around tide:
//
//   - the nodes: one per node of the scenario's cluster, labelled with its
//     site, site kind and GPU type; the driver plays their kubelets (bound
//     pods start; deleted ones are gone at once, or after their job's
//     checkpoint when their GPUs were taken back for their owner);
//   - the training processes: each TideJob's progress advances at the rate
//     the scenario's model gives its running workers' allocation, after the
//     model's start, restart or resize cost (and the migration cost, as the
//     simulator charges it); its workers succeed when its work is done;
//   - the sites' owners: inference demand is the replica count of an
//     inference Deployment per site (one GPU a replica, pods of another
//     scheduler, "serving"), scaled along the capacity timeline (the
//     deployment and replica set controllers run) and bound by the driver
//     where a node has room; edge availability becomes the taken-back
//     label on servers;
//   - the clock: the engine's clock is the driver's (kube.Live.Paced). The
//     driver steps it from instant to instant as the simulator's loop
//     does (arrivals, completions, capacity changes, round times), applies
//     what happens at that instant through the API server, waits until
//     tide's caches hold it and runs tide's round, again while a round
//     evicted pods (its binds wait for their room), so API and informer
//     latency cost no simulated time.
//
// It prints the same JSON as `tide sim --scenario FILE --json`, for the
// live run and for the simulator's, and a line comparing them.

// pacedClock is the engine's clock in a live run: simulated seconds, set
// by the driver.
type pacedClock struct {
	mu sync.Mutex
	t  float64
}

func (c *pacedClock) Now() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *pacedClock) set(t float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// liveJob is one trace job as the driver runs it: its training process,
// counted as the simulator counts a running job (sim.running).
type liveJob struct {
	j         *job.Job
	name      string
	rec       report.JobRecord
	submitted bool
	done      bool
	progress  float64  // in the model's unit
	delay     float64  // cost seconds still to pay before progress
	rate      float64  // progress per second on its allocation
	until     float64  // progress where that rate ends
	last      float64  // simulated time progress was counted to
	next      float64  // its next boundary (end of delay, of the rate's segment, completion); +Inf when not running
	workers   []string // nodes of its running workers, sorted
	site      string   // the site it last ran on ("" before)
	reclaimed bool     // its workers were taken back for their owner at this instant
}

// ownerWait is an owner's demand (inference replicas, servers taken back)
// that rose at t and is not met yet.
type ownerWait struct {
	t    float64
	site string
}

// liveRun is one live run's state.
type liveRun struct {
	t        *testing.T
	s        *scenario
	sch      *kube.Scheduler
	ns       string
	clk      *pacedClock
	model    perf.Model
	mig      sim.Migration
	c        *cluster.Cluster
	round    float64
	onEvents bool
	node     map[string]int // kube node name -> cluster node index
	kname    []string       // cluster node index -> kube node name
	jobs     []*liveJob
	byName   map[string]*liveJob
	order    []*liveJob // by submission
	arrived  int        // jobs of order submitted
	events   []capacity.Change
	next     int
	up       []float64 // per site: GPU-seconds available to training
	alloc    []float64 // per site: GPU-seconds held by training
	siteIx   map[string]int
	serving  map[string]int     // site -> serving pods the timeline wants
	taken    map[string]int     // site -> servers taken back the timeline wants
	replicas map[string]int     // site -> its inference Deployment's replicas, as last set
	ownerAt  map[string]float64 // kube node -> when the checkpoint of the job tide took GPUs from there for their owner is done: the owner gets them then
	tb       map[string]bool    // kube node -> labelled taken back (the driver alone writes the label)
	capNow   bool               // the owners' demand changed at this instant
	waits    []ownerWait
	nWaits   int
	waitSec  float64
	fenceN   int
	dirty    map[string]bool // kinds of object written since the last fence
	rounds   int
	spent    map[string]time.Duration // wall time by part of the driver's loop
	tick     int64                    // the next round falls at tick*round, as in the simulator
	declined int                      // jobs the driver has seen declined (noteDeclined)
	calls    *apiCalls                // API requests by client, verb and resource
	podList  corelisters.PodNamespaceLister
	kwok     bool      // kwok plays the nodes' kubelets (TIDE_LIVE_KWOK): node status, leases, pod starts
	kwokBusy bool      // kwok has bound pods still to start
	debug    io.Writer // with TIDE_LIVE_TRACE and TIDE_LIVE_DEBUG=FROM:TO, each pass of the instants in [FROM, TO] (PREFIX.driver)
	dbgFrom  float64
	dbgTo    float64
	podEvent chan struct{} // the driver's pod informer saw a change
	stale    bool          // pods may have changed since the driver's informer last caught up (syncPods)

	mu sync.Mutex // guards progress, read by tide's rounds
}

// Fence objects: the driver writes one of each kind last before a round
// and waits for tide's caches to hold it (kube.Scheduler.Cached).
const (
	fenceName  = "live-fence"
	fenceAnnot = "tide-sched.io/live-fence"
)

func kubeName(n string) string {
	return strings.Trim(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(strings.ToLower(n)), "-")
}

// TestLiveScenario runs the scenario of $TIDE_LIVE_SCENARIO (a path from
// the repository's root; scripts/live-scenario.sh sets it) under the
// policy $TIDE_LIVE_POLICY (default the file's first), and writes the
// JSON to $TIDE_LIVE_OUT (default the test log). Without
// $TIDE_LIVE_SCENARIO it is skipped (TestKubeSites/LiveSmall runs a small
// one in CI).
func TestLiveScenario(t *testing.T) {
	file := os.Getenv("TIDE_LIVE_SCENARIO")
	if file == "" {
		t.Skip("TIDE_LIVE_SCENARIO not set (scripts/live-scenario.sh FILE)")
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join("..", file)
	}
	e := startEnv(t)
	live, sim, note := runLive(t, e, file, os.Getenv("TIDE_LIVE_POLICY"))
	var b strings.Builder
	sc, err := scen.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("live:\n")
	if err := scen.WriteJSON(&b, sc, []scen.Result{live}); err != nil {
		t.Fatal(err)
	}
	b.WriteString("simulated:\n")
	if err := scen.WriteJSON(&b, sc, []scen.Result{sim}); err != nil {
		t.Fatal(err)
	}
	b.WriteString(agreement(live.Runs[0], sim.Runs[0]) + "\n" + note + "\n")
	for i := range live.Runs[0].Jobs {
		l, s := &live.Runs[0].Jobs[i], &sim.Runs[0].Jobs[i]
		fmt.Fprintf(&b, "job %s: submit %.0f; start %.0f live, %.0f simulated; finish %.0f, %.0f; preemptions %d, %d; restarts %d, %d; reclaims %d, %d; %s, %s\n",
			l.ID, l.Submit, l.Start, s.Start, l.Finish, s.Finish, l.Preemptions, s.Preemptions, l.Restarts, s.Restarts, l.Reclaims, s.Reclaims, l.State, s.State)
	}
	if out := os.Getenv("TIDE_LIVE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Log(b.String())
}

// liveFigures are the four figures of a run: deadlines met (%,
// NaN without deadlines), average JCT (s), harvested GPU-hours (edge and
// inference) and inference wait (s).
func liveFigures(r *report.Run) (met, jct, harvest, wait float64) {
	x := report.Summarize(r)
	met = math.NaN()
	if x.DeadlineMetFrac != nil {
		met = 100 * *x.DeadlineMetFrac
	}
	if x.Sites != nil {
		harvest = x.Sites.HarvestedEdgeGPUHours + x.Sites.HarvestedInferenceGPUHours
		wait = x.Sites.InferenceWaitSeconds
	}
	return met, x.AvgJCT, harvest, wait
}

// agreement compares the four figures of a live and a simulated
// run.
func agreement(live, sim *report.Run) string {
	lm, lj, lh, lw := liveFigures(live)
	sm, sj, sh, sw := liveFigures(sim)
	l, s := report.Summarize(live), report.Summarize(sim)
	return fmt.Sprintf("agreement %s: deadlines met %.1f%% live, %.1f%% simulated; avg JCT %.0f s, %.0f s; harvested %.2f GPU-h, %.2f GPU-h; inference wait %.0f s, %.0f s (%d, %d waits); finished %d, %d of %d; rounds %d, %d",
		live.Policy, lm, sm, lj, sj, lh, sh, lw, sw, live.InferenceWaits, sim.InferenceWaits, l.Finished, s.Finished, l.Jobs, live.Rounds, sim.Rounds)
}

// runLive runs one policy of a scenario live and in the simulator.
func runLive(t *testing.T, e *env, file, spec string) (live, simulated scen.Result, note string) {
	sc, err := scen.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if spec == "" {
		spec = sc.Policies[0]
	}
	sc.Policies = []string{spec}
	res, err := sc.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	simulated = res[0]
	lv, err := sc.Live()
	if err != nil {
		t.Fatal(err)
	}
	ins := lv.Inputs
	r, err := ins.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	traceID := map[string]string{} // tide's job ID -> the trace's
	if prefix := os.Getenv("TIDE_LIVE_TRACE"); prefix != "" {
		// The simulator's run again, traced, beside the live one.
		sr, err := ins.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		f := createFile(t, prefix+".sim")
		sr.Config.Policy = &tracePolicy{inner: sr.Config.Policy, w: f, name: func(id string) string { return id }}
		if _, err := sr.Simulate(); err != nil {
			t.Fatal(err)
		}
		r.Config.Policy = &tracePolicy{inner: r.Config.Policy, w: createFile(t, prefix+".live"), name: func(id string) string { return traceID[id] }}
	}
	for _, f := range ins.Sites.Faults {
		t.Fatalf("site %s: node faults are not run live (the scenario's faults would be a kubelet dying)", f.Site)
	}
	lr := &liveRun{t: t, ns: "live", clk: &pacedClock{}, model: r.Config.Model, c: ins.Cluster, round: ins.Round, onEvents: ins.OnEvents,
		node: map[string]int{}, byName: map[string]*liveJob{}, siteIx: map[string]int{}, serving: map[string]int{}, taken: map[string]int{},
		calls: &apiCalls{n: map[string]int{}}, tick: 1, replicas: map[string]int{}, ownerAt: map[string]float64{}, tb: map[string]bool{}, spent: map[string]time.Duration{}, dirty: map[string]bool{}}
	counted := e.counted(lr.calls)
	lr.s = counted.scenario(t, "tide-live", lr.ns)
	t.Log("starting kube-controller-manager (deployments, replica sets) for the inference Deployments")
	e.startKCM(t, "deployment-controller,replicaset-controller")
	if lr.mig, err = ins.Sites.Migration.Filled(); err != nil {
		t.Fatal(err)
	}
	for i, st := range lr.c.Sites() {
		lr.siteIx[st.Name] = i
	}
	lr.up, lr.alloc = make([]float64, len(lr.c.Sites())), make([]float64, len(lr.c.Sites()))
	lr.kwok = os.Getenv("TIDE_LIVE_KWOK") != ""
	for i, n := range lr.c.Nodes {
		// The index first: tide orders nodes by name, and its engine's GPU
		// numbering (placements, ties) must follow the simulator's.
		name := fmt.Sprintf("n%04d-%s", i, kubeName(n.Name))
		lr.node[name] = i
		lr.kname = append(lr.kname, name)
		lr.s.node(name, n.GPUs, n.GPUType)
		lr.s.editNode(name, func(kn *corev1.Node) {
			kn.Labels[kube.DefaultSiteLabel] = n.Site
			kn.Labels[kube.DefaultSiteKindLabel] = n.SiteKind
			// Its GPUs' memory as the file gives it (GPU feature
			// discovery's label), not the type's default: EdgeFlow
			// keeps a job off an edge server its model does not fit.
			kn.Labels[kube.LabelGPUMemory] = strconv.FormatFloat(n.GPUMem*1024, 'f', -1, 64)
			if lr.kwok {
				kn.Labels["tide.test/kwok"] = "live"
			}
		})
	}
	if lr.kwok {
		// kwok keeps the nodes Ready with their leases renewed and starts
		// the pods bound to them; deleted pods the driver ends (a
		// reclaimed worker's checkpoint is its to charge).
		bin, dir := kwokBinary(t)
		e.startKwokStages(t, bin, dir, []string{kwokStages[0], kwokStages[1], kwokStages[2]}, "--manage-nodes-with-label-selector=tide.test/kwok=live")
		lr.s.waitNodesUp(lr.kname...)
	}
	// Each TideJob is named by its trace ID's rank among the trace's IDs,
	// so that tide's job IDs ("tidejob/NS/NAME") sort as the simulator's
	// do: a policy that breaks ties by job ID then orders its plan alike.
	rank := map[string]int{}
	ids := make([]string, len(r.Jobs))
	for i, j := range r.Jobs {
		ids[i] = j.ID
	}
	sort.Strings(ids)
	for i, id := range ids {
		if i > 0 && id == ids[i-1] {
			t.Fatalf("trace job ID %s appears twice", id)
		}
		rank[id] = i
	}
	for _, j := range r.Jobs {
		lj := &liveJob{j: j, name: fmt.Sprintf("j-%06d", rank[j.ID]), next: math.Inf(1)}
		lj.rec = report.JobRecord{ID: j.ID, Tenant: j.Tenant, Model: j.Model, GPUs: j.GPUs, Submit: j.Submit, Start: -1, Finish: -1,
			Deadline: j.Deadline, State: string(job.Pending), Priority: j.Priority}
		lr.jobs = append(lr.jobs, lj)
		lr.byName[lj.name] = lj
	}
	lr.order = append([]*liveJob(nil), lr.jobs...)
	sort.SliceStable(lr.order, func(a, b int) bool { return lr.order[a].j.Submit < lr.order[b].j.Submit })
	lr.events = timeline(ins.Sites.Changes, ins.Sites.Diurnal, lr.c, lastSubmit(r.Jobs)+30*86400)
	lr.makeFences()
	lr.watchPods()
	if prefix, win := os.Getenv("TIDE_LIVE_TRACE"), os.Getenv("TIDE_LIVE_DEBUG"); prefix != "" && win != "" {
		if _, err := fmt.Sscanf(win, "%g:%g", &lr.dbgFrom, &lr.dbgTo); err != nil {
			t.Fatalf("TIDE_LIVE_DEBUG=%q: want FROM:TO (simulated seconds): %v", win, err)
		}
		lr.debug = createFile(t, prefix+".driver")
	}
	// Evicted workers stay terminating until the driver's kubelet ends
	// them (at once, or after the checkpoint of a reclaim): a grace
	// period of 0 would have the API server delete them itself.
	grace := 30 * time.Second
	sch, stop := lr.s.start(kube.Config{Policy: spec, Clock: lr.clk, Grace: &grace, Live: &kube.Live{Policy: r.Config.Policy, Model: r.Config.Model, Placer: r.Config.Placer, Paced: true,
		Checkpoint: lr.mig.Checkpoint,
		Job: func(key string, j *job.Job) {
			if lj := lr.byName[strings.TrimPrefix(key, "tidejob/"+lr.ns+"/")]; lj != nil {
				id := j.ID
				*j = *lj.j
				j.ID = id
				traceID[id] = lj.j.ID
			}
		},
		Progress: func(key string) (float64, bool) {
			lj := lr.byName[strings.TrimPrefix(key, "tidejob/"+lr.ns+"/")]
			if lj == nil {
				return 0, false
			}
			lr.mu.Lock()
			defer lr.mu.Unlock()
			return lj.progress, true
		}}})
	lr.sch = sch
	start := time.Now()
	lr.drive()
	stop()
	note = fmt.Sprintf("live run: %.0f s wall, %d rounds; the driver's loop by part: %v; API calls per round: %s", time.Since(start).Seconds(), lr.rounds, lr.spent, lr.calls.perRound(lr.rounds))
	run := &report.Run{Policy: spec + " (live)", Trace: ins.Trace, Cluster: lr.c.String(), TotalGPUs: lr.c.TotalGPUs(), Seed: sc.Seed,
		Rounds: lr.rounds, InferenceWaits: lr.nWaits, InferenceWaitSeconds: lr.waitSec}
	for _, lj := range lr.jobs {
		run.Jobs = append(run.Jobs, lj.rec)
	}
	for i, st := range lr.c.Sites() {
		run.Sites = append(run.Sites, report.SiteUsage{Name: st.Name, Kind: st.Kind, GPUs: st.GPUs, UpGPUSeconds: lr.up[i], AllocGPUSeconds: lr.alloc[i]})
	}
	live = scen.Result{Cluster: lr.c.String(), Jobs: len(lr.jobs), Runs: []*report.Run{run}}
	return live, simulated, note
}

// createFile creates a file closed when t ends.
func createFile(t *testing.T, name string) *os.File {
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func lastSubmit(jobs []*job.Job) float64 {
	t := 0.0
	for _, j := range jobs {
		t = max(t, j.Submit)
	}
	return t
}

// timeline lists the capacity changes until end in time order: the file's
// and the diurnal waves' samples, clamped to the sites as the simulator
// clamps them.
func timeline(changes []capacity.Change, waves []capacity.Diurnal, c *cluster.Cluster, end float64) []capacity.Change {
	out := append([]capacity.Change(nil), changes...)
	for i := range waves {
		d := &waves[i]
		site := c.SiteOf(d.Site)
		if site == nil {
			continue
		}
		for k := 0; float64(k)*d.Step <= end; k++ {
			ch := d.At(k)
			ch.T = float64(k) * d.Step
			ch.Available = min(ch.Available, len(site.Nodes))
			ch.Inference = min(ch.Inference, site.GPUs)
			out = append(out, ch)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].T < out[b].T })
	return out
}

// makeFences creates the fence objects: a pod no scheduler binds, a node
// with no GPUs and a TideJob of another scheduler, all of which tide
// leaves alone.
func (lr *liveRun) makeFences() {
	ctx := context.Background()
	meta := metav1.ObjectMeta{Name: fenceName, Namespace: lr.ns, Annotations: map[string]string{fenceAnnot: "0"}}
	if _, err := lr.s.cs.CoreV1().Pods(lr.ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{SchedulerName: "live-fence",
		Containers: []corev1.Container{{Name: "fence", Image: "none"}}}}, metav1.CreateOptions{}); err != nil {
		lr.t.Fatal(err)
	}
	nm := meta
	nm.Namespace = ""
	if _, err := lr.s.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: nm}, metav1.CreateOptions{}); err != nil {
		lr.t.Fatal(err)
	}
	lr.s.nodes = append(lr.s.nodes, fenceName)
	lr.s.tidejob(lr.ns, fenceName, 1, 1, 1, func(tj *kube.TideJob) {
		tj.Annotations = map[string]string{fenceAnnot: "0"}
		tj.Spec.Template.Spec.SchedulerName = "live-fence"
	})
}

// watchPods starts the driver's pod informer (its view of the run's pods,
// read instead of listing them from the API server at every step).
func (lr *liveRun) watchPods() {
	ctx, stop := context.WithCancel(context.Background())
	lr.t.Cleanup(stop)
	f := informers.NewSharedInformerFactoryWithOptions(lr.s.cs, 0, informers.WithNamespace(lr.ns))
	inf := f.Core().V1().Pods()
	lr.podEvent = make(chan struct{}, 1)
	poke := func() {
		select {
		case lr.podEvent <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() },
		UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() }}); err != nil {
		lr.t.Fatal(err)
	}
	lr.podList = inf.Lister().Pods(lr.ns)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
}

// pods returns the run's pods as the API server holds them now. The
// driver's informer applies the pods' changes in the order the API server
// made them, so once it holds a fence value written after the driver's
// and tide's last writes (written when they wrote since: stale), it holds
// those writes; the replica set controller's, waited for by converge,
// come as they come. The pods are copies: change them freely (not their
// maps).
func (lr *liveRun) pods(ctx context.Context) []corev1.Pod {
	if lr.stale {
		v := lr.writeFence(ctx, "pod")
		lr.waitFence("the driver's", "pod", v, func() (string, bool) {
			p, err := lr.podList.Get(fenceName)
			if err != nil {
				return "", false
			}
			return p.Annotations[fenceAnnot], true
		})
		lr.stale = false
	}
	l, err := lr.podList.List(labels.Everything())
	if err != nil {
		lr.t.Fatal(err)
	}
	out := make([]corev1.Pod, len(l))
	for i, p := range l {
		out[i] = *p
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// writeFence writes a new value on the fence of kind and returns it.
func (lr *liveRun) writeFence(ctx context.Context, kind string) string {
	lr.fenceN++
	v := strconv.Itoa(lr.fenceN)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fenceAnnot, v))
	var err error
	switch kind {
	case "pod":
		_, err = lr.s.cs.CoreV1().Pods(lr.ns).Patch(ctx, fenceName, "application/merge-patch+json", patch, metav1.PatchOptions{})
	case "node":
		_, err = lr.s.cs.CoreV1().Nodes().Patch(ctx, fenceName, "application/merge-patch+json", patch, metav1.PatchOptions{})
	case "tidejob":
		_, err = lr.s.dyn.Resource(kube.TideJobResource).Namespace(lr.ns).Patch(ctx, fenceName, "application/merge-patch+json", patch, metav1.PatchOptions{})
	}
	if err != nil {
		lr.t.Fatalf("fence %s: %v", kind, err)
	}
	return v
}

// waitFence waits until cached (whose cache) returns the fence value v.
func (lr *liveRun) waitFence(whose, kind, v string, cached func() (string, bool)) {
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if got, _ := cached(); got == v {
			return
		}
		if time.Since(start) > time.Minute {
			lr.t.Fatalf("%s cache did not see the %s fence %s within a minute", whose, kind, v)
		}
	}
}

// fence writes a new value on the fence of every kind written since the
// last fence (by the driver, or by the replica set controller while the
// driver waited for it) and waits until tide's caches hold them.
func (lr *liveRun) fence(ctx context.Context) {
	for kind, d := range lr.dirty {
		if !d {
			continue
		}
		v := lr.writeFence(ctx, kind)
		lr.waitFence("tide's", kind, v, func() (string, bool) { return lr.sch.Cached(kind, lr.ns, fenceName, fenceAnnot) })
		lr.dirty[kind] = false
	}
}

// drive runs the run until every job finished or was declined, or a
// wall-time limit ($TIDE_LIVE_TIMEOUT, default 20 minutes). Its loop is
// the simulator's (sim.simulator.loop): the next instant is the earliest
// arrival, job boundary, capacity change or (while jobs are active)
// round; at it, boundaries and completions, then capacity, then
// arrivals, then a round when one is due or (on events) something
// happened.
func (lr *liveRun) drive() {
	limit := 20 * time.Minute
	if v := os.Getenv("TIDE_LIVE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			lr.t.Fatalf("TIDE_LIVE_TIMEOUT=%q: %v", v, err)
		}
		limit = d
	}
	ctx := context.Background()
	for end := time.Now().Add(limit); !lr.allDone(); {
		if time.Now().After(end) {
			lr.t.Errorf("live run not done after %v of wall time (%.0f simulated s)", limit, lr.clk.Now())
			return
		}
		now := lr.clk.Now()
		t := math.Inf(1)
		if lr.arrived < len(lr.order) {
			t = lr.order[lr.arrived].j.Submit
		}
		for _, lj := range lr.jobs {
			t = min(t, lj.next)
		}
		if lr.next < len(lr.events) {
			t = min(t, lr.events[lr.next].T)
		}
		for _, at := range lr.ownerAt {
			t = min(t, at)
		}
		if lr.active() {
			t = min(t, float64(lr.tick)*lr.round)
		} else if !math.IsInf(t, 1) {
			lr.tick = max(lr.tick, int64(math.Ceil(t/lr.round))) // skip the idle cluster's empty rounds
		}
		if math.IsInf(t, 1) {
			lr.t.Errorf("live run: at %.0f s nothing is left to happen, %d jobs not done", now, lr.notDone())
			return
		}
		t = max(t, now)
		lr.countUp(t - now)
		lr.clk.set(t)
		finished := lr.boundaries(ctx, t)
		capChanged := lr.capacity(ctx, t)
		lr.capNow = capChanged
		arrived := false
		for lr.arrived < len(lr.order) && lr.order[lr.arrived].j.Submit <= t {
			lj := lr.order[lr.arrived]
			lr.arrived++
			lj.submitted, arrived = true, true
			lr.s.tidejob(lr.ns, lj.name, max(1, lj.j.MinGPUs), max(1, lj.j.MaxGPUs), 1, func(tj *kube.TideJob) {
				tj.Spec.GPUType = lj.j.GPUType
			})
			lr.dirty["tidejob"] = true
		}
		due := float64(lr.tick)*lr.round <= t
		if due {
			lr.tick = max(lr.tick+1, int64(math.Floor(t/lr.round))+1)
		}
		round := lr.active() && (due || (lr.onEvents && (arrived || finished || capChanged)))
		lr.settle(ctx, t, round)
	}
}

func (lr *liveRun) active() bool {
	for _, lj := range lr.jobs {
		if lj.submitted && !lj.done {
			return true
		}
	}
	return false
}

func (lr *liveRun) allDone() bool { return lr.notDone() == 0 }

func (lr *liveRun) notDone() int {
	n := 0
	for _, lj := range lr.jobs {
		if !lj.done {
			n++
		}
	}
	return n
}

// countUp adds each site's GPU time available to training over dt: its
// GPUs less those the capacity timeline gives its owners (inference
// demand, servers taken back), as the simulator counts it.
func (lr *liveRun) countUp(dt float64) {
	if dt <= 0 {
		return
	}
	for i, st := range lr.c.Sites() {
		down := lr.serving[st.Name]
		if k := lr.taken[st.Name]; k > 0 && len(st.Nodes) > 0 {
			down += k * st.GPUs / len(st.Nodes)
		}
		lr.up[i] += float64(max(0, st.GPUs-down)) * dt
	}
}

// advance counts lj's progress and GPU time up to t (sim.simulator.advance).
func (lr *liveRun) advance(lj *liveJob, t float64) {
	dt := t - lj.last
	if dt <= 0 {
		return
	}
	lj.last = t
	k := float64(len(lj.workers))
	if k == 0 {
		return
	}
	gs := k * dt
	lj.rec.GPUSeconds += gs
	site := lr.c.SiteOf(lj.site)
	lr.alloc[lr.siteIx[lj.site]] += gs
	switch site.Kind {
	case cluster.SiteEdge:
		lj.rec.EdgeGPUSeconds += gs
	case cluster.SiteInference:
		lj.rec.InferenceGPUSeconds += gs
	}
	if lj.delay > 0 {
		d := min(lj.delay, dt)
		lj.delay -= d
		dt -= d
		lj.rec.RestartSeconds += d
		if lj.delay <= 1e-9 {
			lj.delay = 0
		}
	}
	if dt > 0 {
		lj.progress += lj.rate * dt
		lj.rec.UsefulGPUSeconds += k * dt
	}
}

// push sets lj's next boundary (sim.simulator.push).
func (lr *liveRun) push(lj *liveJob) {
	lj.next = math.Inf(1)
	switch {
	case len(lj.workers) == 0:
	case lj.delay > 0:
		lj.next = lj.last + lj.delay
	case lj.rate > 0:
		lj.next = lj.last + max(0, min(lj.until, lr.model.Work(lj.j))-lj.progress)/lj.rate
	}
}

// boundaries brings every running job up to t, handles the boundaries due
// at t (sim.simulator.boundary) and finishes the jobs whose work is done:
// their workers succeed. It reports whether a job finished.
func (lr *liveRun) boundaries(ctx context.Context, t float64) bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	finished := false
	var pods []corev1.Pod // the pods as the last instant left them: a completion changes only its job's
	for _, lj := range lr.jobs {
		for !lj.done && lj.next <= t {
			inDelay := lj.delay > 0
			lr.advance(lj, lj.next)
			work := lr.model.Work(lj.j)
			if !inDelay {
				lj.progress = min(lj.until, work)
			}
			if lj.progress >= work {
				if pods == nil {
					pods = lr.pods(ctx)
				}
				lr.complete(ctx, lj, t, pods)
				finished = true
				break
			}
			if !inDelay {
				lj.rate, lj.until = lr.model.Rate(lj.j, lr.allocOf(lj.workers), lj.progress)
			}
			lr.push(lj)
		}
		lr.advance(lj, t)
	}
	return finished
}

// complete marks lj's workers succeeded: its work is done.
func (lr *liveRun) complete(ctx context.Context, lj *liveJob, t float64, pods []corev1.Pod) {
	lj.done, lj.next = true, math.Inf(1)
	lj.rec.Finish, lj.rec.State = t, string(job.Finished)
	for i := range pods {
		p := &pods[i]
		if p.Labels[kube.LabelTideJob] != lj.name || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		p.Status.Phase = corev1.PodSucceeded
		if _, err := lr.s.cs.CoreV1().Pods(lr.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			lr.t.Fatal(err)
		}
		lr.dirty["pod"], lr.stale = true, true
	}
	lj.workers = nil
}

// capacity applies the capacity changes due by t: the inference
// Deployments' replicas and the servers taken back. It reports whether an
// owner's demand changed.
func (lr *liveRun) capacity(ctx context.Context, t float64) bool {
	changed := false
	rose := map[string]bool{}
	for lr.next < len(lr.events) && lr.events[lr.next].T <= t {
		ch := lr.events[lr.next]
		lr.next++
		if ch.Inference >= 0 && ch.Inference != lr.serving[ch.Site] {
			rose[ch.Site] = rose[ch.Site] || ch.Inference > lr.serving[ch.Site]
			lr.serving[ch.Site] = ch.Inference
			changed = true
		}
		if ch.Available >= 0 {
			if k := len(lr.c.SiteOf(ch.Site).Nodes) - ch.Available; k != lr.taken[ch.Site] {
				rose[ch.Site] = rose[ch.Site] || k > lr.taken[ch.Site]
				lr.taken[ch.Site] = k
				changed = true
			}
		}
	}
	if !changed {
		return false
	}
	for site, want := range lr.serving {
		lr.scale(ctx, site, want)
	}
	pods := lr.pods(ctx)
	for site, want := range lr.taken {
		lr.takeBack(ctx, site, want, pods)
	}
	for site := range rose {
		lr.waits = append(lr.waits, ownerWait{t: t, site: site})
	}
	return true
}

// scale sets the replicas of site's inference Deployment (one GPU a
// replica, scheduled by "serving", on the site's nodes), creating it.
func (lr *liveRun) scale(ctx context.Context, site string, want int) {
	if r, ok := lr.replicas[site]; ok && r == want {
		return
	}
	deps := lr.s.cs.AppsV1().Deployments(lr.ns)
	name := "serve-" + kubeName(site)
	n := int32(want)
	for i := 0; ; i++ {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			labels := map[string]string{"app": name}
			d = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: lr.ns, Name: name},
				Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{SchedulerName: "serving", NodeSelector: map[string]string{kube.DefaultSiteLabel: site},
							Containers: []corev1.Container{{Name: "serve", Image: "server",
								Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(1, resource.DecimalSI)}}}}}}}}
			_, err = deps.Create(ctx, d, metav1.CreateOptions{})
		} else {
			d.Spec.Replicas = &n
			_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
		}
		if err == nil {
			lr.replicas[site] = want
			lr.dirty["pod"] = true // the replica set controller's, waited for
			return
		}
		if i > 20 {
			lr.t.Fatalf("scaling %s: %v", name, err)
		}
	}
}

// nodeCosts prices taking each node of a site back as the simulator does
// (sim.simulator.nodeCosts) with its default reclaim cost: for each job
// with workers there, 1 + its GPUs times its checkpoint's seconds.
func (lr *liveRun) nodeCosts(nodes []int, pods []corev1.Pod) map[int]float64 {
	on := map[string]map[string]bool{} // node -> jobs with workers there
	gpus := map[string]int{}           // job -> running workers
	for i := range pods {
		p := &pods[i]
		name := p.Labels[kube.LabelTideJob]
		if name == "" || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if on[p.Spec.NodeName] == nil {
			on[p.Spec.NodeName] = map[string]bool{}
		}
		on[p.Spec.NodeName][name] = true
		gpus[name]++
	}
	out := map[int]float64{}
	for _, n := range nodes {
		for name := range on[lr.kname[n]] {
			out[n] += 1 + float64(gpus[name])*lr.mig.Checkpoint(lr.byName[name].j)
		}
	}
	return out
}

// takeBack labels want servers of an edge site taken back, choosing as
// the simulator does (sim.simulator.setSite): those taken now first, then
// the cheapest to take (idle ones first).
func (lr *liveRun) takeBack(ctx context.Context, site string, want int, pods []corev1.Pod) {
	ids := append([]int(nil), lr.c.SiteOf(site).Nodes...)
	cost := lr.nodeCosts(ids, pods)
	isTaken := func(id int) bool { return lr.tb[lr.kname[id]] }
	sort.SliceStable(ids, func(a, b int) bool {
		if isTaken(ids[a]) != isTaken(ids[b]) {
			return isTaken(ids[a])
		}
		return cost[ids[a]] < cost[ids[b]]
	})
	for i, id := range ids {
		if (i < want) == isTaken(id) {
			continue
		}
		v := "null"
		if i < want {
			v = `"true"`
		}
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, kube.DefaultTakenBackKey, v))
		if _, err := lr.s.cs.CoreV1().Nodes().Patch(ctx, lr.kname[id], "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			lr.t.Fatal(err)
		}
		lr.tb[lr.kname[id]] = i < want
		lr.dirty["node"] = true
	}
}

// settle plays the kubelets and the owners at instant t until the API
// server holds what happens at t, with tide's round when round is set,
// and again while a round evicted pods (the binds it left for their room);
// then it charges each job's new set of workers.
func (lr *liveRun) settle(ctx context.Context, t float64, round bool) {
	taken := lr.tb
	did := false // anything happened at t (else the pods are as the last instant left them)
	for pass := 0; ; pass++ {
		t0 := time.Now()
		if pass > 0 || lr.stirred(t) {
			lr.converge(ctx, t, taken, pass == 0 && lr.capNow)
			did = true
		}
		t1 := time.Now()
		lr.spent["kubelets and owners"] += t1.Sub(t0)
		if !round {
			break
		}
		if pass > 20 {
			lr.t.Fatalf("at %.0f s tide's rounds still evict pods after %d rounds", t, pass)
		}
		lr.fence(ctx)
		t2 := time.Now()
		lr.spent["fences"] += t2.Sub(t1)
		before := lr.sch.Stats()
		step := lr.sch.Round
		if pass > 0 {
			step = lr.sch.Settle // the plan stands: only its binds are left
		}
		if err := step(ctx); err != nil {
			lr.t.Logf("round at %.0f s: %v", t, err)
		}
		lr.spent["tide's rounds"] += time.Since(t2)
		after := lr.sch.Stats()
		lr.debugf(t, "pass %d: round %v: evicted %d bound %d created %d", pass, pass == 0, after.Evicted-before.Evicted, after.Bound-before.Bound, after.Created-before.Created)
		if pass == 0 {
			lr.rounds++
			lr.reclaims(t)
		}
		if after.Declined != lr.declined {
			// Until each TideJob tide counts declined reads Declined: a
			// status write that lost a conflict lands a round later.
			lr.noteDeclined(ctx)
		}
		round = after.Evicted != before.Evicted || after.Bound != before.Bound || after.Created != before.Created
		lr.stale = lr.stale || round // tide wrote pods
	}
	if !did {
		return
	}
	t0 := time.Now()
	pods := lr.pods(ctx)
	if lr.debug != nil && t >= lr.dbgFrom && t <= lr.dbgTo {
		for _, p := range pods {
			lr.debugf(t, "pod %s job %s node %q phase %s deleting %v", p.Name, p.Labels[kube.LabelTideJob], p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
		}
	}
	lr.launch(pods, t)
	lr.spent["charging"] += time.Since(t0)
	lr.ownersMet(pods, t, taken)
}

// reclaims marks the running jobs whose GPUs tide's round at t took
// back for their owner (kube.Scheduler.TakenBack) reclaimed, and their
// nodes' owners waiting for their checkpoint, whether or not a worker of
// theirs is evicted: a job tide's engine stops and starts again at once
// with as many workers on each node keeps its pods (a pod holds a count
// of a node's GPUs, not the engine's GPU), but the simulator charges it a
// reclaim and its restart, and its owner the checkpoint.
func (lr *liveRun) reclaims(t float64) {
	for _, lj := range lr.jobs {
		if lj.done || len(lj.workers) == 0 || !lr.sch.TakenBack("tidejob/"+lr.ns+"/"+lj.name) {
			continue
		}
		lj.reclaimed = true
		for _, n := range lj.workers {
			lr.ownerAt[n] = max(lr.ownerAt[n], t+lr.mig.Checkpoint(lj.j))
		}
	}
}

// debugf writes a line of the driver's debug log at t.
func (lr *liveRun) debugf(t float64, format string, args ...any) {
	if lr.debug == nil || t < lr.dbgFrom || t > lr.dbgTo {
		return
	}
	fmt.Fprintf(lr.debug, "t=%.0f "+format+"\n", append([]any{t}, args...)...)
}

// stirred: something may have changed the pods since the last instant
// settled: the driver wrote (a completion, a Deployment scaled, a job
// submitted, a server taken back), or a reclaimed worker's checkpoint is
// done. Otherwise the kubelets and owners have nothing to do at t.
func (lr *liveRun) stirred(t float64) bool {
	for _, d := range lr.dirty {
		if d {
			return true
		}
	}
	for _, at := range lr.ownerAt {
		if at <= t {
			return true
		}
	}
	return false
}

// converge plays, at t, the serving pods' scheduler and every kubelet until
// nothing is left to do: serving pods wait for the replica set controller
// to make or delete them; new pending ones are bound to the first node of
// their site with a GPU free (fresh: the owners' demand rose at t), those
// that wait go where tide makes room for them (kube.Scheduler.MakingRoom)
// once the checkpoint of the job it took the GPUs from is done; bound
// pods start; deleted pods go at once.
func (lr *liveRun) converge(ctx context.Context, t float64, taken map[string]bool, fresh bool) {
	for i := 0; ; i++ {
		if i > 2000 {
			lr.t.Fatalf("at %.0f s the serving pods never matched their Deployments' replicas", t)
		}
		pods := lr.pods(ctx)
		used := map[string]int{}
		serving := map[string]int{}
		var pending []*corev1.Pod
		for i := range pods {
			p := &pods[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if p.Spec.NodeName != "" {
				q := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]
				used[p.Spec.NodeName] += int(q.Value())
			}
			if p.Spec.SchedulerName == "serving" && p.DeletionTimestamp == nil {
				site := p.Spec.NodeSelector[kube.DefaultSiteLabel]
				serving[site]++
				if p.Spec.NodeName == "" {
					pending = append(pending, p)
				}
			}
		}
		settled := true
		for site, want := range lr.replicas {
			if serving[site] != want {
				settled = false // the replica set controller is at work
			}
		}
		lr.kwokBusy = false
		acted := lr.kubelets(ctx, pods, t)
		if lr.kwokBusy {
			settled = false // kwok has bound pods to start
		}
		if acted {
			lr.dirty["pod"], lr.stale = true, true
			continue // bind on the room that made
		}
		for _, p := range pending {
			site := p.Spec.NodeSelector[kube.DefaultSiteLabel]
			best := -1
			if node := lr.sch.MakingRoom(lr.ns, p.Name); node != "" {
				// Where tide makes room for it, once the checkpoint of
				// the job it took the GPUs from is done.
				if id := lr.node[node]; lr.ownerAt[node] <= t && lr.c.Nodes[id].GPUs-used[node] > 0 {
					best = id
				}
			} else if fresh {
				// Idle GPUs: the first node's.
				for _, id := range lr.c.SiteOf(site).Nodes {
					if lr.c.Nodes[id].GPUs-used[lr.kname[id]] > 0 {
						best = id
						break
					}
				}
			}
			if best < 0 {
				continue
			}
			// The deletion cost makes the replica set controller, scaling
			// down, free the last nodes' GPUs first, as the simulator does.
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: lr.ns, Name: p.Name,
				Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": strconv.Itoa(len(lr.c.Nodes) - best)}},
				Target: corev1.ObjectReference{Kind: "Node", Name: lr.kname[best]}}
			if err := lr.s.cs.CoreV1().Pods(lr.ns).Bind(ctx, b, metav1.CreateOptions{}); err == nil {
				used[lr.kname[best]]++
				acted = true
			}
		}
		if acted {
			lr.stale = true
		}
		if !settled || acted {
			lr.dirty["pod"] = true
		}
		if settled && !acted {
			return
		}
		if !acted {
			// The replica set controller is at work: its pods come in
			// the informer's time.
			select {
			case <-lr.podEvent:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// kubelets starts bound pods and ends deleted ones at t, at once. A
// worker of tide's whose GPUs tide took back for their owner
// (kube.Scheduler.TakenBack) marks its job reclaimed and its node's
// owner waiting for the job's checkpoint (ownerAt), as the simulator
// charges a reclaim: the job stops at once, the owner waits. It reports
// whether it did anything.
func (lr *liveRun) kubelets(ctx context.Context, pods []corev1.Pod, t float64) bool {
	acted := false
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Name == fenceName:
		case p.DeletionTimestamp != nil:
			if lj := lr.byName[p.Labels[kube.LabelTideJob]]; lj != nil && p.Spec.NodeName != "" &&
				lr.sch.TakenBack("tidejob/"+lr.ns+"/"+lj.name) {
				// Its owner gets the GPUs once the job's checkpoint is
				// done; the job's GPUs are free of it now (the
				// simulator's model: a reclaim stops the job at once and
				// the owner waits for the checkpoint).
				lr.ownerAt[p.Spec.NodeName] = max(lr.ownerAt[p.Spec.NodeName], t+lr.mig.Checkpoint(lj.j))
				lj.reclaimed = true
			}
			zero := int64(0)
			_ = lr.s.cs.CoreV1().Pods(lr.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			acted = true
		case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending && lr.kwok:
			lr.kwokBusy = true // kwok starts it
		case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending:
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if _, err := lr.s.cs.CoreV1().Pods(lr.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				lr.t.Fatal(err)
			}
			acted = true
		}
	}
	return acted
}

// ownersMet ends the owners' waits whose demand is met at t: no serving
// pod of the site pending, no worker of tide's on a server taken back, no
// checkpoint of a job tide took the site's GPUs from still going.
// A wait that lasted counts, once per rise in demand, as the simulator
// counts one per capacity change that took GPUs from training.
func (lr *liveRun) ownersMet(pods []corev1.Pod, t float64, taken map[string]bool) {
	open := map[string]bool{}
	for node, at := range lr.ownerAt {
		if at > t {
			open[lr.c.Nodes[lr.node[node]].Site] = true // a checkpoint its owner waits for
		} else {
			delete(lr.ownerAt, node)
		}
	}
	if len(lr.waits) == 0 {
		return
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		switch {
		case p.Spec.SchedulerName == "serving" && p.Spec.NodeName == "" && p.DeletionTimestamp == nil:
			open[p.Spec.NodeSelector[kube.DefaultSiteLabel]] = true
		case p.Labels[kube.LabelTideJob] != "" && taken[p.Spec.NodeName]:
			open[lr.c.Nodes[lr.node[p.Spec.NodeName]].Site] = true
		}
	}
	keep := lr.waits[:0]
	for _, w := range lr.waits {
		if open[w.site] {
			keep = append(keep, w)
			continue
		}
		if t > w.t {
			lr.nWaits++
			lr.waitSec += t - w.t
		}
	}
	lr.waits = keep
}

// noteDeclined marks the jobs tide declined done.
func (lr *liveRun) noteDeclined(ctx context.Context) {
	l, err := lr.s.dyn.Resource(kube.TideJobResource).Namespace(lr.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		lr.t.Fatal(err)
	}
	for _, u := range l.Items {
		p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if lj := lr.byName[u.GetName()]; lj != nil && !lj.done && p == kube.PhaseDeclined {
			lj.done, lj.rec.State = true, string(job.Declined)
			lr.declined++
		}
	}
}

// launch charges each job's new set of running workers at t as the
// simulator charges the engine's change (sim.simulator.schedule): the
// start cost at first, the restart cost after it held nothing or lost
// GPUs to their owner, the resize cost when its workers changed while
// running, plus the migration of a move (across sites, or inside one when
// resized); a job left with no workers was preempted.
func (lr *liveRun) launch(pods []corev1.Pod, t float64) {
	mine := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if name := p.Labels[kube.LabelTideJob]; name != "" {
			mine[name] = append(mine[name], p.Spec.NodeName)
		}
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	for _, lj := range lr.jobs {
		nodes := mine[lj.name]
		if len(nodes) == 0 && len(lj.workers) > 0 && !lj.done {
			lr.debugf(t, "charge %s (%s): no workers", lj.name, lj.j.ID)
		}
		sort.Strings(nodes)
		reclaimed := lj.reclaimed
		lj.reclaimed = false
		if lj.done || strings.Join(nodes, ",") == strings.Join(lj.workers, ",") && !reclaimed {
			continue
		}
		was := len(lj.workers) > 0
		if was && (reclaimed || len(nodes) == 0) {
			lj.rec.Preemptions++
			if reclaimed {
				lj.rec.Reclaims++
			}
			was = false
		}
		lj.workers = nodes
		lj.last = t
		if len(nodes) == 0 {
			lj.next = math.Inf(1)
			continue
		}
		costs := lr.model.Costs(lj.j)
		site := lr.c.Nodes[lr.node[nodes[0]]].Site
		kind := engineKind(lj.rec.Start >= 0, was)
		lr.debugf(t, "charge %s (%s): %s on %v", lj.name, lj.j.ID, kind, nodes)
		switch kind {
		case "start":
			lj.rec.Start = t
			lj.delay = costs.Start
		case "restart":
			lj.rec.Restarts++
			lj.delay = costs.Restart
		case "resize":
			lj.rec.Restarts++
			lj.rec.Resizes++
			lj.delay = costs.Resize
		}
		move := 0.0
		switch {
		case kind == "start" || lj.site == "":
		case lj.site != site:
			lj.rec.CrossSiteMoves++
			move = lr.mig.CrossSite(lj.j)
		case kind == "resize":
			lj.rec.IntraSiteMoves++
			move = lr.mig.IntraSite(lj.j)
		}
		lj.rec.MigrationSeconds += move
		lj.delay += move
		lj.site = site
		lj.rec.State = string(job.Running)
		lj.rate, lj.until = lr.model.Rate(lj.j, lr.allocOf(nodes), lj.progress)
		lr.push(lj)
	}
}

// engineKind names the engine's change for a job given new workers: its
// first start, a restart after it held nothing, or a resize.
func engineKind(started, running bool) string {
	switch {
	case !started:
		return "start"
	case !running:
		return "restart"
	}
	return "resize"
}

// allocOf is the allocation of workers on nodes (sorted names).
func (lr *liveRun) allocOf(nodes []string) perf.Alloc {
	a := perf.Alloc{GPUType: lr.c.Nodes[lr.node[nodes[0]]].GPUType}
	for i, n := range nodes {
		if i == 0 || n != nodes[i-1] {
			a.PerNode = append(a.PerNode, 0)
		}
		a.PerNode[len(a.PerNode)-1]++
	}
	return a
}

// testLiveSmall runs testdata/live-small.yaml live and checks it against
// the simulator with the bounds: deadlines met within 3 points,
// average JCT, harvested GPU-hours and inference wait within 5%, every job
// finished in both (docs/kubernetes.md, "Live scenarios").
func testLiveSmall(t *testing.T, e *env) {
	live, sim, note := runLive(t, e, filepath.Join("testdata", "live-small.yaml"), "")
	t.Log(agreement(live.Runs[0], sim.Runs[0]) + "; " + note)
	l, s := report.Summarize(live.Runs[0]), report.Summarize(sim.Runs[0])
	if l.Finished != l.Jobs || s.Finished != s.Jobs {
		t.Fatalf("finished %d live, %d simulated, of %d", l.Finished, s.Finished, l.Jobs)
	}
	lm, lj, lh, lw := liveFigures(live.Runs[0])
	sm, sj, sh, sw := liveFigures(sim.Runs[0])
	if math.Abs(lm-sm) > 3 {
		t.Errorf("deadlines met: %.1f%% live, %.1f%% simulated: more than 3 points apart", lm, sm)
	}
	for _, f := range []struct {
		what       string
		live, simd float64
	}{{"average JCT (s)", lj, sj}, {"harvested GPU-hours", lh, sh}, {"inference wait (s)", lw, sw}} {
		if math.Abs(f.live-f.simd) > 0.05*math.Abs(f.simd) {
			t.Errorf("%s: %.2f live, %.2f simulated: more than 5%% apart", f.what, f.live, f.simd)
		}
	}
	if lh <= 0 {
		t.Errorf("live run harvested no GPU-hours")
	}
}

// apiCalls counts API requests by client ("driver", "tide"), verb and
// resource.
type apiCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// wrap makes cfg's clients count their requests as who's.
func (c *apiCalls) wrap(cfg *rest.Config, who string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	parse := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if info, err := parse.NewRequestInfo(req); err == nil && info.IsResourceRequest {
				res := info.Resource
				if info.Subresource != "" {
					res += "/" + info.Subresource
				}
				c.mu.Lock()
				c.n[who+" "+info.Verb+" "+res]++
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// perRound lists the counts per round, most first.
func (c *apiCalls) perRound(rounds int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return c.n[keys[a]] > c.n[keys[b]] })
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, float64(c.n[k])/float64(max(1, rounds)))
	}
	return b.String()
}
