package kube

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/kube/randsearch"
)

// The features of tide kube the random operations search turns on per
// seed, beyond plain pods and gangs (TestRandomOperations):
//
//   - TideJobs: rigid and elastic (minWorkers..maxWorkers), whole GPUs
//     or a part per worker, whose workers tide creates; deleted, failed
//     (a worker failing on its own), finished. A TideJob's bound workers
//     are never more than maxWorkers, never fewer than minWorkers for
//     more than partialGrace rounds, on one GPU type and site, and a
//     failed one keeps no live worker.
//   - MIG slices: nodes offering nvidia.com/mig-<profile>, pods asking
//     for one slice; a node never holds more slices of a profile than it
//     offers, and a slice pod goes only where its profile is.
//   - pair packing (gandiva:pack=true with a pair table; Gavel packs
//     under its LP policies alone, which need GLPK): packable TideJobs
//     bound by GPU index; an index holds at most two packable jobs, never
//     beside parts.
//   - quotas: --quota and --borrow, and TideQueues created, edited and
//     deleted (guarantee, borrow limit, weight); a tenant never holds
//     more GPUs than its guarantee without borrowing, nor more than its
//     guarantee and borrow limit with it.
//   - lent sites: another scheduler's serving pods asking for GPUs of an
//     inference or edge site, and edge servers taken back by their owner
//     (the taken-back label); a serving pod that a lent node could hold
//     were training off it is bound within servingGrace rounds (the test
//     plays that scheduler: it binds where GPUs are free), and tide binds
//     nothing to a server taken back and moves its workers off within
//     takenGrace rounds.
//   - held jobs (tidal's hold): a job tide says is held is never bound.
//   - reruns: a plain gang that failed on its own is made again by its
//     controller (its failed pods kept, as a Job keeps them): it runs
//     again, bound whole, on one GPU type and site, beside its pods still
//     running from before.
//   - host ports and the room of serving pods: plain jobs whose pods bind
//     a host port (one worker a node), and serving pods asking for CPUs
//     and binding the same port; no node ever has two live pods binding
//     one port, and a serving pod is bound within servingGrace rounds
//     while a lent node would have its GPUs, pod slot, CPUs and port were
//     training off it.
//   - GPUs of unknown memory: nodes of a GPU type tide knows no memory
//     for (parts are packed there by their share alone).
//
// What must hold is modelled from the specs the test wrote (the pods',
// TideJobs', TideQueues' and nodes'), not read from the scheduler, with
// one exception said where it is used: whether a TideQueue's guarantee is
// accepted depends on the GPUs tide counts in its cluster.
type features struct {
	tideJobs, mig, pairs, tidal, fill bool
	quota                             *rquota // nil: no quotas
	rerun, ports, oddType             bool

	tjs      map[string]*unstructured.Unstructured // the API server's TideJobs, by name
	tjIdx    cache.Indexer
	rv       int
	serveN   int
	serving  map[string]int // pending serving pod -> fresh rounds in a row it could have had room
	takenFor map[string]int // node taken back -> fresh rounds in a row tide's workers stayed on it
}

// rquota is the quotas in force, modelled: the flags' and the TideQueues'
// tide accepted.
type rquota struct {
	flags    map[string]int // --quota; nil: none
	borrow   bool
	queues   map[string]*TideQueue    // the API server's, by name (tenant)
	idx      cache.Indexer            // tide's cache of them
	synced   map[string]TideQueueSpec // as the last sync gave them to tide
	accepted map[string]TideQueueSpec // in force: accepted when a round read them
}

// Tenants of the quota feature ("ns" is the namespace's own).
var rTenants = []string{"qa", "qb", "ns"}

// servingGrace is how many fresh rounds a serving pod may wait while a
// lent node could hold it; takenGrace how many tide's workers may stay on
// a server taken back (evicted, then terminating: dying takes up to 3).
const (
	servingGrace = 8
	takenGrace   = 1
)

