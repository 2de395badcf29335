package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/kube"
)

// TestKubeSites runs the seed paper's multi-site cases (docs/kubernetes.md,
// "Sites") against one control plane: sites from node labels and their
// placement rules.
func TestKubeSites(t *testing.T) {
	e := startEnv(t)
	t.Run("Sites", func(t *testing.T) { testSites(t, e) })
	t.Run("Reclaim", func(t *testing.T) { testReclaim(t, e) })
	t.Run("TakeBack", func(t *testing.T) { testTakeBack(t, e) })
	t.Run("Deadlines", func(t *testing.T) { testDeadlines(t, e) })
	t.Run("LiveSmall", func(t *testing.T) { testLiveSmall(t, e) })
}

// siteNode registers a node of gpus A100 GPUs in a site of a kind, by the
// default labels.
func (s *scenario) siteNode(name string, gpus int, site, kind string) {
	s.t.Helper()
	s.node(name, gpus, "A100")
	s.editNode(name, func(n *corev1.Node) {
		n.Labels[kube.DefaultSiteLabel] = site
		n.Labels[kube.DefaultSiteKindLabel] = kind
	})
}

// gangPods creates a gang of k one-GPU pods and returns their names.
func (s *scenario) gangPods(ns, job string, k int) []string {
	var names []string
	for i := 0; i < k; i++ {
		name := fmt.Sprintf("%s-%d", job, i)
		s.pod(ns, name, 1, kube.AnnotJob, job, kube.AnnotGangSize, fmt.Sprint(k))
		names = append(names, name)
	}
	return names
}

// testSites: a job never spans sites, and an edge job runs on one server.
// Two edge servers of 2 GPUs (e0, e1) come first in the cluster's order,
// then a cloud of two 4-GPU nodes (z0, z1).
func testSites(t *testing.T, e *env) {
	s := e.scenario(t, "tide-sites", "sites")
	s.siteNode("sites-e0", 2, "lab", "edge")
	s.siteNode("sites-e1", 2, "lab", "edge")
	s.siteNode("sites-z0", 4, "dc", "cloud")
	s.siteNode("sites-z1", 4, "dc", "cloud")
	kind := map[string]string{"sites-e0": "edge", "sites-e1": "edge", "sites-z0": "cloud", "sites-z1": "cloud"}
	s.start(kube.Config{Policy: "fifo"})

	// Two workers on the edge share one server.
	g2 := s.gangPods("sites", "g2", 2)
	eventually(t, 20*time.Second, func() (bool, string) {
		w := s.where("sites")
		return w[g2[0]] != "" && w[g2[1]] != "", fmt.Sprintf("g2 bound: %v", w)
	})
	w := s.where("sites")
	if kind[w[g2[0]]] != "edge" || w[g2[0]] != w[g2[1]] {
		t.Fatalf("g2 on %s and %s, want both on one edge server", w[g2[0]], w[g2[1]])
	}
	// Six workers fit only in the cloud.
	g6 := s.gangPods("sites", "g6", 6)
	eventually(t, 20*time.Second, func() (bool, string) {
		return len(bound(s.pods("sites"), g6...)) == 6, fmt.Sprintf("g6 bound: %v", s.where("sites"))
	})
	for n, node := range s.where("sites") {
		if len(n) > 2 && n[:2] == "g6" && kind[node] != "cloud" {
			t.Errorf("%s on %s, want the cloud", n, node)
		}
	}
	// Four GPUs are free now (two on one edge server, two in the cloud),
	// but no site has three: a gang of three waits.
	g3 := s.gangPods("sites", "g3", 3)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if b := bound(s.pods("sites"), g3...); len(b) > 0 {
			t.Fatalf("g3's %v bound (%v) while no site has 3 free GPUs", b, s.where("sites"))
		}
	}
	// Once g6 ends it runs in the cloud.
	s.kubelet("sites")
	s.end("sites", corev1.PodSucceeded, g6...)
	eventually(t, 20*time.Second, func() (bool, string) {
		return len(bound(s.pods("sites"), g3...)) == 3, fmt.Sprintf("g3 bound: %v", s.where("sites"))
	})
	for _, n := range g3 {
		if node := s.where("sites")[n]; kind[node] != "cloud" {
			t.Errorf("%s on %s, want the cloud", n, node)
		}
	}
}

