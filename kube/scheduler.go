// Package kube runs tide as a Kubernetes scheduler. It watches Nodes and
// the Pods whose spec.schedulerName is tide's, groups the pods into jobs
// (TideJob workers, gangs of annotated pods, single pods), decides with
// tide's engine under any of its policies, binds pods through the
// pods/binding subresource and preempts through the policy/v1 Eviction API.
// It needs only client-go.
//
// The engine is the desired state and the API server the actual one. Each
// round: read the informers' caches, bring the engine up to date (new jobs
// submitted, ended ones finished, the engine rebuilt when the nodes' GPU
// capacity changed), run one engine round, then reconcile: evict pods the
// plan no longer wants, create the worker pods a TideJob lacks and bind the
// missing workers of each job all together once every node they go to has
// room. Nothing is kept that the API server does not hold, so a restarted
// scheduler picks up bound pods where they run (engine.Adopt) and binds
// only pods that are still unbound.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy"
)

// Config configures a Scheduler. Client is required; the rest have defaults.
type Config struct {
	Client kubernetes.Interface
	// Dynamic reads and writes TideJobs; nil runs without them (plain pods
	// only).
	Dynamic dynamic.Interface
	// SchedulerName is the spec.schedulerName of the pods tide schedules
	// (default "tide").
	SchedulerName string
	// Policy is a policy spec (policy.Parse), default "fifo".
	Policy string
	// Quotas are GPUs guaranteed per tenant (a namespace, or a job's
	// queue); nil means no quotas. See policy.Quota.
	Quotas map[string]int
	// Borrow lets tenants use idle GPUs beyond their quota (reclaimed by
	// preemption); only read when quotas are set (here or by TideQueues).
	Borrow bool
	// NoQueues: do not read TideQueues (quota.go), only Quotas.
	NoQueues bool
	// FillIdle gives the GPUs a plan leaves idle to the jobs it left out
	// until the policy's next plan claims them (quota.go, liveQuota).
	FillIdle bool
	// GPUTypeLabel is the node label holding the GPU type (default
	// "nvidia.com/gpu.product", as NVIDIA's GPU feature discovery sets
	// it); pods pick a type with a nodeSelector on it.
	GPUTypeLabel string
	// Sites names the node labels giving each node its site and site kind
	// (sites.go); empty fields take the defaults.
	Sites SiteLabels
	// Round is the time between periodic rounds (default 2 s); rounds also
	// run on every change, at most one per MinRoundGap (default 20 ms).
	Round, MinRoundGap time.Duration
	// Grace is the grace period given to evicted pods (default 30 s; 0
	// kills at once).
	Grace *time.Duration
	// NotReadyGrace is how long a node may be NotReady before the workers
	// on it count as lost (default DefaultNotReadyGrace; nodes.go).
	NotReadyGrace time.Duration
	// Parallel is the number of API calls in flight at once (default 32).
	Parallel int
	// EventQPS is the most Events written per second, the rest dropped
	// (0: 20, burst 100; negative: no limit, an Event for every bind and
	// preemption, as kube-scheduler writes them).
	EventQPS float64
	Clock    engine.Clock // default: the wall clock
	Log      *slog.Logger // default: discard
	// Self is the object events about tide itself are recorded on (a
	// policy's fallback): tide's own pod when it runs in the cluster
	// (cmd/tide-kube reads POD_NAME and POD_NAMESPACE); nil records them
	// in the log only.
	Self *corev1.ObjectReference
	// Live, when set, is a driver standing in for the training processes
	// (live.go).
	Live *Live
	// PolicyStateLimit is the most bytes of policy state kept on the
	// Lease under leader election (default DefaultPolicyStateLimit;
	// policystate.go); a larger state is not saved and a Warning Event
	// says so.
	PolicyStateLimit int
	// Observe, when set, is called at the end of every round that reached
	// the engine (metrics and benchmarks read it); it must not block.
	Observe func(RoundInfo)
	// PairThroughputs, when set, is a file of Gavel's measured
	// throughputs (simulation_throughputs.json's format, as tide serve's
	// --pair-throughputs): TideJobs whose spec.jobType it knows are
	// packable, and the packing policies (gandiva:pack=true,
	// gavel-*:space_sharing=true) may run two of them on one GPU
	// (sharepairs.go, docs/sharing.md). Empty: no job shares a whole GPU.
	PairThroughputs string
}

// RoundInfo is what one round did.
type RoundInfo struct {
	Decide time.Duration // the engine's decision alone
	Total  time.Duration // the whole round: reading caches, deciding, API calls
	Jobs   int           // jobs the engine knew
	Binds  int           // pods bound this round (successful binding calls)
}

// Stats counts what a scheduler has done, for tests and benchmarks.
type Stats struct {
	Rounds, Rebuilds      int
	Bound, BindErrors     int
	Evicted, EvictErrors  int
	Lost                  int // evictions of workers whose node became unusable (in Evicted too)
	Created, CreateErrors int
	// Tidal capacity (tidal.go): jobs preempted because their GPUs'
	// owners took them back, other schedulers' pods bound after tide gave
	// GPUs back for them and their waits, GPU-hours held on lent sites.
	Reclaims             int
	InferenceWaits       int
	InferenceWaitSeconds float64
	Harvest              []SiteHarvest
	// TideJobs that met or missed their deadlines, or were declined
	// (deadline.go).
	DeadlinesMet, DeadlinesMissed, Declined int
	RoundSeconds                            float64 // total time in rounds (decide + API calls)
	DecideSeconds                           float64 // total time in engine rounds alone
	MaxDecideSeconds                        float64
	LastRound                               time.Time
}

// Scheduler is tide on Kubernetes.
type Scheduler struct {
	cfg  Config
	log  *slog.Logger
	pol  engine.Policy
	grp  grouping
	kick chan struct{}

	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	tjs     cache.GenericLister // nil without TideJobs
	synced  []cache.InformerSynced
	factory informers.SharedInformerFactory
	dynFac  dynamicinformer.DynamicSharedInformerFactory

	mu      sync.Mutex // guards what follows and serialises rounds
	eng     *engine.Engine
	state   *policyStateStore         // the policy's persisted state; nil: kept in memory only (policystate.go)
	sig     string                    // the cluster the engine was built on
	seen    *view                     // the last round's view, for the console (console.go)
	ids     map[string]string         // workload key -> engine job ID
	gen     map[string]int            // workload key -> resubmissions
	reran   map[string]time.Time      // plain gang key -> the failure its run again began after (workload.rerunGang)
	work    map[string]*workload      // by engine ID, this round
	assumed map[types.UID]string      // pods bound by us the cache has not seen bound yet
	evicted map[types.UID]bool        // pods we evicted that the cache still lists
	created map[types.UID]*corev1.Pod // worker pods we created (and bound) the cache has not seen yet
	partIdx map[types.UID]int         // GPU indices of the parts among assumed pods (gpuindex.go)
	said    map[string]string         // problems already logged, by object
	// deleted are the pods the pod informer saw deleted since the last
	// round (its handler's goroutine writes them; look drains them).
	deleted struct {
		sync.Mutex
		uids map[types.UID]bool
	}
	// tjMemo holds the TideJobs look converted, by namespace/name: each
	// is converted again only when it changed.
	tjMemo map[string]convertedTideJob
	// notReady is when tide first saw each node NotReady (nodes.go).
	notReady map[string]time.Time
	warned   int                  // engine warnings already reported
	warnedAt map[string]time.Time // when each distinct warning was last reported
	now      func() time.Time     // the wall clock; tests move it
	dirty    bool                 // actual state diverged (a failed call): rebuild
	lastRep  float64
	stats    Stats
	status   map[string]TideJobStatus // last status written, by TideJob key
	health   health                   // what /healthz, /readyz and /metrics read (health.go)
	quota    *liveQuota               // the quotas in force (quota.go)
	queues   queues                   // TideQueues (quota.go)

	cur       *view              // this round's view (the placer reads its nodes)
	unsched   map[string]string  // workload key -> why the engine does not hold it (impossible, refused)
	retries   map[string]*retry  // TideJob key -> backoff after refused or rejected workers
	rejects   map[types.UID]bool // rejected worker pods already counted
	fb        *feedback          // events and pod conditions
	reclaim   reclaim            // evictions a disruption budget refused (reclaim.go)
	tidal     tidal              // capacity lent by edge and inference sites (tidal.go)
	deadlines deadlines          // deadline outcomes counted (deadline.go)
	pairs     *perf.Pairs        // the pair-throughput model; nil: no job is packed (sharepairs.go)
	// wholeOnly names the policy when it is elastic: it places whole GPUs
	// only, so jobs asking for part of each GPU are not submitted to it.
	wholeOnly string
}