// pickFeatures chooses the seed's features from an rng of their own, so
// a seed with none runs as before they were added, and sets what they
// need in cfg.
func (w *rworld) pickFeatures(cfg *Config) *features {
	frng := rand.New(rand.NewSource(w.seed*1_000_003 + 17))
	f := &features{serving: map[string]int{}, takenFor: map[string]int{}, tjs: map[string]*unstructured.Unstructured{}}
	if os.Getenv("TIDE_KUBE_RANDOM_FEATURES") == "0" {
		return f // plain pods and gangs only
	}
	f.tideJobs = frng.Intn(2) == 0
	f.mig = frng.Intn(4) == 0
	f.tidal = w.sites && frng.Intn(2) == 0
	if frng.Intn(3) == 0 {
		q := &rquota{borrow: frng.Intn(2) == 0, queues: map[string]*TideQueue{}, accepted: map[string]TideQueueSpec{}}
		for _, t := range rTenants {
			if frng.Intn(2) == 0 {
				if q.flags == nil {
					q.flags = map[string]int{}
				}
				q.flags[t] = frng.Intn(9)
			}
		}
		cfg.Quotas, cfg.Borrow = q.flags, q.borrow
		f.quota = q
	}
	if frng.Intn(6) == 0 {
		f.fill, cfg.FillIdle = true, true
	}
	if strings.Split(cfg.Policy, ":")[0] == "gandiva" && frng.Intn(2) == 0 {
		f.pairs, f.tideJobs = true, true
		cfg.PairThroughputs = writePairs(w.t)
		cfg.Policy = "gandiva:pack=true"
	}
	if f.quota != nil {
		cfg.Observe = func(RoundInfo) { w.quotaRead() }
	}
	// Drawn after the others, so that a seed's earlier features stay.
	f.rerun = frng.Intn(2) == 0
	f.ports = frng.Intn(3) == 0 || f.tidal && frng.Intn(2) == 0 // the serving pods' room matters on lent sites
	f.oddType = frng.Intn(4) == 0 && w.oneType == ""
	w.logf("features: tidejobs %v, mig %v, pairs %v, tidal %v, fill %v, quota %+v, rerun %v, ports %v, odd type %v",
		f.tideJobs, f.mig, f.pairs, f.tidal, f.fill, f.quota, f.rerun, f.ports, f.oddType)
	return f
}

// wireFeatures gives the harness's scheduler what its features read: the
// TideJob and TideQueue caches and a dynamic client for their status.
func (w *rworld) wireFeatures() {
	f := w.feat
	if !f.tideJobs && f.quota == nil {
		return
	}
	if f.tideJobs {
		f.tjIdx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		w.h.s.tjs = cache.NewGenericLister(f.tjIdx, TideJobResource.GroupResource())
	}
	if q := f.quota; q != nil {
		q.idx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		w.h.s.queues.lister = cache.NewGenericLister(q.idx, TideQueueResource.GroupResource())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{TideJobResource: "TideJobList", TideQueueResource: "TideQueueList"})
	dyn.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		w.mu.Lock()
		defer w.mu.Unlock()
		if a.GetResource().Resource == "tidejobs" {
			have := f.tjs[u.GetName()]
			if have == nil || have.GetUID() != u.GetUID() {
				return true, nil, apierrors.NewNotFound(TideJobResource.GroupResource(), u.GetName())
			}
			have = have.DeepCopy()
			have.Object["status"] = u.Object["status"]
			f.rv++
			have.SetResourceVersion(fmt.Sprint(f.rv))
			f.tjs[u.GetName()] = have
			return true, have.DeepCopy(), nil
		}
		return true, u, nil // a TideQueue's status: not read back
	})
	w.h.s.cfg.Dynamic = dyn
}

// syncFeatures copies the API server's TideJobs and TideQueues into
// tide's caches (each round: their informers are not the ones lagging).
func (w *rworld) syncFeatures() {
	f := w.feat
	if f.tjIdx != nil {
		var objs []any
		for _, u := range f.tjs {
			objs = append(objs, u.DeepCopy())
		}
		if err := f.tjIdx.Replace(objs, ""); err != nil {
			w.t.Fatal(err)
		}
	}
	if q := f.quota; q != nil {
		var objs []any
		q.synced = map[string]TideQueueSpec{}
		for name, tq := range q.queues {
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tq)
			if err != nil {
				w.t.Fatal(err)
			}
			objs = append(objs, &unstructured.Unstructured{Object: obj})
			q.synced[name] = tq.Spec
		}
		if err := q.idx.Replace(objs, ""); err != nil {
			w.t.Fatal(err)
		}
	}
}