// servingPod creates a pod of another scheduler ("serving", as an
// inference Deployment's replica) asking for one GPU on the nodes of site.
func (s *scenario) servingPod(ns, name, site string) {
	s.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: "serving", NodeSelector: map[string]string{kube.DefaultSiteLabel: site},
			Containers: []corev1.Container{{Name: "serve", Image: "server",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: *resource.NewQuantity(1, resource.DecimalSI)}}}}}}
	if _, err := s.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// otherScheduler plays the scheduler of the "serving" pods until the test
// ends: it binds each pending one to node once node's live pods leave it
// a GPU (pods being deleted still hold theirs), and records when.
func (s *scenario) otherScheduler(ns, node string, gpus int) (boundAt func(name string) time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	at := map[string]time.Time{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				used := 0
				for _, p := range l.Items {
					if p.Spec.NodeName == node && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
						q := p.Spec.Containers[0].Resources.Limits[kube.GPUResource]
						used += int(q.Value())
					}
				}
				for _, p := range l.Items {
					if p.Spec.SchedulerName != "serving" || p.Spec.NodeName != "" || used >= gpus {
						continue
					}
					b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
					if err := s.cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err == nil {
						used++
						mu.Lock()
						at[p.Name] = time.Now()
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	s.t.Cleanup(func() { cancel(); wg.Wait() })
	return func(name string) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at[name]
	}
}

// metric reads one sample of a scheduler's /metrics ("" labels: none).
func metric(t *testing.T, sch *kube.Scheduler, name, labels string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	sch.Handler(0).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	re := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(name+labels) + " (\\S+)$")
	m := re.FindStringSubmatch(rec.Body.String())
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// testReclaim: an inference site lends its idle GPUs to training and
// takes them back when a serving pod is pending for them: the job on
// them is preempted (its workers evicted, the event saying why), the
// serving pod is bound, its wait counted; when serving scales down the job
// comes back. Harvested GPU-hours are counted for the inference site.
func testReclaim(t *testing.T, e *env) {
	s := e.scenario(t, "tide-tidal", "tidal")
	s.siteNode("tidal-c0", 2, "dc", "cloud")
	s.siteNode("tidal-i0", 4, "serve", "inference")
	s.kubeletLoop("tidal", 0)
	boundAt := s.otherScheduler("tidal", "tidal-i0", 4)
	s.servingPod("tidal", "inf-0", "serve")
	eventually(t, 10*time.Second, func() (bool, string) {
		return !boundAt("inf-0").IsZero(), "inf-0 not bound"
	})
	sch, _ := s.start(kube.Config{Policy: "fifo"})
	// b fits only in the cloud's 2 GPUs or on the inference node; a's 3
	// workers fit only on the inference node's 3 idle GPUs.
	s.tidejob("tidal", "a", 3, 3, 1)
	eventually(t, 20*time.Second, func() (bool, string) {
		n := 0
		for _, p := range s.workerPods("tidal", "a") {
			if p.Spec.NodeName == "tidal-i0" {
				n++
			}
		}
		return n == 3, fmt.Sprintf("a has %d workers on tidal-i0: %v", n, s.where("tidal"))
	})
	s.tidejob("tidal", "b", 2, 2, 1)
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("tidal", "b") == 2, fmt.Sprintf("b: %v", s.where("tidal"))
	})
	for _, p := range s.workerPods("tidal", "b") {
		if p.Spec.NodeName != "tidal-c0" {
			t.Fatalf("b's %s on %s, want the cloud (a holds the inference node's idle GPUs)", p.Name, p.Spec.NodeName)
		}
	}
	// Serving scales up: a gives its GPUs back.
	created := time.Now()
	s.servingPod("tidal", "inf-1", "serve")
	eventually(t, 20*time.Second, func() (bool, string) {
		return !boundAt("inf-1").IsZero(), fmt.Sprintf("inf-1 not bound: %v", s.where("tidal"))
	})
	waited := boundAt("inf-1").Sub(created)
	// The serving pod may be bound once the first of a's evictions frees a
	// GPU, before the others are done.
	eventually(t, 10*time.Second, func() (bool, string) {
		n := s.workers("tidal", "a")
		return n == 0, fmt.Sprintf("a has %d workers after the reclaim, want 0 (3 do not fit beside 2 serving pods, the cloud is b's)", n)
	})
	if n := s.workers("tidal", "b"); n != 2 {
		t.Errorf("b has %d workers, want its 2: the reclaim takes only what the serving pod needs", n)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		st := sch.Stats()
		return st.Reclaims == 1 && st.InferenceWaits == 1, fmt.Sprintf("reclaims %d, inference waits %d, want 1 and 1", st.Reclaims, st.InferenceWaits)
	})
	if w := sch.Stats().InferenceWaitSeconds; w <= 0 || w > waited.Seconds()+5 {
		t.Errorf("inference wait %.3f s, want more than 0 and about the %.3f s the serving pod took to be bound", w, waited.Seconds())
	}
	evs, err := s.cs.CoreV1().Events("tidal").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, ev := range evs.Items {
		said = said || (ev.Reason == "Preempted" && strings.Contains(ev.Message, "taken back") && strings.Contains(ev.Message, "tidal-i0"))
	}
	if !said {
		t.Error("no Preempted event on a's workers saying their GPUs on tidal-i0 were taken back")
	}
	// Serving scales down: a comes back.
	if err := s.cs.CoreV1().Pods("tidal").Delete(context.Background(), "inf-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("tidal", "a") == 3, fmt.Sprintf("a has %d workers after serving scaled down", s.workers("tidal", "a"))
	})
	if h := metric(t, sch, "tide_harvested_gpu_hours_total", `{site="serve",kind="inference"}`); h <= 0 {
		t.Errorf("harvested GPU-hours on serve = %v, want > 0", h)
	}
	if m := metric(t, sch, "tide_reclaims_total", ""); m != 1 {
		t.Errorf("tide_reclaims_total = %v, want 1", m)
	}
}

