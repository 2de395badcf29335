package kubetest

import (
	"context"
	"fmt"
	"math"
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

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/report"
	scen "github.com/tide-sched/tide/scenario"
)

// The live scenario runner (docs/kubernetes.md, "Live scenarios"): a
// scenario file run against the real API server, tide kube scheduling its
// trace's jobs as TideJobs with the policy and performance model the
// simulator builds from the same file. The driver stands in for everything
// around tide:
//
//   - the nodes: one per node of the scenario's cluster, labelled with its
//     site, site kind and GPU type; the driver plays their kubelets (bound
//     pods start, deleted ones are gone at once);
//   - the training processes: each TideJob's progress advances at the rate
//     the scenario's model gives its running workers' allocation, after the
//     model's start, restart or resize cost (and the cross-site migration
//     cost, as the simulator charges it); its workers succeed when its work
//     is done;
//   - the sites' owners: inference demand is the replica count of an
//     inference Deployment per site (one GPU a replica, pods of another
//     scheduler, "serving"), scaled along the capacity timeline (the
//     deployment and replica set controllers run) and bound by the driver
//     where a node has room; edge availability becomes the taken-back
//     label on servers;
//   - the clock: tide's engine runs on a compressed clock, speed simulated
//     seconds per wall second.
//
// It prints the same JSON as `tide sim --scenario FILE --json`, for the
// live run and for the simulator's, and a line comparing them.

// liveClock is simulated seconds since the run began, speed times wall
// time.
type liveClock struct {
	t0    time.Time
	speed float64
}

func (c *liveClock) Now() float64 { return time.Since(c.t0).Seconds() * c.speed }

// liveJob is one trace job as the driver runs it.
type liveJob struct {
	j        *job.Job
	name     string
	rec      report.JobRecord
	submit   bool
	progress float64
	delay    float64 // cost seconds still to pay before progress
	workers  string  // the running workers' nodes last seen, sorted
	gpus     int
	site     string
	done     bool
}

// liveRun is one live run's state.
type liveRun struct {
	t        *testing.T
	s        *scenario
	ns       string
	clk      *liveClock
	model    perf.Model
	c        *cluster.Cluster
	node     map[string]int // kube node name -> cluster node index
	kname    []string       // cluster node index -> kube node name
	jobs     []*liveJob
	byName   map[string]*liveJob
	events   []capacity.Change
	next     int
	mig      func(j *job.Job) float64 // cross-site move cost, s
	up       []float64                // per site: GPU-seconds available to training
	alloc    []float64                // per site: GPU-seconds held by training
	siteIx   map[string]int
	looked   time.Time      // when declined TideJobs were last looked up
	replicas map[string]int // site -> its inference Deployment's replicas, as last set

	mu sync.Mutex // guards progress, read by tide's rounds
}

func kubeName(n string) string {
	return strings.Trim(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(strings.ToLower(n)), "-")
}

// TestLiveScenario runs the scenario of $TIDE_LIVE_SCENARIO (a path from
// the repository's root; scripts/live-scenario.sh sets it) under the
// policy $TIDE_LIVE_POLICY (default the file's first) at
// $TIDE_LIVE_SPEED simulated seconds per wall second (default 600), and
// writes the JSON to $TIDE_LIVE_OUT (default the test log). Without
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
	speed := 600.0
	if v := os.Getenv("TIDE_LIVE_SPEED"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) {
			t.Fatalf("TIDE_LIVE_SPEED=%q: want simulated seconds per wall second > 0", v)
		}
		speed = f
	}
	e := startEnv(t)
	live, sim := runLive(t, e, file, os.Getenv("TIDE_LIVE_POLICY"), speed)
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
	b.WriteString(agreement(live.Runs[0], sim.Runs[0]) + "\n")
	for i := range live.Runs[0].Jobs {
		l, s := &live.Runs[0].Jobs[i], &sim.Runs[0].Jobs[i]
		fmt.Fprintf(&b, "job %s: submit %.0f; start %.0f live, %.0f simulated; finish %.0f, %.0f; preemptions %d, %d; restarts %d, %d; %s, %s\n",
			l.ID, l.Submit, l.Start, s.Start, l.Finish, s.Finish, l.Preemptions, s.Preemptions, l.Restarts, s.Restarts, l.State, s.State)
	}
	if out := os.Getenv("TIDE_LIVE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Log(b.String())
}