// quotaRead models tide reading the TideQueues in a round that reached
// its engine: a spec is accepted unless it guarantees more GPUs than the
// cluster has (the test writes only specs valid otherwise), a deleted
// queue's quota goes. The cluster's GPUs are those tide counts (its
// engine's cluster: usable nodes, less what other schedulers' pods hold,
// nodes NotReady within their grace holding only tide's running pods):
// modelling that again here would be a second scheduler.
func (w *rworld) quotaRead() {
	q := w.feat.quota
	total := w.h.s.eng.Snapshot().Cluster.TotalGPUs()
	for name := range q.accepted {
		if _, ok := q.synced[name]; !ok {
			delete(q.accepted, name)
		}
	}
	for name, sp := range q.synced {
		if sp.GuaranteedGPUs <= total {
			q.accepted[name] = sp
		}
	}
}

// limits are the quotas in force: guarantee and borrow limit (-1: none)
// per tenant; nil when no quota is in force.
func (q *rquota) limits() (guar, borrowMax map[string]int) {
	if q == nil || (q.flags == nil && len(q.accepted) == 0) {
		return nil, nil
	}
	guar, borrowMax = map[string]int{}, map[string]int{}
	for t, g := range q.flags {
		guar[t] = g
	}
	for _, t := range rTenants {
		borrowMax[t] = -1
	}
	for t, sp := range q.accepted {
		guar[t] = sp.GuaranteedGPUs
		if sp.BorrowLimit != nil {
			borrowMax[t] = *sp.BorrowLimit
		}
	}
	return guar, borrowMax
}

// cap is the most GPUs tenant t may hold under the quotas in force, -1
// for no cap.
func (q *rquota) cap(t string) int {
	guar, borrowMax := q.limits()
	switch {
	case guar == nil:
		return -1
	case !q.borrow:
		return guar[t]
	case borrowMax[t] >= 0:
		return guar[t] + borrowMax[t]
	}
	return -1
}

func (j *rjob) tenantOf() string {
	if j.tenant == "" {
		return "ns"
	}
	return j.tenant
}

// quotaGPUs is the GPUs one worker of j counts against its tenant's
// quota: its whole GPUs, or one for a part, a slice or a packable worker
// (the engine's count: a job of k parts holds k GPUs).
func (j *rjob) quotaGPUs() int {
	if j.gpus > 0 && j.jobType == "" {
		return j.gpus
	}
	return 1
}

// withinQuota: j's gang can run under the quotas in force: within its
// tenant's guarantee, or with borrowing within the guarantee and the
// borrow limit together (a job larger than the guarantee takes it and
// borrows the rest).
func (w *rworld) withinQuota(j *rjob) bool {
	m := w.feat.quota.cap(j.tenantOf())
	return m < 0 || j.size*j.quotaGPUs() <= m
}

// rOddType is a GPU type tide knows no memory for.
const rOddType = "L4X"

// featureNode gives a new node a GPU type of unknown memory, with that
// feature, and MIG slices, with the MIG feature.
func (w *rworld) featureNode(n *corev1.Node) {
	if w.feat.oddType && w.rng.Intn(3) == 0 {
		n.Labels[randsearch.TypeLabel] = rOddType
	}
	if !w.feat.mig || w.rng.Intn(3) != 0 {
		return
	}
	n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = *resource.NewQuantity(int64(1+w.rng.Intn(4)), resource.DecimalSI)
	if w.rng.Intn(2) == 0 {
		n.Status.Allocatable[corev1.ResourceName(migPrefix+"2g.20gb")] = *resource.NewQuantity(int64(1+w.rng.Intn(2)), resource.DecimalSI)
	}
}

// featureJob gives a new plain job a MIG slice per pod or a queue.
func (w *rworld) featureJob(j *rjob) {
	if w.feat.mig && j.share == 0 && w.rng.Intn(4) == 0 {
		j.mig, j.gpus, j.Type = []string{"1g.10gb", "2g.20gb"}[w.rng.Intn(2)], 0, ""
	}
	if w.feat.quota != nil {
		j.tenant = []string{"qa", "qb", ""}[w.rng.Intn(3)]
	}
	if w.feat.ports && w.rng.Intn(3) == 0 {
		j.port = true
	}
}