// New makes a scheduler; Run starts it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("kube: a client is required")
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = "tide"
	}
	if cfg.Policy == "" {
		cfg.Policy = "fifo"
	}
	if cfg.GPUTypeLabel == "" {
		cfg.GPUTypeLabel = "nvidia.com/gpu.product"
	}
	cfg.Sites.fill()
	if cfg.Round <= 0 {
		cfg.Round = 2 * time.Second
	}
	if cfg.MinRoundGap <= 0 {
		cfg.MinRoundGap = 20 * time.Millisecond
	}
	if cfg.Grace == nil {
		g := 30 * time.Second
		cfg.Grace = &g
	}
	if cfg.NotReadyGrace <= 0 {
		cfg.NotReadyGrace = DefaultNotReadyGrace
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 32
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var pol engine.Policy
	var err error
	if cfg.Live != nil && cfg.Live.Policy != nil {
		pol = cfg.Live.Policy
	} else if pol, err = policy.Parse(cfg.Policy, policy.Context{}); err != nil {
		return nil, fmt.Errorf("kube: policy: %w", err)
	}
	pairs, err := loadPairs(cfg.PairThroughputs)
	if err != nil {
		return nil, fmt.Errorf("kube: pair throughputs: %w", err)
	}
	quota := &liveQuota{inner: pol, fill: cfg.FillIdle}
	quota.set(cfg.Quotas, nil, nil, cfg.Borrow)
	pol = quota
	s := &Scheduler{cfg: cfg, log: cfg.Log, grp: grouping{gpuTypeLabel: cfg.GPUTypeLabel}, pairs: pairs,
		kick: make(chan struct{}, 1), ids: map[string]string{}, gen: map[string]int{},
		assumed: map[types.UID]string{}, evicted: map[types.UID]bool{}, said: map[string]string{},
		created: map[types.UID]*corev1.Pod{},
		status:  map[string]TideJobStatus{}, unsched: map[string]string{}, retries: map[string]*retry{},
		rejects: map[types.UID]bool{}, quota: quota, notReady: map[string]time.Time{}, now: time.Now,
		warnedAt: map[string]time.Time{}}
	s.pol = workerPolicy{inner: pol, per: s.perWorker, place: s.trialPlacer, hosts: s.hosts}
	if info, _ := policy.Lookup(cfg.Policy); info.Elastic && (cfg.Live == nil || cfg.Live.Policy == nil) {
		s.wholeOnly = info.Name
	}
	if cfg.Live != nil && cfg.Live.Placer != nil {
		s.pol = workerPolicy{inner: pol, per: s.perWorker} // live.go
	}
	if pairs != nil {
		s.grp.pairs = &pairTable{file: cfg.PairThroughputs, model: pairs.Table}
	}
	return s, nil
}

// WallClock is the engine's clock in a live scheduler: Unix time, seconds.
type WallClock struct{}

// Now implements engine.Clock.
func (WallClock) Now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// Stats returns a copy of the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Scheduler) perWorker(id string) int {
	if w := s.work[id]; w != nil {
		return w.per
	}
	return 1
}

// Run watches the API server and schedules until ctx ends. It returns
// once the events of its last round are written (at most a few seconds
// after ctx ends; feedback.close).
func (s *Scheduler) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer s.unwatch(cancel)
	if err := s.watch(ctx); err != nil {
		return err
	}
	if s.paced() { // the driver runs the rounds (live.go)
		<-ctx.Done()
		return nil
	}
	return s.loop(ctx)
}

// watch starts the informers and waits for their caches to sync; they run
// until ctx ends.
func (s *Scheduler) watch(ctx context.Context) error {
	s.factory = informers.NewSharedInformerFactory(s.cfg.Client, 0)
	nodeInf := s.factory.Core().V1().Nodes()
	podInf := s.factory.Core().V1().Pods()
	s.nodes, s.pods = nodeInf.Lister(), podInf.Lister()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	if _, err := nodeInf.Informer().AddEventHandler(handler); err != nil {
		return err
	}
	podHandler := handler
	podHandler.DeleteFunc = func(obj any) { s.podDeleted(obj); s.poke() }
	if _, err := podInf.Informer().AddEventHandler(podHandler); err != nil {
		return err
	}
	s.synced = []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.Informer().HasSynced}
	if s.cfg.Dynamic != nil {
		// Without the CRD the informer would retry forever, logging only
		// client-go's watch failures: say so once and stop.
		if _, err := s.cfg.Dynamic.Resource(TideJobResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("kube: the TideJob CRD (tidejobs.%s) is not installed: kubectl apply -f deploy/crd.yaml, or run without TideJobs (--no-tidejobs)", Group)
			}
			return fmt.Errorf("kube: listing TideJobs: %w", err)
		}
		s.dynFac = dynamicinformer.NewDynamicSharedInformerFactory(s.cfg.Dynamic, 0)
		inf := s.dynFac.ForResource(TideJobResource)
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return err
		}
		s.tjs = inf.Lister()
		s.synced = append(s.synced, inf.Informer().HasSynced)
		if err := s.watchQueues(ctx); err != nil {
			return err
		}
		s.dynFac.Start(ctx.Done())
	}
	s.fb = newFeedback(ctx, s.cfg.Client, s.cfg.SchedulerName, s.cfg.EventQPS)
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("kube: caches did not sync: %w", ctx.Err())
	}
	s.health.synced.Store(true)
	return nil
}

// unwatch stops what watch started, after the last round: it writes the
// events recorded so far (feedback.close), cancels the informers' context
// and waits for them to end.
func (s *Scheduler) unwatch(cancel context.CancelFunc) {
	s.fb.close()
	cancel()
	if s.factory != nil {
		s.factory.Shutdown()
	}
	if s.dynFac != nil {
		s.dynFac.Shutdown()
	}
}

// loop schedules until ctx ends: a round on every change and every Round.
func (s *Scheduler) loop(ctx context.Context) error {
	s.log.Info("tide kube scheduler started", "scheduler", s.cfg.SchedulerName, "policy", s.pol.Name())
	t := time.NewTicker(s.cfg.Round)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			select { // gather a burst of events into one round
			case <-ctx.Done():
				return nil
			case <-time.After(s.cfg.MinRoundGap):
			}
		case <-t.C:
		}
		select { // this round covers any kick that came meanwhile
		case <-s.kick:
		default:
		}
		if err := s.Round(ctx); err != nil {
			s.log.Error("scheduling round failed", "err", err)
		}
	}
}

// podDeleted notes a pod the informer saw deleted, for the next look.
func (s *Scheduler) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.deleted.Lock()
	defer s.deleted.Unlock()
	if s.deleted.uids == nil {
		s.deleted.uids = map[types.UID]bool{}
	}
	s.deleted.uids[p.UID] = true
}