// agreement compares the four figures of a live and a simulated
// run.
func agreement(live, sim *report.Run) string {
	l, s := report.Summarize(live), report.Summarize(sim)
	met := func(x report.Summary) float64 {
		if x.DeadlineMetFrac == nil {
			return math.NaN()
		}
		return 100 * *x.DeadlineMetFrac
	}
	harvest := func(x report.Summary) float64 {
		if x.Sites == nil {
			return 0
		}
		return x.Sites.HarvestedEdgeGPUHours + x.Sites.HarvestedInferenceGPUHours
	}
	wait := func(x report.Summary) float64 {
		if x.Sites == nil {
			return 0
		}
		return x.Sites.InferenceWaitSeconds
	}
	return fmt.Sprintf("agreement %s: deadlines met %.1f%% live, %.1f%% simulated; avg JCT %.0f s, %.0f s; harvested %.1f GPU-h, %.1f GPU-h; inference wait %.0f s, %.0f s; finished %d, %d of %d",
		live.Policy, met(l), met(s), l.AvgJCT, s.AvgJCT, harvest(l), harvest(s), wait(l), wait(s), l.Finished, s.Finished, l.Jobs)
}

// runLive runs one policy of a scenario live and in the simulator.
func runLive(t *testing.T, e *env, file, spec string, speed float64) (live, simulated scen.Result) {
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
	for _, f := range ins.Sites.Faults {
		t.Fatalf("site %s: node faults are not run live (the scenario's faults would be a kubelet dying)", f.Site)
	}
	lr := &liveRun{t: t, ns: "live", clk: &liveClock{speed: speed}, model: r.Config.Model, c: ins.Cluster,
		node: map[string]int{}, byName: map[string]*liveJob{}, siteIx: map[string]int{}, replicas: map[string]int{}}
	lr.s = e.scenario(t, "tide-live", lr.ns)
	t.Log("starting kube-controller-manager (deployments, replica sets) for the inference Deployments")
	e.startKCM(t, "deployment-controller,replicaset-controller")
	m, err := ins.Sites.Migration.Filled()
	if err != nil {
		t.Fatal(err)
	}
	lr.mig = m.CrossSite
	if sc.Migration.Free {
		lr.mig = func(*job.Job) float64 { return 0 }
	}
	for i, st := range lr.c.Sites() {
		lr.siteIx[st.Name] = i
	}
	lr.up, lr.alloc = make([]float64, len(lr.c.Sites())), make([]float64, len(lr.c.Sites()))
	for i, n := range lr.c.Nodes {
		name := kubeName(n.Name)
		lr.node[name] = i
		lr.kname = append(lr.kname, name)
		lr.s.node(name, n.GPUs, n.GPUType)
		lr.s.editNode(name, func(kn *corev1.Node) {
			kn.Labels[kube.DefaultSiteLabel] = n.Site
			kn.Labels[kube.DefaultSiteKindLabel] = n.SiteKind
		})
	}
	for i, j := range r.Jobs {
		lj := &liveJob{j: j, name: fmt.Sprintf("j-%d", i)}
		lj.rec = report.JobRecord{ID: j.ID, Tenant: j.Tenant, Model: j.Model, GPUs: j.GPUs, Submit: j.Submit, Start: -1, Finish: -1,
			Deadline: j.Deadline, State: string(job.Pending), Priority: j.Priority}
		lr.jobs = append(lr.jobs, lj)
		lr.byName[lj.name] = lj
	}
	lr.events = timeline(ins.Sites.Changes, ins.Sites.Diurnal, lr.c, lastSubmit(r.Jobs)+30*86400)
	round := time.Duration(sc.Round / speed * float64(time.Second))
	if round <= 0 {
		round = 100 * time.Millisecond
	}
	lr.clk.t0 = time.Now() // before tide's first round: its clock never runs backwards
	sch, stop := lr.s.start(kube.Config{Policy: spec, Clock: lr.clk, Round: round, Live: &kube.Live{Policy: r.Config.Policy, Model: r.Config.Model,
		Job: func(key string, j *job.Job) {
			if lj := lr.byName[strings.TrimPrefix(key, "tidejob/"+lr.ns+"/")]; lj != nil {
				id := j.ID
				*j = *lj.j
				j.ID = id
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
	lr.drive(sch)
	stats := sch.Stats()
	stop()
	run := &report.Run{Policy: spec + " (live)", Trace: ins.Trace, Cluster: lr.c.String(), TotalGPUs: lr.c.TotalGPUs(), Seed: sc.Seed,
		Rounds: stats.Rounds, InferenceWaits: stats.InferenceWaits, InferenceWaitSeconds: stats.InferenceWaitSeconds * speed}
	for _, lj := range lr.jobs {
		run.Jobs = append(run.Jobs, lj.rec)
	}
	for i, st := range lr.c.Sites() {
		run.Sites = append(run.Sites, report.SiteUsage{Name: st.Name, Kind: st.Kind, GPUs: st.GPUs, UpGPUSeconds: lr.up[i], AllocGPUSeconds: lr.alloc[i]})
	}
	live = scen.Result{Cluster: lr.c.String(), Jobs: len(lr.jobs), Runs: []*report.Run{run}}
	return live, simulated
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

// drive runs the run until every job finished or was declined, or a
// wall-time limit ($TIDE_LIVE_TIMEOUT, default 20 minutes).
func (lr *liveRun) drive(sch *kube.Scheduler) {
	limit := 20 * time.Minute
	if v := os.Getenv("TIDE_LIVE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			lr.t.Fatalf("TIDE_LIVE_TIMEOUT=%q: %v", v, err)
		}
		limit = d
	}
	serving := map[string]int{} // site -> serving pods wanted
	taken := map[string]int{}   // site -> servers taken back wanted
	last := 0.0
	ctx := context.Background()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		now := lr.clk.Now()
		dt := now - last
		last = now
		for _, lj := range lr.jobs {
			if !lj.submit && lj.j.Submit <= now {
				lj.submit = true
				lr.s.tidejob(lr.ns, lj.name, max(1, lj.j.MinGPUs), max(1, lj.j.MaxGPUs), 1, func(tj *kube.TideJob) {
					tj.Spec.GPUType = lj.j.GPUType
				})
			}
		}
		for lr.next < len(lr.events) && lr.events[lr.next].T <= now {
			ch := lr.events[lr.next]
			lr.next++
			if ch.Inference >= 0 {
				serving[ch.Site] = ch.Inference
			}
			if ch.Available >= 0 {
				taken[ch.Site] = len(lr.c.SiteOf(ch.Site).Nodes) - ch.Available
			}
		}
		pods, err := lr.s.cs.CoreV1().Pods(lr.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		lr.owners(ctx, pods.Items, serving, taken)
		lr.countUp(serving, taken, dt)
		lr.kubelet(ctx, pods.Items)
		if lr.train(ctx, pods.Items, now, dt) {
			return
		}
	}
	lr.t.Errorf("live run not done after %v of wall time (%.0f simulated s)", limit, lr.clk.Now())
}

// owners makes the serving pods and taken-back servers follow the
// capacity timeline, and binds pending serving pods where a node of their
// site has a GPU free.
func (lr *liveRun) owners(ctx context.Context, pods []corev1.Pod, serving, taken map[string]int) {
	used := map[string]int{}
	have := map[string][]*corev1.Pod{}
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
			have[p.Spec.NodeSelector[kube.DefaultSiteLabel]] = append(have[p.Spec.NodeSelector[kube.DefaultSiteLabel]], p)
		}
	}
	for site, want := range serving {
		lr.scale(ctx, site, want)
		for _, p := range have[site] {
			if p.Spec.NodeName != "" {
				continue
			}
			best := ""
			for _, id := range lr.c.SiteOf(site).Nodes {
				n := lr.kname[id]
				if free := lr.c.Nodes[id].GPUs - used[n]; free > 0 && (best == "" || free < lr.c.Nodes[lr.node[best]].GPUs-used[best]) {
					best = n
				}
			}
			if best == "" {
				continue
			}
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: lr.ns, Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: best}}
			if lr.s.cs.CoreV1().Pods(lr.ns).Bind(ctx, b, metav1.CreateOptions{}) == nil {
				used[best]++
			}
		}
	}
	for site, want := range taken {
		lr.takeBack(ctx, site, want, used)
	}
}

// scale sets the replicas of site's inference Deployment (one GPU a
// replica, scheduled by "serving", on the site's nodes), creating it.
func (lr *liveRun) scale(ctx context.Context, site string, want int) {
	if r, ok := lr.replicas[site]; ok && r == want {
		return
	}
	deps := lr.s.cs.AppsV1().Deployments(lr.ns)
	name := "serve-" + kubeName(site)
	d, err := deps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		labels := map[string]string{"app": name}
		n := int32(want)
		d = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: lr.ns, Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{SchedulerName: "serving", NodeSelector: map[string]string{kube.DefaultSiteLabel: site},
						Containers: []corev1.Container{{Name: "serve", Image: "server",
							Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(1, resource.DecimalSI)}}}}}}}}
		if _, err := deps.Create(ctx, d, metav1.CreateOptions{}); err == nil {
			lr.replicas[site] = want
		}
		return
	}
	n := int32(want)
	d.Spec.Replicas = &n
	if _, err := deps.Update(ctx, d, metav1.UpdateOptions{}); err == nil { // a conflict is retried next tick
		lr.replicas[site] = want
	}
}