// testTakeBack: an edge server's owner takes it back with the label, then
// another with the taint; each time the job on it moves to the other
// server, and a server given back takes work again.
func testTakeBack(t *testing.T, e *env) {
	s := e.scenario(t, "tide-takeback", "takeback")
	s.siteNode("tb-e0", 2, "lab", "edge")
	s.siteNode("tb-e1", 2, "lab", "edge")
	s.kubeletLoop("takeback", 0)
	sch, _ := s.start(kube.Config{Policy: "fifo"})
	s.tidejob("takeback", "t", 1, 1, 2)
	on := func() string {
		for _, p := range s.workerPods("takeback", "t") {
			return p.Spec.NodeName
		}
		return ""
	}
	eventually(t, 20*time.Second, func() (bool, string) { return on() != "", "t not running" })
	first := on()
	other := map[string]string{"tb-e0": "tb-e1", "tb-e1": "tb-e0"}[first]
	s.editNode(first, func(n *corev1.Node) { n.Labels[kube.DefaultTakenBackKey] = "true" })
	eventually(t, 20*time.Second, func() (bool, string) {
		return on() == other, fmt.Sprintf("t on %q after its owner took %s back, want %s", on(), first, other)
	})
	// Given back; the other one taken back with a taint.
	s.editNode(first, func(n *corev1.Node) { delete(n.Labels, kube.DefaultTakenBackKey) })
	s.editNode(other, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: kube.DefaultTakenBackKey, Value: "owner", Effect: corev1.TaintEffectNoSchedule})
	})
	eventually(t, 20*time.Second, func() (bool, string) {
		return on() == first, fmt.Sprintf("t on %q after its owner tainted %s, want %s", on(), other, first)
	})
	if st := sch.Stats(); st.Reclaims != 2 || st.Lost != 0 {
		t.Errorf("reclaims %d, lost %d; want 2 reclaims (one per server taken back), no worker lost", st.Reclaims, st.Lost)
	}
}