// operateFeature is an operation on what the seed's features add
// (r in [76, 100)); nothing for a feature that is off.
func (w *rworld) operateFeature(r int) {
	f := w.feat
	switch {
	case r < 80 && f.tidal:
		w.serve()
	case r < 82 && f.tidal:
		w.editNode("taken back", func(n *corev1.Node) string {
			if k := n.Labels[DefaultSiteKindLabel]; k != "edge" && k != "inference" {
				return "not lent: left as it is"
			}
			if _, ok := n.Labels[DefaultTakenBackKey]; ok {
				delete(n.Labels, DefaultTakenBackKey)
				return "given back to training"
			}
			n.Labels[DefaultTakenBackKey] = "true"
			return "taken back by its owner"
		})
	case r < 86 && f.quota != nil:
		w.editQueue()
	case r < 88 && f.mig:
		w.editNode("mig", func(n *corev1.Node) string {
			k := w.rng.Intn(4)
			n.Status.Allocatable[corev1.ResourceName(migPrefix+"1g.10gb")] = *resource.NewQuantity(int64(k), resource.DecimalSI)
			return fmt.Sprintf("%d slices 1g.10gb", k)
		})
	case r < 90 && f.tideJobs:
		name := w.pick(w.jobNames(func(j *rjob) bool { return j.tide && !j.gone }))
		if name != "" {
			w.deleteTideJob(w.jobs[name])
			w.logf("delete tidejob %s", name)
		}
	}
}

// submitTideJob makes a TideJob: rigid or elastic, whole GPUs or a part
// per worker, a packable type with the pair feature.
func (w *rworld) submitTideJob() {
	rng := w.rng
	j := &rjob{name: fmt.Sprintf("j%d", w.nextJob), tide: true, gang: true, size: 1 + rng.Intn(3), prio: int32(rng.Intn(3) * 100),
		dur: time.Duration(1+rng.Intn(30)) * 10 * time.Minute}
	w.nextJob++
	j.maxW = j.size
	if rng.Intn(2) == 0 {
		j.maxW += 1 + rng.Intn(3)
	}
	switch {
	case rng.Intn(6) == 0:
		j.share, j.maxW = []float64{0.25, 0.5}[rng.Intn(2)], j.size
	case w.feat.pairs && rng.Intn(2) == 0:
		j.jobType, j.gpus, j.Type, j.size, j.maxW = []string{"A", "B", "C"}[rng.Intn(3)], 1, "V100", 1, 1
	default:
		j.gpus = []int{1, 1, 2, 4}[rng.Intn(4)]
	}
	if rng.Intn(2) == 0 {
		j.CPU = int64(rng.Intn(17)) * 1000
	}
	if rng.Intn(2) == 0 {
		j.Mem = int64(rng.Intn(65)) << 30
	}
	if j.Type == "" && rng.Intn(4) == 0 {
		j.Type = []string{"V100", "A100"}[rng.Intn(2)]
	}
	switch rng.Intn(6) {
	case 0:
		j.Pool = []string{"p1", "p2"}[rng.Intn(2)]
	case 1:
		j.NotIn = []string{"p1", "p2"}[rng.Intn(2)]
	}
	j.TolDed = rng.Intn(3) == 0
	j.TolMaint = rng.Intn(3) == 0
	if rng.Intn(3) == 0 {
		j.Deadline = time.Duration(1+rng.Intn(20)) * 30 * time.Minute
	}
	if w.feat.quota != nil {
		j.tenant = []string{"qa", "qb", ""}[rng.Intn(3)]
	}
	j.key = "tidejob/ns/" + j.name
	w.jobs[j.name] = j
	c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	spec := TideJobSpec{MinWorkers: j.size, MaxWorkers: j.maxW, GPUsPerWorker: max(j.gpus, 1), JobType: j.jobType, GPUType: j.Type,
		Priority: int(j.prio), Queue: j.tenant, Duration: j.dur.String(),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "tide", Containers: []corev1.Container{c}}}}
	if j.share > 0 {
		spec.GPUFraction = fmt.Sprint(j.share)
	}
	if j.Deadline > 0 {
		d := metav1.NewTime(w.now.Add(j.Deadline))
		spec.Deadline = &d
	}
	cons := j.Constraints
	cons.Type = "" // the TideJob's GPUType
	cons.Apply(&spec.Template.Spec)
	w.uid++
	w.feat.rv++
	tj := &TideJob{TypeMeta: metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: "TideJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: j.name, UID: types.UID(fmt.Sprintf("tj%d", w.uid)),
			ResourceVersion: fmt.Sprint(w.feat.rv), CreationTimestamp: metav1.NewTime(w.now)}, Spec: spec}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		w.t.Fatal(err)
	}
	w.feat.tjs[j.name] = &unstructured.Unstructured{Object: obj}
	w.logf("submit tidejob %s: %d..%d workers of %d GPUs/share %g type %q jobType %q, cpu %dm, mem %dGi, pool %q notIn %q, tol ded=%v maint=%v, prio %d, dur %s, deadline %s, queue %q",
		j.name, j.size, j.maxW, j.gpus, j.share, j.Type, j.jobType, j.CPU, j.Mem>>30, j.Pool, j.NotIn, j.TolDed, j.TolMaint, j.prio, j.dur, j.Deadline, j.tenant)
}

