package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tide-sched/tide/job"
)

// Annotations and labels tide reads and writes on pods.
const (
	// AnnotJob names the job a plain pod belongs to: pods of one namespace
	// with the same value form one gang. Without it a pod is a job alone.
	AnnotJob = Group + "/job"
	// AnnotGangSize is the number of pods in a plain pod's gang (default
	// 1). tide binds them all together once that many pods exist.
	AnnotGangSize = Group + "/gang-size"
	// AnnotQueue is the tenant a plain pod's job charges (default its
	// namespace).
	AnnotQueue = Group + "/queue"
	// AnnotDuration is a plain pod's estimated run time (Go duration).
	AnnotDuration = Group + "/duration"
	// AnnotDeadline is a plain pod's deadline (RFC 3339).
	AnnotDeadline = Group + "/deadline"
	// LabelTideJob marks a TideJob's worker pods with the TideJob's name.
	LabelTideJob = Group + "/tidejob"
	// GPUResource is the extended resource GPUs are counted in.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// DefaultDuration is the run time assumed when a job gives none.
	DefaultDuration = time.Hour
)

// workload is one tide job as seen in the API: a TideJob with its worker
// pods, or a gang of plain pods.
type workload struct {
	key      string   // "pods/<ns>/<name>" or "tidejob/<ns>/<name>"
	ns, name string   // namespace and job (or TideJob) name
	tj       *TideJob // nil for plain pods
	minW     int      // gang: workers placed together or not at all
	maxW     int
	per      int    // GPUs per worker (1 for a part or a MIG slice)
	part     part   // what each worker asks of one GPU, the zero part for whole GPUs (share.go)
	jobType  string // a TideJob's spec.jobType
	pack     bool   // packable: whole GPUs bound by index, which the engine may pack in pairs (sharepairs.go)
	gpuType  string
	tenant   string
	priority int
	deadline float64 // Unix seconds, 0 = none
	duration float64 // seconds on minW workers
	created  float64 // Unix seconds

	pods      []*corev1.Pod // live pods: not terminal, not being deleted
	succeeded int           // pods that ended well (a TideJob's: at least those its status counts)
	failed    int           // pods that failed
	// over is a TideJob's end as tide wrote it in its status, Succeeded
	// or Failed: final, whether or not its ended workers are still there
	// (the terminated-pod garbage collector, or a user, deletes them).
	over     string
	rejected []*corev1.Pod // pods their node refused to run (kubelet admission), or evicted
	shape    *shape        // what one worker asks of a node (nil: no pod to tell)
	// lastFail is when the last of a plain gang's pods that failed on
	// their own failed (failTime; zero when one has no time); rerun, when
	// a live pod of the gang was made since, is that time: the gang runs
	// again (rerunGang), failed 0.
	lastFail, rerun time.Time
	failUntimed     bool // a failed pod says not when it failed
}

// job is the engine's view of w. A job finishing (a pod succeeded or,
// of a plain gang, failed on its own, others still live) is a job of the
// pods it keeps alone (finishing): the ended ones need no GPUs, and it is
// never made whole again.
func (w *workload) job(id string) *job.Job {
	lo, hi := w.minW, w.maxW
	if w.finishing() {
		lo, hi = w.keeps(), w.keeps()
	}
	return &job.Job{ID: id, Submit: w.created, Tenant: w.tenant, Priority: w.priority,
		GPUs: lo * w.per, MinGPUs: lo * w.per, MaxGPUs: hi * w.per, GPUType: w.engineType(),
		Work: w.duration, Unit: job.Seconds, Duration: w.duration, Deadline: w.deadline,
		Share: w.part.share, GPUMemGiB: w.part.memGiB, Model: w.model()}
}

// finishing: w is a gang of plain pods short of pods because some
// succeeded or failed on their own, with others still live (bound ones,
// after a failure), or a TideJob a worker of which succeeded, with others
// bound. Its pods run on to their end, holding their GPUs, which its
// tenant's quota counts; it gets no new pod (a finishing TideJob no new
// worker, a failed gang no pod bound).
func (w *workload) finishing() bool {
	if w.tj != nil {
		return w.succeeded > 0 && w.over == "" && w.keeps() > 0
	}
	return (w.succeeded > 0 || w.failed > 0) && w.keeps() > 0 && len(w.pods) < w.minW
}