func (s *Scheduler) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// view is the API server's state as one round sees it.
type view struct {
	nodes   map[string]*corev1.Node // GPU nodes, usable or not
	states  map[string]*nodeState   // the same nodes' room beyond GPUs
	alloc   map[string]int          // node -> allocatable GPUs
	phys    map[string]int          // node -> GPUs held by live pods, terminating ones included
	foreign map[string]int          // node -> GPUs held by running pods no active tide job owns (lost workers included)
	lost    []lostPod               // tide's live workers on nodes they can no longer run on, to evict
	held    map[string]int          // node -> GPUs held by running pods of active tide jobs
	parts   map[string]map[int]bool // node -> GPU indices the running parts of active tide jobs hold
	shared  map[string]map[int]bool // node -> GPU indices live parts hold there (gpuindex.go)
	onIndex map[string][]string     // "node#index" -> workload keys of the live pods bound there by index (sharepairs.go)
	partUse map[string][2]float64   // "node#index" -> share and GiB the live parts bound there hold (gpuindex.go)
	work    map[string]*workload    // by workload key
	probs   []problem
	invalid map[string]*TideJob // TideJobs whose spec tide refuses, by workload key
	asking  []*corev1.Pod       // other schedulers' pending pods asking for GPUs (tidal.go)

	// migNodes are each node's engine nodes of MIG slices (mig.go); alloc,
	// phys, foreign and held count slices under those names too.
	migNodes map[string][]string
}

// Round runs one scheduling round. Run calls it; tests may too.
func (s *Scheduler) Round(ctx context.Context) error { return s.round(ctx, true) }

// round runs one round; without decide the engine keeps its last
// decision and the round only moves the API server toward it (Settle).
func (s *Scheduler) round(ctx context.Context, decide bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health.begin()
	defer func() { s.health.end(s.stats) }()
	t0 := time.Now()
	defer func() {
		s.stats.Rounds++
		s.stats.RoundSeconds += time.Since(t0).Seconds()
		s.stats.LastRound = time.Now()
	}()
	v, err := s.look()
	if err != nil {
		return err
	}
	s.seen = v
	for _, p := range v.probs {
		key := p.kind + "/" + p.ns + "/" + p.name
		if s.said[key] != p.msg {
			s.said[key] = p.msg
			s.log.Warn("cannot schedule", "object", p.kind+" "+p.ns+"/"+p.name, "err", p.msg)
		}
	}
	s.noteWorkers(v)
	for key := range s.unsched {
		if v.work[key] == nil {
			delete(s.unsched, key)
		}
	}
	c, sig, err := s.buildCluster(v)
	if err != nil {
		return err
	}
	if c == nil {
		s.noGPUs(ctx, v) // no GPU node to plan with
		return nil
	}
	if s.eng == nil || sig != s.sig || s.dirty {
		if err := s.rebuild(c, sig, v); err != nil {
			return err
		}
	} else {
		s.update(v)
	}
	if err := s.tide(v, c); err != nil {
		return err
	}
	s.progress()
	queues := s.applyQueues(c.TotalGPUs())
	s.syncPolicyState(ctx)
	t1 := time.Now()
	if decide {
		_, err = s.eng.Schedule()
		s.policyWarnings()
	}
	if err != nil {
		return err
	}
	took := time.Since(t1)
	d := took.Seconds()
	s.stats.DecideSeconds += d
	s.stats.MaxDecideSeconds = max(s.stats.MaxDecideSeconds, d)
	bound0 := s.stats.Bound
	s.reconcile(ctx, v)
	s.explainBlocked(ctx, v)
	s.explainWaiting(ctx, v)
	s.writeStatus(ctx, v)
	s.writeQueueStatus(ctx, queues)
	if s.cfg.Observe != nil {
		s.cfg.Observe(RoundInfo{Decide: took, Total: time.Since(t0), Jobs: len(s.work), Binds: s.stats.Bound - bound0})
	}
	return nil
}

// convertedTideJob is a TideJob look converted from the informer's
// object at a resource version. Nothing changes it after: a round reads
// it (writeStatus writes a copy).
type convertedTideJob struct {
	uid types.UID
	rv  string
	tj  *TideJob
}

// look reads the caches.
func (s *Scheduler) look() (*view, error) {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var tjs []*TideJob
	if s.tjs != nil {
		objs, err := s.tjs.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		memo := make(map[string]convertedTideJob, len(objs))
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			key := u.GetNamespace() + "/" + u.GetName()
			c, ok := s.tjMemo[key]
			if !ok || c.uid != u.GetUID() || c.rv != u.GetResourceVersion() {
				c = convertedTideJob{uid: u.GetUID(), rv: u.GetResourceVersion(), tj: &TideJob{}}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c.tj); err != nil {
					s.warnOnce("tidejob/"+key, "tidejob "+key, err.Error())
					continue
				}
			}
			memo[key] = c
			tj := c.tj
			if name := tj.Spec.Template.Spec.SchedulerName; name != s.cfg.SchedulerName && (name != "" || s.cfg.SchedulerName != "tide") {
				continue // another scheduler's
			}
			tjs = append(tjs, tj)
		}
		s.tjMemo = memo
	}
	v := &view{nodes: map[string]*corev1.Node{}, states: map[string]*nodeState{}, alloc: map[string]int{},
		phys: map[string]int{}, foreign: map[string]int{}, held: map[string]int{}, invalid: map[string]*TideJob{}}
	byName := make(map[string]*corev1.Node, len(nodes))
	lostNode := map[string]string{}
	now := s.now()
	// A node with no GPU allocatable is still a GPU node while tide's
	// workers run there, and so is a MIG profile with no slice
	// allocatable: its device plugin may be restarting (shortOf).
	working := map[string]map[string]bool{} // node -> the MIG profiles tide's workers there ask for
	for _, p := range pods {
		if p.Spec.SchedulerName == s.cfg.SchedulerName && !podTerminal(p) {
			if node := s.nodeOf(p); node != "" {
				if working[node] == nil {
					working[node] = map[string]bool{}
				}
				for _, prof := range migProfiles(p) {
					working[node][prof] = true
				}
			}
		}
	}
	for _, n := range nodes {
		byName[n.Name] = n
		if why := nodeLost(n, s.notReady, s.cfg.NotReadyGrace, now); why != "" {
			lostNode[n.Name] = why
		}
		q, ok := n.Status.Allocatable[GPUResource]
		if (!ok || q.Value() <= 0) && migAlloc(n) == nil && working[n.Name] == nil {
			continue
		}
		v.nodes[n.Name] = n
		v.alloc[n.Name] = int(q.Value())
		v.noteMIGNode(n, working[n.Name])
		v.states[n.Name] = &nodeState{node: n, open: nodeUsable(n), lost: lostNode[n.Name] != "", alloc: n.Status.Allocatable,
			used: corev1.ResourceList{}, mine: map[string]*usage{}}
	}
	for name := range s.notReady {
		if byName[name] == nil {
			delete(s.notReady, name)
		}
	}
	// Forget assumptions the cache has caught up with; count the worker
	// pods we created that it has not listed yet, or the next round would
	// create them again.
	live := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		live[p.UID] = true
		if p.Spec.NodeName != "" {
			delete(s.assumed, p.UID)
		}
		delete(s.created, p.UID)
	}
	// A worker made and deleted (by a user, its TideJob's garbage
	// collection) before a round saw it listed is gone, not a worker the
	// cache has yet to list: counted on for a minute, its job waited that
	// long for a new one.
	s.deleted.Lock()
	for uid := range s.deleted.uids {
		delete(s.created, uid)
	}
	s.deleted.uids = nil
	s.deleted.Unlock()
	for uid, p := range s.created { // the API server stamps them on the wall clock, s.now
		if now.Sub(p.CreationTimestamp.Time) > time.Minute {
			delete(s.created, uid) // the cache missed it (a relist): trust the cache
			continue
		}
		live[uid] = true
		pods = append(pods, p)
	}
	for uid := range s.assumed {
		if !live[uid] {
			delete(s.assumed, uid)
		}
	}
	s.forgetPartBinds()
	for uid := range s.evicted {
		if !live[uid] {
			delete(s.evicted, uid)
		}
	}
	for uid := range s.rejects {
		if !live[uid] {
			delete(s.rejects, uid)
		}
	}
	// Workers on a node that became unusable are lost (nodes.go): their
	// jobs restart or shrink without them, and they are evicted.
	var mine []*corev1.Pod
	for _, p := range pods {
		// A pod tide evicted is no longer its job's, unless it succeeded
		// meanwhile (its job's work is done); its failure is the
		// eviction's, not the job's.
		if p.Spec.SchedulerName != s.cfg.SchedulerName || (s.evicted[p.UID] && p.Status.Phase != corev1.PodSucceeded) {
			continue
		}
		if node := s.nodeOf(p); node != "" && !podTerminal(p) {
			why := "node " + node + " was deleted"
			if n := byName[node]; n != nil {
				why = podLost(p, n, lostNode[node])
			}
			if why != "" {
				if p.DeletionTimestamp == nil {
					v.lost = append(v.lost, lostPod{pod: p, why: why})
				}
				continue
			}
		}
		mine = append(mine, p)
	}
	v.work, v.probs = s.grp.group(mine, tjs)
	for _, w := range v.work {
		s.stillRerun(w)
	}
	for _, p := range v.probs {
		if p.kind == "tidejob" {
			for _, tj := range tjs {
				if tj.Namespace == p.ns && tj.Name == p.name {
					v.invalid["tidejob/"+p.ns+"/"+p.name] = tj
				}
			}
		}
	}
	owned := map[types.UID]string{}
	for _, w := range v.work {
		w.shape = s.shapeOf(w)
		if w.ended() {
			continue
		}
		for _, p := range w.pods {
			owned[p.UID] = w.key
		}
	}
	for _, p := range pods {
		node := s.nodeOf(p)
		st := v.states[node]
		if node == "" && p.Spec.SchedulerName != s.cfg.SchedulerName && p.DeletionTimestamp == nil && !podTerminal(p) && podGPUs(p) > 0 {
			v.asking = append(v.asking, p)
		}
		if node == "" || podTerminal(p) || st == nil {
			continue
		}
		g := int(podGPUs(p))
		v.phys[node] += g
		s.noteShared(v, node, p)
		req := podRequests(p)
		addTimes(st.used, req, 1)
		st.pods++
		ports := podPorts(p)
		st.ports = append(st.ports, ports...)
		if p.DeletionTimestamp != nil {
			if st.leaving.req == nil {
				st.leaving.req = corev1.ResourceList{}
			}
			addTimes(st.leaving.req, req, 1)
			st.leaving.pods++
			st.leaving.ports = append(st.leaving.ports, ports...)
			continue // still holds its node's room, but its GPUs are nobody's to plan with
		}
		key, ok := owned[p.UID]
		if !ok {
			v.foreign[node] += g
			continue
		}
		v.held[node] += g
		if i := s.podIndex(p); g == 0 && i >= 0 {
			if v.parts == nil {
				v.parts = map[string]map[int]bool{}
			}
			if v.parts[node] == nil {
				v.parts[node] = map[int]bool{}
			}
			v.parts[node][i] = true
		}
		u := st.mine[key]
		if u == nil {
			u = &usage{req: corev1.ResourceList{}}
			st.mine[key] = u
		}
		addTimes(u.req, req, 1)
		u.pods++
		u.ports = append(u.ports, ports...)
	}
	s.lookMIG(v, pods, owned)
	v.shortOf()
	s.cur = v
	return v, nil
}