// createWorker is the API server creating a worker pod tide made for a
// TideJob (w.mu held): named from its generateName.
func (w *rworld) createWorker(p *corev1.Pod) (bool, runtime.Object, error) {
	j := w.jobs[p.Labels[LabelTideJob]]
	if j == nil || j.gone {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, p.GenerateName, fmt.Errorf("its TideJob is gone"))
	}
	w.uid++
	p = p.DeepCopy()
	p.Name = fmt.Sprintf("%sw%d", p.GenerateName, w.uid)
	p.UID = types.UID(fmt.Sprintf("u%d", w.uid))
	p.CreationTimestamp = metav1.NewTime(w.now)
	p.Status.Phase = corev1.PodPending
	w.pods[p.Name] = p
	w.podJob[p.Name] = j
	j.pods = append(j.pods, p.Name)
	w.logf("tide created worker %s", p.Name)
	return true, p.DeepCopy(), nil
}

// reactDelete is the API server deleting a pod tide removes (a failed
// TideJob's worker, a stale unbound one): a bound pod terminates for a
// round, an unbound one goes at once.
func (w *rworld) reactDelete(a k8stesting.Action) (bool, runtime.Object, error) {
	name := a.(k8stesting.DeleteAction).GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pods[name]
	if p == nil {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	if p.Spec.NodeName == "" || podTerminal(p) {
		delete(w.pods, name)
		return true, nil, nil
	}
	if p.DeletionTimestamp == nil {
		p = p.DeepCopy()
		now := metav1.NewTime(w.now)
		p.DeletionTimestamp = &now
		w.pods[name] = p
		w.dying[name] = 1
	}
	return true, nil, nil
}

// deleteTideJob deletes j's TideJob; the garbage collector deletes its
// workers.
func (w *rworld) deleteTideJob(j *rjob) {
	if !j.tide || j.gone {
		return
	}
	j.gone, j.done = true, true
	delete(w.feat.tjs, j.name)
	for _, p := range w.livePods(j) {
		w.terminate(p.Name, "tidejob deleted")
	}
}

// editQueue creates, edits or deletes a TideQueue (valid specs only: the
// API server's schema refuses the others).
func (w *rworld) editQueue() {
	q := w.feat.quota
	t := rTenants[w.rng.Intn(len(rTenants))]
	if q.queues[t] != nil && w.rng.Intn(4) == 0 {
		delete(q.queues, t)
		w.logf("tidequeue %s deleted", t)
		return
	}
	tq := q.queues[t]
	if tq == nil {
		w.uid++
		tq = &TideQueue{TypeMeta: metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: "TideQueue"},
			ObjectMeta: metav1.ObjectMeta{Name: t, UID: types.UID(fmt.Sprintf("tq%d", w.uid))}}
	} else {
		tq = tq.DeepCopy()
	}
	tq.Generation++
	tq.Spec = TideQueueSpec{GuaranteedGPUs: w.rng.Intn(9), Weight: 1 + w.rng.Intn(3)}
	if w.rng.Intn(2) == 0 {
		b := w.rng.Intn(5)
		tq.Spec.BorrowLimit = &b
	}
	q.queues[t] = tq
	bl := "none"
	if tq.Spec.BorrowLimit != nil {
		bl = fmt.Sprint(*tq.Spec.BorrowLimit)
	}
	w.logf("tidequeue %s: guaranteed %d, borrow limit %s, weight %d (generation %d)", t, tq.Spec.GuaranteedGPUs, bl, tq.Spec.Weight, tq.Generation)
}