// keeps is how many pods a finishing job is a job of: a gang's live pods,
// or once one failed, and for a TideJob, its bound ones (a failed gang
// starts no pod, a finishing TideJob's unbound spares never run).
func (w *workload) keeps() int {
	if w.tj == nil && w.failed == 0 {
		return len(w.pods)
	}
	return w.bound()
}

// bound is how many of w's live pods are bound.
func (w *workload) bound() int {
	n := 0
	for _, p := range w.pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// model is the job type the engine rates w's pairs by: its spec.jobType
// when it is packable.
func (w *workload) model() string {
	if w.pack {
		return w.jobType
	}
	return ""
}

// problem is input tide cannot schedule, with the object it concerns.
type problem struct {
	ns, name, kind string // the object
	msg            string
}

func (p problem) Error() string { return fmt.Sprintf("%s %s/%s: %s", p.kind, p.ns, p.name, p.msg) }

// podGPUs is the GPUs a pod asks for: the larger of its containers' sum
// and its largest init container (as the kubelet counts), from limits or,
// failing those, requests.
func podGPUs(p *corev1.Pod) int64 {
	get := func(c *corev1.Container) int64 {
		if q, ok := c.Resources.Limits[GPUResource]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Requests[GPUResource]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for i := range p.Spec.Containers {
		sum += get(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		initMax = max(initMax, get(&p.Spec.InitContainers[i]))
	}
	return max(sum, initMax)
}

func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// failedOnItsOwn reports whether a failed pod failed on its own, not
// refused or stopped by its node (rejected).
func failedOnItsOwn(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && !rejected(p)
}

// rejected reports whether a failed pod was refused or stopped by its
// node rather than failing on its own: the kubelet's admission errors
// (OutOfcpu, OutOfnvidia.com/gpu, NodeAffinity, UnexpectedAdmissionError,
// ...), its evictions and node shutdown.
func rejected(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodFailed {
		return false
	}
	r := p.Status.Reason
	switch r {
	case "Evicted", "Preempting", "NodeAffinity", "NodeSelectorMismatching", "UnexpectedAdmissionError",
		"Terminated", "Shutdown", "NodeShutdown", "InvalidNodeInfo", "PodOSNotSupported", "OutOfPods":
		return true
	}
	return strings.HasPrefix(r, "OutOf")
}

// grouping turns tide's pods and TideJobs into workloads. Pods must all use
// tide's scheduler name. Bad input gives problems naming the object and
// field; those objects are left out.
type grouping struct {
	gpuTypeLabel string
	pairs        *pairTable // nil: no pair-throughput table (sharepairs.go)
}

func (g grouping) group(pods []*corev1.Pod, tjs []*TideJob) (map[string]*workload, []problem) {
	out := map[string]*workload{}
	var probs []problem
	for _, tj := range tjs {
		w, err := g.fromTideJob(tj)
		if err != nil {
			probs = append(probs, problem{tj.Namespace, tj.Name, "tidejob", err.Error()})
			continue
		}
		out[w.key] = w
	}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(a, b int) bool {
		ta, tb := sorted[a].CreationTimestamp.Time, sorted[b].CreationTimestamp.Time
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return sorted[a].Namespace+"/"+sorted[a].Name < sorted[b].Namespace+"/"+sorted[b].Name
	})
	for _, p := range sorted {
		if name := p.Labels[LabelTideJob]; name != "" {
			w := out["tidejob/"+p.Namespace+"/"+name]
			if w == nil {
				continue // its TideJob is gone or invalid: not ours to run
			}
			w.add(p)
			continue
		}
		w, err := g.fromPod(p)
		if err != nil {
			probs = append(probs, problem{p.Namespace, p.Name, "pod", err.Error()})
			continue
		}
		if have := out[w.key]; have != nil {
			if have.part != w.part {
				probs = append(probs, problem{p.Namespace, p.Name, "pod", fmt.Sprintf(
					"job %s: %s of a GPU per pod, but its first pod asks for %s", w.name, w.part, have.part)})
				continue
			}
			if have.per != w.per || have.minW != w.minW {
				probs = append(probs, problem{p.Namespace, p.Name, "pod", fmt.Sprintf(
					"job %s: %d GPUs in a gang of %d, but its first pod asks for %d GPUs in a gang of %d",
					w.name, w.per, w.minW, have.per, have.minW)})
				continue
			}
			w = have
		} else {
			out[w.key] = w
		}
		w.add(p)
	}
	for _, w := range out {
		if w.tj != nil {
			// Succeeded pods may be deleted since tide counted them.
			w.succeeded = max(w.succeeded, w.tj.Status.Succeeded)
		}
		w.rerunGang()
	}
	return out, probs
}

// rerunGang makes a plain gang whose controller made a pod of it after
// its last failure a gang running again (docs/kubernetes.md, "Gangs"): a
// Job replaces a failed pod (keeping the failed one for its backoff
// count), a JobSet makes all its pods again; the failures before are
// history, and the gang's live pods, the new ones and any still running
// from before, are placed together as a gang. A TideJob that failed
// stays failed (its status says so), and so does a gang no pod of which
// was made since its last failure, or whose failed pod says not when it
// failed (no container of it has a finish time, which the kubelet
// writes): whether a live pod came after it cannot be told.
func (w *workload) rerunGang() {
	if w.tj != nil || w.failed == 0 || w.failUntimed {
		return
	}
	for _, p := range w.pods {
		// Times are whole seconds: a pod made in the second of the
		// failure came after it (a controller replaces a failed pod at
		// once; the pods that ran beside it were made before it failed).
		if !p.CreationTimestamp.Time.Before(w.lastFail) {
			w.failed, w.rerun = 0, w.lastFail
			return
		}
	}
}

// failTime is when a pod that failed failed: the last of its containers'
// finish times; false when none has one.
func failTime(p *corev1.Pod) (time.Time, bool) {
	var t time.Time
	for _, cs := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range cs {
			if tr := cs[i].State.Terminated; tr != nil && tr.FinishedAt.After(t) {
				t = tr.FinishedAt.Time
			}
		}
	}
	return t, !t.IsZero()
}

// jobFailed: a worker of w failed on its own, or w is a TideJob whose
// status tide wrote Failed (its failed worker may be deleted since).
func (w *workload) jobFailed() bool { return w.failed > 0 || w.over == PhaseFailed }

func (w *workload) add(p *corev1.Pod) {
	switch {
	case p.Status.Phase == corev1.PodSucceeded:
		w.succeeded++
	case failedOnItsOwn(p):
		w.failed++
		if t, ok := failTime(p); !ok {
			w.failUntimed = true
		} else if t.After(w.lastFail) {
			w.lastFail = t
		}
	case rejected(p):
		w.rejected = append(w.rejected, p)
	case podTerminal(p) || p.DeletionTimestamp != nil:
	default:
		w.pods = append(w.pods, p)
	}
}

func (g grouping) fromPod(p *corev1.Pod) (*workload, error) {
	gpus := podGPUs(p)
	pt, err := podPart(p, gpus)
	if err != nil {
		return nil, err
	}
	if pt.fractional() || pt.mig != "" {
		gpus = 1 // one part, or one MIG slice, per pod
	} else if gpus <= 0 {
		return nil, fmt.Errorf("resources.limits[%s]: tide schedules pods that ask for GPUs (or part of one), this one asks for none", GPUResource)
	}
	w := &workload{ns: p.Namespace, name: p.Name, minW: 1, per: int(gpus), part: pt, tenant: p.Namespace,
		created: unix(p.CreationTimestamp.Time), duration: DefaultDuration.Seconds()}
	if name, ok := p.Annotations[AnnotJob]; ok {
		if name == "" {
			return nil, fmt.Errorf("annotation %s: want a job name, got an empty one", AnnotJob)
		}
		w.name = name
		if s, ok := p.Annotations[AnnotGangSize]; ok {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 100000 {
				return nil, fmt.Errorf("annotation %s: want a whole number of pods from 1 to 100000, got %q", AnnotGangSize, s)
			}
			w.minW = n
		}
	} else if _, ok := p.Annotations[AnnotGangSize]; ok {
		return nil, fmt.Errorf("annotation %s needs %s (the job the gang belongs to)", AnnotGangSize, AnnotJob)
	}
	w.maxW = w.minW
	w.key = "pods/" + w.ns + "/" + w.name
	if q := p.Annotations[AnnotQueue]; q != "" {
		w.tenant = q
	}
	if p.Spec.Priority != nil {
		w.priority = int(*p.Spec.Priority)
	}
	w.gpuType = strings.ToLower(p.Spec.NodeSelector[g.gpuTypeLabel])
	if w.duration, err = parseDuration(p.Annotations[AnnotDuration], "annotation "+AnnotDuration); err != nil {
		return nil, err
	}
	if s := p.Annotations[AnnotDeadline]; s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", AnnotDeadline, s)
		}
		if w.deadline, err = job.LiveTime(t); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", AnnotDeadline, err)
		}
	}
	return w, nil
}