// shortOf closes each node that has fewer GPUs (or slices of a profile)
// allocatable than the running pods bound there hold, counting a GPU
// tide's parts are on as held: its device plugin restarting (allocatable
// 0 until it registers again) or GPUs gone unhealthy. The kubelet evicts
// no running pod for that, and admits no new one short of room; so tide
// keeps its workers there, the engine's node showing the GPUs they hold
// (kept), and places nothing new there until the node has its GPUs again.
// With only the allocatable to show, the engine had fewer GPUs (or no
// node) to adopt the workers on and they were evicted, while alone in the
// cluster the node left no GPU to plan with and they ran on.
//
// What a short node can ever host is judged on the GPUs and slices its
// running pods hold, where they are more than its allocatable: judged on
// an allocatable of none, a job running there alone was found never
// schedulable and released.
func (v *view) shortOf() {
	for name, st := range v.states {
		for _, en := range v.engineNodes(name) {
			hold := v.held[en] + len(v.parts[en]) + v.foreign[en]
			if v.alloc[en] >= hold {
				continue
			}
			if !st.short {
				st.open, st.short, st.alloc = false, true, st.alloc.DeepCopy()
			}
			res := GPUResource
			if en != name {
				res = corev1.ResourceName(migPrefix + en[len(name)+len("/mig-"):])
			}
			st.alloc[res] = *resource.NewQuantity(int64(hold), resource.DecimalSI)
		}
	}
}

// shapeOf is what one worker of w asks of a node: a TideJob's worker as
// tide would create it, or a gang's first pod.
func (s *Scheduler) shapeOf(w *workload) *shape {
	var p *corev1.Pod
	switch {
	case w.tj != nil:
		p = workerPod(w, s.cfg.SchedulerName)
	case len(w.pods) > 0:
		p = w.pods[0]
	default:
		return nil
	}
	sh := newShape(p, w.podGPUs(), w.gpuType)
	switch {
	case w.part.mig != "":
		sh.unit = "a " + w.part.mig + " MIG slice"
	case w.part.fractional():
		sh.unit, sh.part = "part of a GPU", true
	case w.indexed():
		sh.unit = fmt.Sprintf("%d GPUs", w.per)
	}
	return sh
}

func (s *Scheduler) warnOnce(key, obj, msg string) {
	if s.said[key] != msg {
		s.said[key] = msg
		s.log.Warn("cannot schedule", "object", obj, "err", msg)
	}
}

// nodeOf is where a pod is bound, counting binds the cache has not seen.
func (s *Scheduler) nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	return s.assumed[p.UID]
}

// ended: a job whose pods all succeeded, or one of which failed (for a
// TideJob, or whose status tide wrote Succeeded or Failed); a gang of
// plain pods one of which failed ends once no other is bound (finishing).
func (w *workload) ended() bool {
	if w.tj == nil && w.failed > 0 {
		return w.keeps() == 0
	}
	if w.jobFailed() || w.over == PhaseSucceeded {
		return true
	}
	if w.tj != nil {
		// A worker that succeeded means the job is done: it ends when no
		// bound worker runs any more (unbound spares do not count).
		for _, p := range w.pods {
			if p.Spec.NodeName != "" {
				return false
			}
		}
		return w.succeeded > 0
	}
	return w.succeeded > 0 && len(w.pods) == 0
}

// buildCluster makes the engine's cluster: every usable GPU node with the
// GPUs no foreign pod holds, every node NotReady for less than the grace
// period or short of GPUs allocatable (shortOf) with only the GPUs tide's
// running pods hold there (kept), so that they keep them and nothing new
// goes there, and no lost node (nodes.go). sig identifies it: it does not change while pods
// terminate, so capacity is stable across rounds.
func (s *Scheduler) buildCluster(v *view) (*cluster.Cluster, string, error) {
	names := make([]string, 0, len(v.nodes))
	for n := range v.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	var nodes []cluster.Node
	var sig strings.Builder
	sites := s.nodeSites(v, names)
	for _, name := range names {
		site, ok := sites[name]
		if !ok {
			continue
		}
		for _, en := range v.engineNodes(name) { // its whole GPUs, then its MIG slices (mig.go)
			g := v.alloc[en]
			if site[1] == cluster.SiteCloud {
				g -= v.foreign[en] // elsewhere they are down, not gone (tidal.go)
			}
			if v.states[name].lost {
				g = 0
			} else if !v.states[name].open {
				g = v.kept(en)
			}
			if g <= 0 {
				continue
			}
			typ := s.gpuType(v.nodes[name])
			mem := gpuMemOf(v.nodes[name], typ)
			if en != name {
				typ, mem = en[len(name)+1:], 0
			}
			nodes = append(nodes, cluster.Node{Name: en, GPUType: typ, GPUs: g, GPUMem: mem, Site: site[0], SiteKind: site[1],
				Rack: v.nodes[name].Labels["topology.kubernetes.io/zone"]})
			fmt.Fprintf(&sig, "%s=%d:%s:%g@%s/%s;", en, g, typ, mem, site[0], site[1])
		}
	}
	if len(nodes) == 0 {
		return nil, "", nil
	}
	for i := range nodes {
		if nodes[i].Rack == "" && nodes[i].Site != "default" {
			nodes[i].Rack = nodes[i].Site + "/rack-0" // as the simulator names it
		} else if nodes[i].Rack == "" {
			nodes[i].Rack = "default"
		}
	}
	c, err := cluster.New(nodes)
	if err != nil {
		return nil, "", fmt.Errorf("kube: nodes: %w", err)
	}
	return c, sig.String(), nil
}