// DeepCopy returns a copy of q (the test's edits only).
func (q *TideQueue) DeepCopy() *TideQueue {
	out := *q
	q.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if q.Spec.BorrowLimit != nil {
		b := *q.Spec.BorrowLimit
		out.Spec.BorrowLimit = &b
	}
	out.Status.Conditions = append([]metav1.Condition(nil), q.Status.Conditions...)
	return &out
}

// serve makes a pod of another scheduler asking for GPUs of a lent site
// (one pending at a time: which of two a node holds is that scheduler's
// choice), or ends a bound one.
func (w *rworld) serve() {
	var pending, bound []string
	for name, p := range w.pods {
		if p.Spec.SchedulerName != "serving" || !live(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			pending = append(pending, name)
		} else {
			bound = append(bound, name)
		}
	}
	if len(pending) > 0 || (len(bound) > 0 && w.rng.Intn(2) == 0) {
		if name := w.pick(bound); name != "" {
			delete(w.pods, name)
			w.logf("serving pod %s ends", name)
		}
		return
	}
	site := "infer"
	if !w.noEdge && w.rng.Intn(2) == 0 {
		site = "edge"
	}
	w.feat.serveN++
	w.uid++
	name := fmt.Sprintf("serve-%d", w.feat.serveN)
	g := int64(1 + w.rng.Intn(2))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(fmt.Sprintf("u%d", w.uid)), CreationTimestamp: metav1.NewTime(w.now)},
		Spec: corev1.PodSpec{SchedulerName: "serving", NodeSelector: map[string]string{DefaultSiteLabel: site},
			Containers: []corev1.Container{{Name: "s", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: *resource.NewQuantity(g, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	cpu, port := int64(0), false
	if w.feat.ports { // its other room: CPUs, and the port training pods bind
		if w.rng.Intn(2) == 0 {
			cpu = int64(1+w.rng.Intn(16)) * 1000
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}
		}
		if port = w.rng.Intn(2) == 0; port {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: rPort, HostPort: rPort}}
		}
	}
	w.pods[name] = p
	w.logf("serving pod %s asks %d GPUs, %dm CPU, host port %v on site %s", name, g, cpu, port, site)
}

// servingRoom: node has room for serving pod p beyond its GPUs (a pod
// slot, its CPUs, its host port) beside the live pods bound to it (with
// servingOnly, beside the serving pods only).
func (w *rworld) servingRoom(p *corev1.Pod, node string, servingOnly bool) bool {
	if !w.podRoom(node, servingOnly) {
		return false
	}
	cpu := randsearch.Qty(p.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)
	for name, q := range w.pods {
		if q.Spec.NodeName != node || !live(q) || (servingOnly && w.podJob[name] != nil) {
			continue
		}
		if bindsPort(p) && bindsPort(q) {
			return false
		}
		if j := w.podJob[name]; j != nil {
			cpu += j.CPU
		} else {
			cpu += randsearch.Qty(q.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)
		}
	}
	return cpu <= randsearch.Qty(w.nodes[node].Status.Allocatable, corev1.ResourceCPU)
}

// servingNode: n is a node a serving pod p may go to, whoever holds its
// GPUs: Ready, not cordoned, no NoSchedule or NoExecute taint (p
// tolerates none), on p's site, lent (edge or inference), not taken back.
func servingNode(p *corev1.Pod, n *corev1.Node) bool {
	if !randsearch.NodeReady(n) || n.Spec.Unschedulable || n.Labels[DefaultSiteLabel] != p.Spec.NodeSelector[DefaultSiteLabel] {
		return false
	}
	if k := n.Labels[DefaultSiteKindLabel]; k != "edge" && k != "inference" {
		return false
	}
	if _, ok := n.Labels[DefaultTakenBackKey]; ok {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			return false
		}
	}
	return true
}