// takeBack labels want servers of an edge site taken back: those taken
// now first, then idle ones, then the least used.
func (lr *liveRun) takeBack(ctx context.Context, site string, want int, used map[string]int) {
	ids := append([]int(nil), lr.c.SiteOf(site).Nodes...)
	nodes := make(map[string]*corev1.Node, len(ids))
	for _, id := range ids {
		n, err := lr.s.cs.CoreV1().Nodes().Get(ctx, lr.kname[id], metav1.GetOptions{})
		if err != nil {
			return
		}
		nodes[lr.kname[id]] = n
	}
	isTaken := func(id int) bool { return nodes[lr.kname[id]].Labels[kube.DefaultTakenBackKey] == "true" }
	sort.SliceStable(ids, func(a, b int) bool {
		if isTaken(ids[a]) != isTaken(ids[b]) {
			return isTaken(ids[a])
		}
		return used[lr.kname[ids[a]]] < used[lr.kname[ids[b]]]
	})
	for i, id := range ids {
		n := nodes[lr.kname[id]]
		if (i < want) == isTaken(id) {
			continue
		}
		if i < want {
			n.Labels[kube.DefaultTakenBackKey] = "true"
		} else {
			delete(n.Labels, kube.DefaultTakenBackKey)
		}
		_, _ = lr.s.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}
}