func (g grouping) fromTideJob(tj *TideJob) (*workload, error) {
	s := &tj.Spec
	w := &workload{key: "tidejob/" + tj.Namespace + "/" + tj.Name, ns: tj.Namespace, name: tj.Name, tj: tj,
		minW: s.MinWorkers, maxW: s.MaxWorkers, per: s.GPUsPerWorker, gpuType: strings.ToLower(s.GPUType),
		tenant: tj.Namespace, priority: s.Priority, created: unix(tj.CreationTimestamp.Time)}
	if w.minW == 0 {
		w.minW = 1
	}
	if w.maxW == 0 {
		w.maxW = w.minW
	}
	if w.per == 0 {
		w.per = 1
	}
	switch {
	case w.minW < 0 || w.minW > 100000:
		return nil, fmt.Errorf("spec.minWorkers: want 1 to 100000, got %d", s.MinWorkers)
	case w.maxW < w.minW || w.maxW > 100000:
		return nil, fmt.Errorf("spec.maxWorkers: want %d (minWorkers) to 100000, got %d", w.minW, s.MaxWorkers)
	case w.per < 0 || w.per > 1024:
		return nil, fmt.Errorf("spec.gpusPerWorker: want 1 to 1024, got %d", s.GPUsPerWorker)
	case len(s.Template.Spec.Containers) == 0:
		return nil, fmt.Errorf("spec.template.spec.containers: want at least one container")
	}
	pt, err := tideJobPart(s)
	if err != nil {
		return nil, err
	}
	w.part = pt
	if err := g.pairs.checkJobType(w, s); err != nil {
		return nil, err
	}
	if s.Queue != "" {
		w.tenant = s.Queue
	}
	if p := tj.Status.Phase; p == PhaseSucceeded || p == PhaseFailed {
		w.over = p
	}
	if s.Deadline != nil {
		if w.deadline, err = job.LiveTime(s.Deadline.Time); err != nil {
			return nil, fmt.Errorf("spec.deadline: %w", err)
		}
	}
	if w.duration, err = parseDuration(s.Duration, "spec.duration"); err != nil {
		return nil, err
	}
	return w, nil
}