// podRoom: node has room for another pod beside the live pods bound to it
// (with serving alone, beside the serving pods only).
func (w *rworld) podRoom(node string, servingOnly bool) bool {
	k := int64(0)
	for name, p := range w.pods {
		if p.Spec.NodeName == node && live(p) && (!servingOnly || w.podJob[name] == nil) {
			k++
		}
	}
	return k < randsearch.Qty(w.nodes[node].Status.Allocatable, corev1.ResourcePods)
}

// gpusTaken is the GPUs the live pods bound to node hold (terminating ones
// too): whole GPUs, and the indices parts and packable workers hold;
// with serving alone, only the serving pods'.
func (w *rworld) gpusTaken(node string, servingOnly bool) int64 {
	var g int64
	idx := map[string]bool{}
	for name, p := range w.pods {
		if p.Spec.NodeName != node || !live(p) {
			continue
		}
		j := w.podJob[name]
		switch {
		case j == nil:
			g += podGPUs(p)
		case servingOnly || j.mig != "":
		case j.share > 0 || j.jobType != "":
			idx[p.Annotations[AnnotGPUIndex]] = true
		default:
			g += int64(j.gpus)
		}
	}
	return g + int64(len(idx))
}

// bindServing plays the serving pods' scheduler: a pending one is bound
// to the first lent node of its site with its GPUs free.
func (w *rworld) bindServing() {
	for _, name := range sortedKeys(w.pods) {
		p := w.pods[name]
		if p.Spec.SchedulerName != "serving" || p.Spec.NodeName != "" || !live(p) {
			continue
		}
		for _, node := range sortedKeys(w.nodes) {
			n := w.nodes[node]
			if servingNode(p, n) && randsearch.Qty(n.Status.Allocatable, GPUResource)-w.gpusTaken(node, false) >= podGPUs(p) && w.servingRoom(p, node, false) {
				p = p.DeepCopy()
				p.Spec.NodeName, p.Status.Phase = node, corev1.PodRunning
				w.pods[name] = p
				w.logf("serving pod %s bound to %s", name, node)
				break
			}
		}
	}
}

// checkFeatures checks the round just run against what the features
// promise (see features).
func (w *rworld) checkFeatures() {
	w.t.Helper()
	f := w.feat
	evicted := map[string]bool{}
	for _, name := range w.evicts {
		evicted[name] = true
	}
	// Held jobs are not bound.
	for _, name := range sortedKeys(w.bound) {
		j := w.podJob[name]
		if st := w.h.s.eng.Job(w.h.s.ids[j.key]); st != nil && held(st.Reason()) {
			w.fail("pod %s of %s bound while tide says the job is held: %q", name, j.name, st.Reason().Text)
		}
	}
	if f.tideJobs {
		for _, name := range sortedKeys(w.jobs) {
			if j := w.jobs[name]; j.tide {
				w.checkTideJob(j, evicted)
			}
		}
	}
	if c := f.quota; c != nil {
		use := map[string]int{}
		var pods []string
		for _, name := range sortedKeys(w.pods) {
			p, j := w.pods[name], w.podJob[name]
			if j == nil || p.Spec.NodeName == "" || !live(p) || p.DeletionTimestamp != nil || evicted[name] {
				continue
			}
			use[j.tenantOf()] += j.quotaGPUs()
			pods = append(pods, fmt.Sprintf("%s(%s:%d)", name, j.tenantOf(), j.quotaGPUs()))
		}
		guar, borrowMax := c.limits()
		for _, t := range sortedKeys(use) {
			if m := c.cap(t); m >= 0 && use[t] > m {
				w.fail("tenant %s holds %d GPUs, more than its quota allows (%d: guaranteed %d, borrow %v, borrow limit %d); quotas in force %v, pods %v\n%s",
					t, use[t], m, guar[t], c.borrow, borrowMax[t], guar, pods, w.engineState())
			}
		}
	}
	if !f.tidal || !w.fresh {
		return
	}
	for _, node := range sortedKeys(w.nodes) {
		if _, ok := w.nodes[node].Labels[DefaultTakenBackKey]; !ok {
			delete(f.takenFor, node)
			continue
		}
		var stay []string
		for _, name := range sortedKeys(w.pods) {
			p := w.pods[name]
			if p.Spec.NodeName != node || w.podJob[name] == nil || !live(p) || p.DeletionTimestamp != nil || evicted[name] {
				continue
			}
			if _, now := w.bound[name]; now {
				w.fail("pod %s bound to %s, which its owner took back", name, node)
			}
			stay = append(stay, name)
		}
		if len(stay) == 0 {
			delete(f.takenFor, node)
			continue
		}
		if f.takenFor[node]++; f.takenFor[node] > takenGrace {
			w.fail("node %s taken back by its owner %d rounds ago, tide's workers %v still on it", node, f.takenFor[node], stay)
		}
	}
	for _, name := range sortedKeys(w.pods) {
		p := w.pods[name]
		if p.Spec.SchedulerName != "serving" || p.Spec.NodeName != "" || !live(p) {
			delete(f.serving, name)
			continue
		}
		var could []string
		for _, node := range sortedKeys(w.nodes) {
			n := w.nodes[node]
			if servingNode(p, n) && randsearch.Qty(n.Status.Allocatable, GPUResource)-w.gpusTaken(node, true) >= podGPUs(p) && w.servingRoom(p, node, true) {
				could = append(could, node)
			}
		}
		if len(could) == 0 {
			delete(f.serving, name)
			continue
		}
		if f.serving[name]++; f.serving[name] > servingGrace {
			w.fail("serving pod %s (%d GPUs) waited %d rounds while lent nodes %v could hold it were training off them", name, podGPUs(p), f.serving[name], could)
		}
	}
}