// kubelet starts bound pods and finishes deleting deleted ones.
func (lr *liveRun) kubelet(ctx context.Context, pods []corev1.Pod) {
	for i := range pods {
		p := &pods[i]
		switch {
		case p.DeletionTimestamp != nil:
			zero := int64(0)
			_ = lr.s.cs.CoreV1().Pods(lr.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending:
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			_, _ = lr.s.cs.CoreV1().Pods(lr.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
	}
}

// train advances each job's progress over the last dt simulated seconds
// at the allocation its running workers had, finishes the jobs whose work
// is done, counts GPU time per site and reports whether every job is done
// or declined.
func (lr *liveRun) train(ctx context.Context, pods []corev1.Pod, now, dt float64) bool {
	mine := map[string][]*corev1.Pod{}
	onSite := make([]int, len(lr.up))
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if name := p.Labels[kube.LabelTideJob]; name != "" {
			mine[name] = append(mine[name], p)
		}
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	done := true
	for _, lj := range lr.jobs {
		if lj.done {
			continue
		}
		done = false
		ps := mine[lj.name]
		var names []string
		for _, p := range ps {
			names = append(names, p.Spec.NodeName)
		}
		sort.Strings(names)
		key := strings.Join(names, ",")
		started := false
		if key != lj.workers {
			started = lj.gpus == 0
			lr.launch(lj, names, now)
			lj.workers = key
		}
		if len(ps) == 0 || dt <= 0 || started {
			continue // workers seen starting now run from now on
		}
		site := lr.c.Nodes[lr.node[names[0]]].Site
		onSite[lr.siteIx[site]] += len(ps)
		gs := float64(len(ps)) * dt
		lj.rec.GPUSeconds += gs
		switch lr.c.SiteOf(site).Kind {
		case cluster.SiteEdge:
			lj.rec.EdgeGPUSeconds += gs
		case cluster.SiteInference:
			lj.rec.InferenceGPUSeconds += gs
		}
		run := dt
		if lj.delay > 0 {
			d := min(lj.delay, run)
			lj.delay -= d
			run -= d
			lj.rec.RestartSeconds += d
		}
		for run > 0 && lj.progress < lr.model.Work(lj.j) {
			rate, until := lr.model.Rate(lj.j, lr.allocOf(names), lj.progress)
			if !(rate > 0) {
				break
			}
			step := min(run, (until-lj.progress)/rate)
			lj.progress += rate * step
			lj.rec.UsefulGPUSeconds += float64(len(ps)) * step
			run -= step
			if step <= 0 {
				break
			}
		}
		if lj.progress >= lr.model.Work(lj.j)*(1-1e-9) {
			lj.done = true
			lj.rec.Finish, lj.rec.State = now, string(job.Finished)
			for _, p := range ps {
				p.Status.Phase = corev1.PodSucceeded
				_, _ = lr.s.cs.CoreV1().Pods(lr.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}
	for i, k := range onSite {
		lr.alloc[i] += float64(k) * dt
	}
	if done {
		return true
	}
	// Declined jobs are done too (their TideJobs say so); looked up at
	// most twice a second.
	if time.Since(lr.looked) < 500*time.Millisecond {
		return false
	}
	lr.looked = time.Now()
	l, err := lr.s.dyn.Resource(kube.TideJobResource).Namespace(lr.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	phase := map[string]string{}
	for _, u := range l.Items {
		p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		phase[u.GetName()] = p
	}
	all := true
	for _, lj := range lr.jobs {
		if lj.done {
			continue
		}
		if lj.rec.Start < 0 && phase[lj.name] == kube.PhaseDeclined {
			lj.done, lj.rec.State = true, string(job.Declined)
			continue
		}
		all = false
	}
	return all
}

// countUp adds each site's GPU time available to training over dt: its
// GPUs less those the capacity timeline gives its owners (inference
// demand, servers taken back), as the simulator counts it.
func (lr *liveRun) countUp(serving, taken map[string]int, dt float64) {
	for i, st := range lr.c.Sites() {
		down := serving[st.Name]
		if k := taken[st.Name]; k > 0 && len(st.Nodes) > 0 {
			down += k * st.GPUs / len(st.Nodes)
		}
		lr.up[i] += float64(max(0, st.GPUs-down)) * dt
	}
}

// launch charges a job's new set of running workers its cost, as the
// simulator does: the start cost at first, the restart cost after it held
// nothing, the resize cost when its GPU count changed while running, plus
// a cross-site move's migration.
func (lr *liveRun) launch(lj *liveJob, nodes []string, now float64) {
	if len(nodes) == 0 {
		if lj.gpus > 0 {
			lj.rec.Preemptions++
		}
		lj.gpus = 0
		return
	}
	costs := lr.model.Costs(lj.j)
	site := lr.c.Nodes[lr.node[nodes[0]]].Site
	switch {
	case lj.rec.Start < 0:
		lj.rec.Start = now
		lj.delay = costs.Start
	case lj.gpus == 0:
		lj.rec.Restarts++
		lj.delay = costs.Restart
	case lj.gpus != len(nodes):
		lj.rec.Restarts++
		lj.rec.Resizes++
		lj.delay = costs.Resize
	default:
		return // the same count: moved workers run on
	}
	if lj.site != "" && lj.site != site {
		lj.rec.CrossSiteMoves++
		m := lr.mig(lj.j)
		lj.rec.MigrationSeconds += m
		lj.delay += m
	}
	lj.site, lj.gpus = site, len(nodes)
	lj.rec.State = string(job.Running)
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

// testLiveSmall runs testdata/live-small.yaml live at 300 simulated
// seconds per wall second (its 4 hours in about a minute) and checks it
// against the simulator: every job finishes, as many meet their deadlines
// (within one job), tide harvests the inference node's idle GPUs, and the
// average JCT is within 30% (API and round latency, multiplied by the
// clock's compression, lengthen every start and resize: docs/kubernetes.md,
// "Live scenarios").
func testLiveSmall(t *testing.T, e *env) {
	live, sim := runLive(t, e, filepath.Join("testdata", "live-small.yaml"), "", 300)
	t.Log(agreement(live.Runs[0], sim.Runs[0]))
	l, s := report.Summarize(live.Runs[0]), report.Summarize(sim.Runs[0])
	if l.Finished != l.Jobs || s.Finished != s.Jobs {
		t.Fatalf("finished %d live, %d simulated, of %d", l.Finished, s.Finished, l.Jobs)
	}
	if math.Abs(*l.DeadlineMetFrac-*s.DeadlineMetFrac)*float64(l.Jobs) > 1.01 {
		t.Errorf("deadlines met: %.2f live, %.2f simulated: more than one job apart", *l.DeadlineMetFrac, *s.DeadlineMetFrac)
	}
	if l.Sites == nil || l.Sites.HarvestedInferenceGPUHours <= 0 {
		t.Errorf("live run harvested no inference GPU-hours: %+v", l.Sites)
	}
	if r := l.AvgJCT / s.AvgJCT; r < 0.7 || r > 1.3 {
		t.Errorf("average JCT %.0f s live, %.0f s simulated: ratio %.2f, want within 30%%", l.AvgJCT, s.AvgJCT, r)
	}
}