func parseDuration(s, field string) (float64, error) {
	if s == "" {
		return DefaultDuration.Seconds(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive Go duration such as 90m or 2h, got %q", field, s)
	}
	return d.Seconds(), nil
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return job.Unix(t)
}

// workerPod builds worker pod number i of a TideJob from its template.
func workerPod(w *workload, schedulerName string) *corev1.Pod {
	tj := w.tj
	t := tj.Spec.Template.DeepCopy()
	p := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	p.Namespace = tj.Namespace
	p.Name = ""
	p.GenerateName = tj.Name + "-"
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[LabelTideJob] = tj.Name
	p.OwnerReferences = append(p.OwnerReferences, ownerRef(tj))
	p.Spec.SchedulerName = schedulerName
	p.Spec.NodeName = ""
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	c := &p.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if w.indexed() {
		delete(c.Resources.Limits, GPUResource) // a part or packable worker asks the device plugin for no GPU (gpuindex.go)
	} else {
		c.Resources.Limits[GPUResource] = *resource.NewQuantity(int64(w.per), resource.DecimalSI)
	}
	for i := 1; i < len(p.Spec.Containers); i++ {
		delete(p.Spec.Containers[i].Resources.Limits, GPUResource)
		delete(p.Spec.Containers[i].Resources.Requests, GPUResource)
	}
	if c.Resources.Requests != nil {
		delete(c.Resources.Requests, GPUResource)
	}
	return p
}