// checkTideJob: j's bound workers are at most maxWorkers, at least
// minWorkers when tide bound some this round, on one GPU type and site,
// not fewer than minWorkers for long, and none live once it failed.
func (w *rworld) checkTideJob(j *rjob, evicted map[string]bool) {
	if j.gone {
		return
	}
	if j.done && w.fresh {
		for _, name := range j.pods {
			if _, now := w.bound[name]; now {
				w.fail("tidejob %s got worker %s bound after a worker of it succeeded or failed", j.name, name)
			}
		}
	}
	var on []*corev1.Pod
	fresh := false
	for _, p := range w.livePods(j) {
		if p.Spec.NodeName != "" && !evicted[p.Name] {
			on = append(on, p)
			if _, ok := w.bound[p.Name]; ok {
				fresh = true
			}
		}
	}
	if j.failed {
		if n := len(w.livePods(j)) - countEvicted(w.livePods(j), evicted); n > 0 && w.fresh {
			if j.failedFor++; j.failedFor > 2 {
				w.fail("tidejob %s failed %d rounds ago and still has %d live workers", j.name, j.failedFor, n)
			}
		}
		return
	}
	if w.ended(j) {
		j.partial = 0
		return
	}
	if len(on) > j.maxW {
		w.fail("tidejob %s has %d workers bound, maxWorkers %d", j.name, len(on), j.maxW)
	}
	if fresh && w.fresh && !w.noBind[j.name] && len(on) < j.size {
		w.fail("tidejob %s bound workers this round but has %d of its minimum %d", j.name, len(on), j.size)
	}
	if fresh {
		w.oneGroup("tidejob", j, on)
	}
	if len(on) > 0 && len(on) < j.size {
		if w.fresh {
			j.partial++
		}
		if j.partial > partialGrace {
			w.fail("tidejob %s has %d workers bound of its minimum %d for %d rounds", j.name, len(on), j.size, j.partial)
		}
	} else {
		j.partial = 0
	}
}

func countEvicted(ps []*corev1.Pod, evicted map[string]bool) int {
	n := 0
	for _, p := range ps {
		if evicted[p.Name] {
			n++
		}
	}
	return n
}

// quietFeatures ends what the features keep from the end of the search:
// the serving pods go and the servers taken back are given back, so the
// lent nodes are training's again.
func (w *rworld) quietFeatures() {
	for _, name := range sortedKeys(w.pods) {
		if w.pods[name].Spec.SchedulerName == "serving" {
			delete(w.pods, name)
		}
	}
	for _, node := range sortedKeys(w.nodes) {
		if _, ok := w.nodes[node].Labels[DefaultTakenBackKey]; ok {
			n := w.nodes[node].DeepCopy()
			delete(n.Labels, DefaultTakenBackKey)
			w.nodes[node] = n
		}
	}
	w.feat.serving, w.feat.takenFor = map[string]int{}, map[string]int{}
}