// kept is how many GPUs engine node en shows while its node takes no new
// work but keeps its workers (NotReady within the grace, or short of GPUs
// allocatable: shortOf): the whole GPUs
// tide's running pods hold there and the GPUs its running parts hold, and
// at least up to the highest of those parts' indices, as a part is adopted
// on the GPU at its recorded index (partGPUs). With the whole GPUs alone,
// a part had no GPU to be adopted on and was evicted at once, while the
// whole-GPU workers beside it were kept. GPUs below that index that no
// worker holds are not given out: no placement takes a node that is not
// open (shape.why).
func (v *view) kept(en string) int {
	k := v.held[en] + len(v.parts[en])
	for i := range v.parts[en] {
		k = max(k, i+1)
	}
	return k
}

// rebuild makes a new engine on c and puts every job back: submitted,
// placed where its pods are bound, its history carried from the old engine.
func (s *Scheduler) rebuild(c *cluster.Cluster, sig string, v *view) error {
	var prev map[string]*engine.Status
	if s.eng != nil {
		prev = map[string]*engine.Status{}
		for _, st := range s.eng.Snapshot().Jobs {
			prev[st.Job.ID] = st
		}
	}
	eng, err := engine.New(engine.Config{Cluster: c, Model: s.model(), Policy: s.pol,
		Placer: s.enginePlacer(), Clock: s.cfg.Clock, Sharing: s.pairs != nil && s.cfg.Live == nil, DropInvalid: true})
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	if s.eng != nil {
		s.stats.Rebuilds++
	}
	s.eng, s.sig, s.dirty = eng, sig, false
	s.work = map[string]*workload{}
	byName := map[string]int{}
	for i, n := range c.Nodes {
		byName[n.Name] = i
	}
	taken := newGPUTaker(c) // GPUs adopted so far
	s.reserveParts(v, c, byName, taken)
	var ad []adoption
	for _, w := range s.workOrder(v.work) {
		if w.ended() {
			continue
		}
		id := s.ids[w.key]
		if s.newRun(w) && id != "" { // a new job: nothing of the run that failed carries over
			s.gen[w.key]++
			id = fmt.Sprintf("%s#%d", w.key, s.gen[w.key])
			s.ids[w.key] = id
		}
		if id == "" {
			id = w.key
			s.ids[w.key] = id
		}
		if !s.submit(w, id) {
			continue
		}
		ad = append(ad, s.adoptBound(w, id, c, byName, taken))
	}
	// Partial gangs are completed only once every job's bound pods are
	// counted, so completing one never takes GPUs a bound pod holds.
	for _, a := range ad {
		s.adopt(a, c, taken)
		if p := prev[a.id]; p != nil {
			if err := s.eng.Carry(a.id, p); err != nil {
				s.log.Warn("carry", "job", a.id, "err", err)
			}
		}
	}
	return nil
}

// adoption is a job's bound GPUs found on a rebuild.
type adoption struct {
	w    *workload
	id   string
	gpus []cluster.GPUID
}

func sortedWork(m map[string]*workload) []*workload {
	out := make([]*workload, 0, len(m))
	for _, w := range m {
		out = append(out, w)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].created != out[b].created {
			return out[a].created < out[b].created
		}
		return out[a].key < out[b].key
	})
	return out
}

// submit hands w to the engine as job id unless it cannot run yet (a gang
// still missing pods, a TideJob backing off after refused workers), no
// node shape can ever host it, or the engine refuses it.
func (s *Scheduler) submit(w *workload, id string) bool {
	delete(s.unsched, w.key)
	if w.tj == nil && len(w.pods) < w.minW && !w.finishing() {
		return false // the gang's pods are not all there yet
	}
	if s.holdBack(w) {
		return false
	}
	if s.wholeOnly != "" && w.part.fractional() {
		// An elastic policy chooses counts and node shapes of whole GPUs,
		// and the engine refuses a plan giving a part a node shape: one
		// such job failed every round, for every job. The simulator
		// refuses such a trace (assemble.wholeGPUs); here the job waits.
		why := fmt.Sprintf("policy %s is elastic: it runs jobs on whole GPUs, and this job asks for part of each GPU (%s); "+
			"run it under a policy that is not elastic (tide policies lists them)", s.wholeOnly, w.part)
		s.unsched[w.key] = why
		s.warnOnce(w.key, w.key, "unschedulable: "+why)
		return false
	}
	if w.shape != nil && !(w.finishing() && w.keeps() == w.bound()) { // a job of bound pods alone runs where they are
		group := s.jobGroup
		if w.part.mig != "" {
			group = s.migGroup(w.part.mig)
		}
		if why := impossible(s.cur.states, w.shape, w.job("").MinGPUs/w.per, s.cfg.GPUTypeLabel, group); why != "" {
			s.unsched[w.key] = why
			s.warnOnce(w.key, w.key, "unschedulable: "+why)
			return false
		}
	}
	if _, err := s.eng.Submit(s.jobOf(w, id)); err != nil {
		s.unsched[w.key] = err.Error()
		s.warnOnce(w.key, w.key, err.Error())
		return false
	}
	s.work[id] = w
	return true
}

// placer places jobs worker by worker where their pods fit.
func (s *Scheduler) placer() workerPlacer {
	return workerPlacer{per: s.perWorker, room: func() nodeFit { return s.room(false) }, parts: func() nodeFit {
		return newPlacement(s.cur.states, nil, func(id string) *shape {
			if w := s.work[id]; w != nil {
				return w.shape
			}
			return nil
		})
	}}
}

// hosts says whether a worker of job id (engine ID) could run on
// Kubernetes node now, its GPUs aside: the node is open, and its labels,
// taints and allocatable take the worker (shape.static); what runs there
// is the placer's to weigh. A job tide knows no shape of runs anywhere.
func (s *Scheduler) hosts(id, node string) bool {
	w := s.work[id]
	if w == nil || w.shape == nil {
		return true
	}
	n := s.cur.states[node]
	if n == nil || !n.open {
		return false
	}
	why, _ := w.shape.static(n, s.cfg.GPUTypeLabel)
	return why == ""
}

// trialPlacer is the placer workerPolicy tries plans on: there parts go
// through the placer too (as whole GPUs), so their pods' room comes back
// through it like any job's.
func (s *Scheduler) trialPlacer() workerPlacer {
	return workerPlacer{per: s.perWorker, room: func() nodeFit { return s.room(true) }}
}

// room is the placer's view of the nodes beyond their GPUs this round. The
// room the live pods of the engine's jobs take comes back through the
// workers the placer keeps; parts', which the engine places around the
// placer, stays counted, except on trial (the placer sees them there).
// The second member of a packed pair is not shown to the placer
// (engine.PlacePairs), so its pods' room goes uncounted there: the bind
// checks it (reconcile).
func (s *Scheduler) room(trial bool) nodeFit {
	keys := make(map[string]bool, len(s.work))
	for _, w := range s.work {
		keys[w.key] = trial || !w.part.fractional()
	}
	return newPlacement(s.cur.states, keys, func(id string) *shape {
		if w := s.work[id]; w != nil {
			return w.shape
		}
		return nil
	})
}