// testDeadlines: under ElasticFlow a TideJob whose deadline cannot be met
// is Declined with the policy's reason; one that succeeds in time is
// Met, one still running when its deadline passes is Missed (and stays so
// when it succeeds later); the metrics count each once.
func testDeadlines(t *testing.T, e *env) {
	s := e.scenario(t, "tide-deadlines", "deadlines")
	s.node("dl-0", 8, "A100")
	s.kubeletLoop("deadlines", 0)
	sch, _ := s.start(kube.Config{Policy: "elasticflow"})
	due := func(d time.Duration, run string) func(*kube.TideJob) {
		return func(tj *kube.TideJob) {
			at := metav1.NewTime(time.Now().Add(d))
			tj.Spec.Deadline, tj.Spec.Duration = &at, run
		}
	}
	s.tidejob("deadlines", "late", 1, 4, 1, due(time.Hour, "10h")) // 10 h on 1 GPU, 2.5 h on all 4: not within the hour
	s.tidejob("deadlines", "ok", 1, 1, 1, due(2*time.Hour, "10m"))
	s.tidejob("deadlines", "miss", 1, 1, 1, due(4*time.Second, "1s"))
	eventually(t, 20*time.Second, func() (bool, string) {
		tj := s.getTideJob("deadlines", "late")
		return tj.Status.Phase == kube.PhaseDeclined, fmt.Sprintf("late: phase %q (%s)", tj.Status.Phase, tj.Status.Message)
	})
	late := s.getTideJob("deadlines", "late")
	if c := cond(late.Status.Conditions, kube.CondAdmitted); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Declined" || c.Message == "" {
		t.Errorf("late: Admitted = %+v, want False/Declined with the policy's reason", c)
	}
	if late.Status.DeadlineOutcome != "" || s.workers("deadlines", "late") != 0 {
		t.Errorf("late: outcome %q, %d workers; want none: declined, never run", late.Status.DeadlineOutcome, s.workers("deadlines", "late"))
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("deadlines", "ok") == 1 && s.workers("deadlines", "miss") == 1, fmt.Sprintf("workers: %v", s.where("deadlines"))
	})
	outcome := func(name, phase, want string) {
		t.Helper()
		eventually(t, 20*time.Second, func() (bool, string) {
			tj := s.getTideJob("deadlines", name)
			return tj.Status.Phase == phase && tj.Status.DeadlineOutcome == want,
				fmt.Sprintf("%s: phase %q, outcome %q; want %s, %s", name, tj.Status.Phase, tj.Status.DeadlineOutcome, phase, want)
		})
	}
	for _, p := range s.workerPods("deadlines", "ok") {
		s.end("deadlines", corev1.PodSucceeded, p.Name)
	}
	outcome("ok", kube.PhaseSucceeded, kube.DeadlineMet)
	// miss runs past its deadline: missed while it runs, and still once done.
	outcome("miss", kube.PhaseRunning, kube.DeadlineMissed)
	for _, p := range s.workerPods("deadlines", "miss") {
		s.end("deadlines", corev1.PodSucceeded, p.Name)
	}
	outcome("miss", kube.PhaseSucceeded, kube.DeadlineMissed)
	for name, want := range map[string]float64{"tide_deadlines_met_total": 1, "tide_deadlines_missed_total": 1, "tide_declined_total": 1} {
		if got := metric(t, sch, name, ""); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