// adoptBound counts the GPUs w's bound pods hold, node by node (a part's
// GPU by its recorded index, gpuindex.go).
func (s *Scheduler) adoptBound(w *workload, id string, c *cluster.Cluster, byName map[string]int, taken *gpuTaker) adoption {
	a := adoption{w: w, id: id}
	if w.indexed() {
		a.gpus = s.partGPUs(w, c, byName)
		return a
	}
	for _, p := range w.pods {
		node := s.podSlot(p, w) // a MIG slice's engine node (mig.go)
		if node == "" {
			continue
		}
		i, ok := byName[node]
		if !ok || taken.room(i) < w.per || len(a.gpus) >= w.maxW*w.per {
			s.warnOnce("adopt/"+string(p.UID), "pod "+p.Namespace+"/"+p.Name,
				"bound to node "+node+", which has no room for it in tide's view; left out of its job")
			continue // the next reconcile evicts it
		}
		a.gpus = append(a.gpus, taken.take(i, w.per)...)
	}
	return a
}

// adopt puts a job's bound workers into the engine. A gang bound only in
// part (tide stopped in the middle of binding it) is completed on free
// GPUs when they exist; otherwise it stays pending and its bound pods are
// evicted by the next reconcile, so no partial gang holds GPUs.
func (s *Scheduler) adopt(a adoption, c *cluster.Cluster, taken *gpuTaker) {
	w, gpus := a.w, a.gpus
	if len(gpus) == 0 {
		return
	}
	fit := newPlacement(s.cur.states, nil, func(string) *shape { return w.shape })
	// The missing workers go on the type of the GPUs adopted, as a job's
	// workers never mix types: an untyped gang completed on another type
	// held GPUs of two, which the placer kept and the engine refused, and
	// every round failed from then on.
	typ := c.NodeOf(gpus[0]).GPUType
	for len(gpus) < w.job("").MinGPUs && !w.indexed() { // complete a partial gang, best fit
		best := -1
		for i := range c.Nodes {
			n := &c.Nodes[i]
			room := taken.room(i)
			if room >= w.per && n.GPUType == typ && (best < 0 || room < taken.room(best)) &&
				sameSite(c, gpus[0], i) && fit.fits(a.id, n.Name, 1) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		fit.take(a.id, c.Nodes[best].Name, 1)
		gpus = append(gpus, taken.take(best, w.per)...)
	}
	if err := s.eng.Adopt(a.id, gpus); err != nil {
		for _, g := range gpus { // give them back so others can be adopted there
			if !w.indexed() { // a part's (or packable worker's) GPU stays reserved until its pod is gone
				taken.give(g)
			}
		}
		s.log.Info("bound pods not adopted; the job waits and they will be evicted", "job", a.id, "why", err)
	}
}

// update brings a running engine up to date with the jobs in v.
func (s *Scheduler) update(v *view) {
	seen := map[string]bool{}
	for _, w := range s.workOrder(v.work) {
		id := s.ids[w.key]
		st := (*engine.Status)(nil)
		if id != "" {
			st = s.eng.Job(id)
		}
		if s.newRun(w) && st != nil {
			// Made again after its failure: the run that failed is
			// over, and the gang runs anew, as a new job (below).
			if !st.State.Terminal() {
				_ = s.eng.Fail(id)
				s.log.Info("job ended", "job", id, "failed", 1)
			}
			st = s.eng.Job(id)
		}
		if w.ended() {
			if st != nil && !st.State.Terminal() {
				if w.jobFailed() {
					_ = s.eng.Fail(id)
				} else {
					_ = s.eng.Finish(id)
				}
				s.log.Info("job ended", "job", id, "succeeded", w.succeeded, "failed", w.failed)
			}
			if st != nil {
				seen[id] = true
				s.work[id] = w
			}
			continue
		}
		if st != nil && !st.State.Terminal() && s.holdBack(w) {
			continue // withdrawn while its workers back off
		}
		if st != nil && !st.State.Terminal() && w.tj == nil && !w.finishing() && len(w.pods) < w.minW {
			// A gang that lost a pod (deleted, or rejected by its node)
			// is withdrawn until its controller makes the pod again, as
			// one whose pod is lost on its node, and release evicts its
			// bound pods. It ran on short of a pod, holding the GPUs of
			// the missing one too, for ever.
			continue
		}
		if st != nil && st.State == job.Declined && sameAdmission(st.Job, s.jobOf(w, id)) {
			// The policy refused it at admission: it stays refused (not
			// resubmitted every round) until it is made anew or its
			// deadline changes.
			seen[id] = true
			s.work[id] = w
			continue
		}
		if st != nil && st.State.Terminal() {
			// Back again (a plain gang recreated after preemption): a new job.
			s.gen[w.key]++
			id = fmt.Sprintf("%s#%d", w.key, s.gen[w.key])
			st = nil
		}
		if id == "" {
			id = w.key
		}
		if st == nil {
			if !s.submit(w, id) {
				continue
			}
			s.ids[w.key] = id
			if w.hasBound(s) {
				s.dirty = true // bound by someone else: adopt on a rebuild next round
			}
		}
		seen[id] = true
		s.work[id] = w
	}
	for key := range s.reran {
		if v.work[key] == nil {
			delete(s.reran, key)
		}
	}
	for id, w := range s.work {
		if seen[id] {
			continue
		}
		delete(s.work, id)
		if st := s.eng.Job(id); st != nil && !st.State.Terminal() {
			_ = s.eng.Fail(id) // its pods or TideJob are gone
			s.log.Info("job withdrawn", "job", id, "key", w.key)
		}
	}
}

// newRun reports whether w is a plain gang running again after a failure
// tide has not seen it run again after (workload.rerunGang), and records
// that it now has.
func (s *Scheduler) newRun(w *workload) bool {
	if w.rerun.IsZero() || !s.reran[w.key].Before(w.rerun) {
		return false
	}
	if s.reran == nil {
		s.reran = map[string]time.Time{}
	}
	s.reran[w.key] = w.rerun
	return true
}

// stillRerun keeps a plain gang that runs again (update, reran) running
// again when the pods made for its new run are gone (evicted, deleted)
// and only the pods from before its failure are left: its failures are
// history still, and its controller makes the pods again. Read from the
// pods alone, the gang had ended again, and its pod from before ran on
// alone, a gang bound in part, for as long as it ran (random operations
// search, seed 1628 under fifo:backfill=true).
func (s *Scheduler) stillRerun(w *workload) {
	t, ok := s.reran[w.key]
	if w.tj != nil || w.failed == 0 || w.failUntimed || !ok || w.lastFail.After(t) {
		return
	}
	w.failed, w.rerun = 0, t
}

func (w *workload) hasBound(s *Scheduler) bool {
	for _, p := range w.pods {
		if s.nodeOf(p) != "" {
			return true
		}
	}
	return false
}

// progress reports each running job's progress to the engine: seconds of
// its estimated duration done, assuming linear scaling with GPUs (the
// duration model's assumption; Kubernetes tells tide nothing better).
func (s *Scheduler) progress() {
	now := s.cfg.Clock.Now()
	dt := now - s.lastRep
	s.lastRep = now
	if s.liveProgress() || dt <= 0 || dt > 3600 { // live.go
		return
	}
	for _, st := range s.eng.Active() {
		if len(st.GPUs) > 0 {
			_ = s.eng.Report(st.Job.ID, st.Progress+dt*float64(len(st.GPUs))/float64(st.Job.GPUs))
		}
	}
}

// reconcile moves the API server toward the engine's decision.
func (s *Scheduler) reconcile(ctx context.Context, v *view) {
	c := s.eng.Snapshot().Cluster
	var evict []*corev1.Pod
	type bind struct {
		w     *workload
		id    string
		nodes []string // one per missing worker
	}
	var binds []bind
	victim := map[types.UID]string{} // evicted pod -> its job's ID
	for id, w := range s.work {
		st := s.eng.Job(id)
		if st == nil {
			continue
		}
		want := map[string]int{} // node -> workers
		if !st.State.Terminal() {
			for _, g := range st.GPUs {
				want[slotOf(c, g, w)]++
			}
			for n := range want {
				want[n] /= w.per
			}
		}
		have := map[string]int{}
		for _, p := range w.pods {
			node := s.podSlot(p, w) // a node, or a node and GPU index for a part
			if node == "" {
				continue
			}
			if have[node] >= want[node] {
				if !st.State.Terminal() || w.tj != nil {
					evict = append(evict, p) // not (or no longer) wanted there
					victim[p.UID] = id
				}
				continue
			}
			have[node]++
		}
		var missing []string
		for n, k := range want {
			for i := have[n]; i < k; i++ {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 && (w.tj == nil || w.succeeded == 0) && w.failed == 0 { // a finishing TideJob, or a failed gang, gets no new workers
			sort.Strings(missing)
			binds = append(binds, bind{w, id, missing})
		}
	}
	// Who gets new workers where: an evicted pod's event names them.
	needs := map[string][]string{}
	for _, b := range binds {
		for _, n := range b.nodes {
			if k := needs[n]; len(k) == 0 || k[len(k)-1] != b.w.key {
				needs[n] = append(needs[n], b.w.key)
			}
		}
	}
	// Evictions first: they free the room binds wait for.
	calls := newCalls(ctx, s.cfg.Parallel)
	for _, p := range evict {
		s.evicted[p.UID] = true
		why := s.preemption(p, victim[p.UID], needs[s.nodeOf(p)])
		s.reclaim.evicting(p.UID, needs[s.nodeOf(p)]) // told when a budget refuses (reclaim.go)
		calls.do(func(ctx context.Context) { s.evictPod(ctx, calls, p, "Preempted", why) })
	}
	s.evictLost(calls, v)
	for _, p := range s.release(v) {
		if s.evicted[p.UID] {
			continue
		}
		s.evicted[p.UID] = true
		why := "tide released it: its job is not running (a gang bound in part, or a job that cannot be placed)"
		if u := s.unsched[workloadKey(p)]; u != "" {
			why += ": " + u
		}
		if w := v.work[workloadKey(p)]; w != nil && w.tj != nil && w.jobFailed() {
			s.removeFailed(calls, p)
			continue
		}
		calls.do(func(ctx context.Context) { s.evictPod(ctx, calls, p, "Preempted", why) })
	}
	calls.wait()
	// Binds, a job's missing workers all at once or not at all: wait while
	// any node they go to lacks room (pods still terminating there). A
	// node that can no longer take them at all (cordoned, NotReady, a
	// taint they do not tolerate) means the engine's plan is stale: it is
	// rebuilt next round from what is bound.
	room := v.freeGPUs()
	fit := newPlacement(v.states, nil, func(id string) *shape {
		if w := s.work[id]; w != nil {
			return w.shape
		}
		return nil
	})
	sort.Slice(binds, func(a, b int) bool { return binds[a].w.key < binds[b].w.key })
	for _, b := range binds {
		need, workers, opened := v.slotNeeds(b.w, b.nodes)
		fits := true
		for n, k := range workers {
			if room[n] < need[n] {
				fits = false
			}
			if !fit.fits(b.id, n, k) {
				fits = false
				if st := v.states[kubeNode(n)]; st == nil || b.w.shape == nil || hard(b.w.shape.why(st, st.used, st.pods, nil)) {
					s.dirty = true
				}
			}
		}
		var pending []*corev1.Pod
		for _, p := range b.w.pods {
			if s.nodeOf(p) == "" {
				pending = append(pending, p)
			}
		}
		if b.w.tj != nil && b.w.indexed() && len(pending) > 0 {
			// A worker made for a GPU index whose bind failed carries that
			// index in its environment: remove it, and make the workers
			// anew for the indices planned now.
			s.removeStale(calls, pending)
			continue
		}
		partner := s.partnerKey(b.id)
		if !v.pairRoom(b.w, b.nodes, partner) {
			continue // a GPU index still holds another job's pod (sharepairs.go)
		}
		if b.w.part.fractional() && !s.partsRoom(v, b.w, b.nodes) {
			continue // a GPU index still holds parts that leave it too little (gpuindex.go)
		}
		if b.w.tj == nil && len(pending) < len(b.nodes) {
			s.warnOnce("short/"+b.w.key, b.w.key, fmt.Sprintf("%d workers to bind, only %d unbound pods", len(b.nodes), len(pending)))
			continue
		}
		create := max(0, len(b.nodes)-len(pending))
		if !fits || (create > 0 && s.backingOff(b.w)) {
			continue // next round, once evicted pods are gone or the backoff is over
		}
		for n, k := range workers {
			room[n] -= need[n]
			fit.take(b.id, n, k)
		}
		v.openShared(opened)
		v.claimIndices(b.w, b.nodes)
		if b.w.part.fractional() {
			s.claimParts(v, b.w, b.nodes)
		}
		pending = pending[:min(len(pending), len(b.nodes))]
		w, nodes, packed := b.w, b.nodes, partner != ""
		for i, p := range pending {
			node, idx := slotNode(nodes[i])
			node = kubeNode(node) // a MIG slice's engine node is its node's (mig.go)
			s.assumed[p.UID] = node
			s.notePartBind(p.UID, idx)
			calls.do(func(ctx context.Context) { s.bindPod(ctx, calls, p, node, idx) })
		}
		for i := 0; i < create; i++ {
			node := nodes[len(pending)+i]
			calls.do(func(ctx context.Context) { s.createAndBind(ctx, calls, w, node, packed) })
		}
	}
	calls.wait()
}

// evictLost evicts the workers in v whose nodes can no longer run them
// (nodes.go).
func (s *Scheduler) evictLost(calls *calls, v *view) {
	for _, l := range v.lost {
		p, why := l.pod, "worker lost: "+l.why+"; its job goes on without it, as tide's policy decides"
		s.evicted[p.UID] = true
		s.log.Info("worker lost", "pod", p.Namespace+"/"+p.Name, "why", l.why)
		if w := v.work[workloadKey(p)]; w != nil && w.tj != nil {
			s.fb.event(tideJobRef(w.tj), corev1.EventTypeWarning, "WorkerLost", "Reschedule", "worker "+p.Name+" lost: "+l.why)
		}
		calls.do(func(ctx context.Context) { s.evictPod(ctx, calls, p, reasonNodeLost, why) })
	}
}

// noGPUs is a round on a cluster none of whose nodes has GPUs to plan
// with (every GPU node cordoned, NotReady, deleted or emptied): no job is
// placed, but the workers lost with their nodes are evicted, the gangs
// short of a pod released (a plain gang short of pods, a TideJob short of
// bound workers: none can be made whole) and the TideJobs that ended
// written so, as in any round. The round used to end there:
// cordoning every node evicted nothing, and the workers ran on.
func (s *Scheduler) noGPUs(ctx context.Context, v *view) {
	calls := newCalls(ctx, s.cfg.Parallel)
	s.evictLost(calls, v)
	for _, w := range sortedWork(v.work) {
		// A TideJob's workers are tide's to make: it is short when fewer
		// than its minimum are bound, however many pods it has. It was
		// passed over, and one that lost a worker here ran on in part.
		have, why := len(w.pods), fmt.Sprintf("tide released it: its gang %s has %d of its %d pods", w.name, len(w.pods), w.minW)
		if w.tj != nil {
			have = w.bound()
			why = fmt.Sprintf("tide released it: its TideJob %s has %d of its %d workers bound, and no node can take more", w.name, have, w.minW)
		}
		if w.succeeded > 0 || w.ended() || have >= w.minW || (w.tj != nil && w.jobFailed()) {
			continue
		}
		for _, p := range w.pods {
			if s.nodeOf(p) == "" || s.evicted[p.UID] {
				continue
			}
			s.evicted[p.UID] = true
			calls.do(func(ctx context.Context) { s.evictPod(ctx, calls, p, "Preempted", why) })
		}
	}
	// A failed TideJob's workers are deleted even now, as release has the
	// next round with GPUs do: they ran on where the job had failed for
	// as long as no node was usable.
	for _, w := range sortedWork(v.work) {
		if w.tj == nil || !w.jobFailed() {
			continue
		}
		for _, p := range w.pods {
			if s.evicted[p.UID] {
				continue
			}
			s.evicted[p.UID] = true
			s.removeFailed(calls, p)
		}
	}
	// A TideJob that ended is written so even now: its end is final only
	// once its status says it (its ended workers may be deleted before a
	// node is usable again, and it would run again from scratch).
	if s.cfg.Dynamic != nil {
		for _, w := range sortedWork(v.work) {
			if w.tj == nil || !w.ended() {
				continue
			}
			out := s.statusOf(w, nil, nil)
			if s.eng != nil {
				out = s.withDeadline(w, out)
			}
			s.putStatus(calls, w.tj, out)
		}
	}
	calls.wait()
}

// hard: a reason a node cannot take a worker that waiting will not cure.
func hard(why string) bool {
	return why != "" && !strings.HasPrefix(why, "Insufficient") && why != "Too many pods" &&
		!strings.Contains(why, "free ports")
}

// workloadKey is the key of the workload a pod of tide's belongs to.
func workloadKey(p *corev1.Pod) string {
	if name := p.Labels[LabelTideJob]; name != "" {
		return "tidejob/" + p.Namespace + "/" + name
	}
	if name, ok := p.Annotations[AnnotJob]; ok && name != "" {
		return "pods/" + p.Namespace + "/" + name
	}
	return "pods/" + p.Namespace + "/" + p.Name
}

// preemption says why a pod of job id is evicted: the jobs getting
// workers on its node and the policy's reason for id.
func (s *Scheduler) preemption(p *corev1.Pod, id string, others []string) string {
	var who []string
	for _, k := range others {
		if k != workloadKey(p) {
			who = append(who, strings.TrimPrefix(strings.TrimPrefix(k, "pods/"), "tidejob/"))
		}
	}
	msg := "Preempted by tide (policy " + s.pol.Name() + ")"
	if why := s.reclaimWhy(id); why != "" {
		return msg + ": " + why
	}
	if len(who) > 0 {
		msg += " to run " + strings.Join(who, ", ") + " on " + s.nodeOf(p)
	} else {
		msg += ": the plan no longer gives this worker GPUs on " + s.nodeOf(p)
	}
	if st := s.eng.Job(id); st != nil {
		if r := st.Reason(); r.Text != "" {
			msg += ": " + api.WallReason(r.Text)
		}
	}
	return msg
}

// evictPod evicts p through the Eviction API and records why in an event
// with reason.
func (s *Scheduler) evictPod(ctx context.Context, c *calls, p *corev1.Pod, reason, why string) {
	err := s.evict(ctx, p)
	c.then(func() {
		if err != nil {
			s.evictionRefused(p, err)
			s.stats.EvictErrors++
			delete(s.evicted, p.UID)
			s.log.Warn("eviction failed", "pod", p.Namespace+"/"+p.Name, "err", err)
			return
		}
		s.stats.Evicted++
		if reason == reasonNodeLost {
			s.stats.Lost++
		}
		s.log.Info("pod evicted", "pod", p.Namespace+"/"+p.Name, "why", why)
	})
	if err == nil {
		s.fb.event(p, corev1.EventTypeNormal, reason, "Preempt", why)
	}
}

func (s *Scheduler) evict(ctx context.Context, p *corev1.Pod) error {
	grace := int64(s.cfg.Grace.Seconds())
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}}}
	err := s.cfg.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// bindPod binds p to node; a part to GPU idx there (-1 for a whole
// worker), which the Binding records on the pod (gpuindex.go).
func (s *Scheduler) bindPod(ctx context.Context, c *calls, p *corev1.Pod, node string, idx int) {
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Annotations: bindAnnotations(idx)},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	err := bind(ctx, s.cfg.Client, b)
	c.then(func() {
		if err != nil {
			s.stats.BindErrors++
			delete(s.assumed, p.UID)
			delete(s.created, p.UID)
			s.dirty = true
			s.log.Warn("bind failed", "pod", p.Namespace+"/"+p.Name, "node", node, "err", err)
			return
		}
		s.stats.Bound++
		s.log.Debug("pod bound", "pod", p.Namespace+"/"+p.Name, "node", node)
	})
	if err == nil {
		s.fb.event(p, corev1.EventTypeNormal, "Scheduled", "Binding", fmt.Sprintf("Successfully assigned %s/%s to %s", p.Namespace, p.Name, node))
	}
}

// createAndBind creates a worker of w and binds it to slot (a node, or a
// node and GPU index for a part or a packable worker, which is made to
// select it; packed: its job shares the GPU with a partner now).
func (s *Scheduler) createAndBind(ctx context.Context, c *calls, w *workload, slot string, packed bool) {
	node, idx := slotNode(slot)
	node = kubeNode(node)
	wp := workerPod(w, s.cfg.SchedulerName)
	if idx >= 0 {
		s.partWorker(wp, w, node, idx, packed)
	}
	p, err := s.cfg.Client.CoreV1().Pods(w.ns).Create(ctx, wp, metav1.CreateOptions{})
	if err != nil {
		c.then(func() {
			s.stats.CreateErrors++
			s.fail(w.key, "FailedCreate", "creating a worker pod: "+err.Error())
			s.log.Warn("creating a worker failed", "tidejob", w.ns+"/"+w.name, "err", err)
		})
		return
	}
	c.then(func() {
		s.stats.Created++
		s.assumed[p.UID] = node
		s.created[p.UID] = p
	})
	s.bindPod(ctx, c, p, node, idx)
}

// calls runs API calls with bounded parallelism. The calls never touch
// the scheduler's state: what they learn is handed to then, and wait
// applies it on the round's goroutine (which holds s.mu) once every call
// has returned, so the round's reads and the calls' results never race.
//
// The calls run on at most n workers that live until wait, not on a
// goroutine each: a goroutine's stack grows to what an API call needs
// (client-go and HTTP/2 run deep) by copying, and with a fresh goroutine
// per pod that copying was a tenth of tide's CPU in a drain.
type calls struct {
	ctx   context.Context
	n     int
	work  chan func(context.Context) // nil until the first call after a wait
	live  int                        // workers started on work
	wg    sync.WaitGroup
	mu    sync.Mutex
	after []func()
}

func newCalls(ctx context.Context, n int) *calls {
	return &calls{ctx: ctx, n: max(n, 1)}
}

// do runs f on a worker, waiting while n calls are in flight. Only the
// round's goroutine calls it.
func (c *calls) do(f func(ctx context.Context)) {
	c.wg.Add(1)
	if c.work == nil {
		c.work = make(chan func(context.Context))
	}
	if c.live < c.n {
		select {
		case c.work <- f: // an idle worker took it
			return
		default:
		}
		c.live++
		go c.worker(c.work)
	}
	c.work <- f
}

func (c *calls) worker(work chan func(context.Context)) {
	for f := range work {
		c.run(f)
		c.wg.Done()
	}
}

// callMax bounds how long a call begun before its round's context ended
// may still run (calls.run).
const callMax = 5 * time.Second

// run runs f. A call begun while the round's context is live runs on a
// context that the round's end does not cancel, for callMax at most. A
// stop (tide kube shutting down, or losing its lease) that cut a call
// between the API server acting on it and tide reading the answer left
// tide not knowing what the server had done: the events that follow a
// status write (a TideJob's Declined) were never recorded, by this tide
// or by the next, which found the status already written (CI,
// TestKubeTidalHolds). A call not begun before the context ended runs on
// it, and fails at once.
func (c *calls) run(f func(context.Context)) {
	if c.ctx.Err() != nil {
		f(c.ctx)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), callMax)
	defer cancel()
	f(ctx)
}

// then queues f to run on the round's goroutine when wait returns; calls
// use it to record their results.
func (c *calls) then(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = append(c.after, f)
}

// wait waits for every call and ends the workers, then applies the calls'
// results in the order they were queued.
func (c *calls) wait() {
	c.wg.Wait()
	if c.work != nil {
		close(c.work)
		c.work, c.live = nil, 0
	}
	c.mu.Lock()
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, f := range after {
		f()
	}
}

func ownerRef(tj *TideJob) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: Group + "/" + Version, Kind: "TideJob", Name: tj.Name, UID: tj.UID, Controller: &yes}
}
