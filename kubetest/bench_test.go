package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/metrics/legacyregistry"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/kube"
)

// BenchmarkDrain measures how fast a scheduler drains a backlog: NODES
// fake nodes of 8 GPUs (default 1000) and PODS pending one-GPU pods
// (default 8000), alone or in gangs of 8 (tide's gang annotations; the
// stock scheduler has no gangs and places those pods one by one), by tide
// (FIFO, Tiresias) and by the stock kube-scheduler built from the same
// Kubernetes module with its default profile. Cases alternate between the
// schedulers so that load from elsewhere on the machine falls on both.
//
// Each scheduler runs in a process of its own (this test binary started
// again, see TestMain) against the API server in this process, with the
// same client limits: 1000 requests/s, burst 2000 (tide kube's defaults;
// kube-scheduler's own default of 50/100 is the -qps50 case). The clock
// starts when the process is started (its caches sync inside the
// measurement) and stops when the benchmark's own watch sees the last pod
// bound. Reported per case:
//
//   - pods/s: pods bound per second of the drain;
//   - decide-p50-ms, decide-p99-ms: the scheduler's decision latency, per
//     decision: for tide one round's engine decision (which places every
//     pending job at once), for kube-scheduler one pod's scheduling
//     algorithm (scheduler_scheduling_algorithm_duration_seconds,
//     interpolated within its histogram buckets);
//   - bound-p50-s, bound-p99-s: time from the scheduler's start until a
//     pod is seen bound;
//   - sched-cpu-ms/pod: CPU time (user + system) of the scheduler's
//     process per bound pod, which does not depend on what else the
//     machine runs; apiserver-cpu-ms/pod: the same for this process
//     (API server, etcd, the benchmark's watch);
//   - events/pod: Scheduled Events written per bound pod (both schedulers
//     write one per pod: tide here without its default rate limit, see
//     kube.Config.EventQPS); the scheduler's CPU includes writing them;
//   - others-cores: CPU the rest of the machine used meanwhile, in cores;
//   - first-bind-s, max-pause-s: when the first pod was seen bound, and
//     the longest time between two binds seen one after the other (a
//     stall, where a busy machine only slows the pace);
//   - sched-peak-MiB: the scheduler process's peak resident memory;
//     apiserver-peak-MiB: this process's so far (API server, etcd, the
//     benchmark's watches; it only grows from case to case).
//
// Run each case once: -bench Drain -benchtime 1x; TIDE_BENCH_RUNS=3 runs
// every case three times, passes over the cases one after the other (not
// -count, which would run one case's repeats back to back); the repeats
// are named CASE#01, CASE#02, so a -bench pattern ending in $ needs
// (#[0-9]+)? before it (scripts/bench-drain.sh runs them and sums up). Sizes come from
// TIDE_BENCH_NODES and TIDE_BENCH_PODS; TIDE_BENCH_TIMEOUT (a duration,
// default 15 minutes per 8,000 pods) bounds one drain;
// TIDE_BENCH_CPUPROFILE=DIR writes each scheduler's CPU profile there.
func BenchmarkDrain(b *testing.B) {
	nodes, pods := envInt(b, "TIDE_BENCH_NODES", 1000), envInt(b, "TIDE_BENCH_PODS", 8000)
	e := startEnv(b)
	ctx := context.Background()
	var names []string
	for i := 0; i < nodes; i++ {
		names = append(names, fmt.Sprintf("bench-%04d", i))
	}
	parallel(len(names), func(i int) {
		if err := benchNode(ctx, e.cs, names[i]); err != nil {
			b.Error(err)
		}
	})
	if b.Failed() {
		return
	}
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := writeKubeconfig(e.cfg, kubeconfig); err != nil {
		b.Fatal(err)
	}
	profDir := os.Getenv("TIDE_BENCH_CPUPROFILE")
	cases := []drainCase{
		{"tide-fifo-pods", "tide", "fifo", 1, 1000},
		{"kube-scheduler-pods", "kube-scheduler", "", 1, 1000},
		{"tide-tiresias-pods", "tide", "tiresias", 1, 1000},
		{"tide-fifo-gang8", "tide", "fifo", 8, 1000},
		{"kube-scheduler-gang8", "kube-scheduler", "", 8, 1000},
		{"tide-tiresias-gang8", "tide", "tiresias", 8, 1000},
		{"kube-scheduler-pods-qps50", "kube-scheduler", "", 1, 50},
	}
	runs := envInt(b, "TIDE_BENCH_RUNS", 1)
	for run := 0; run < runs; run++ {
		for ci, c := range cases {
			benchCase(b, e, c, ci, run, pods, kubeconfig, profDir)
		}
	}
}

// benchCase is one drain of BenchmarkDrain: run counts the passes over
// the cases (TIDE_BENCH_RUNS), so each case's runs alternate with the
// others'.
func benchCase(b *testing.B, e *env, c drainCase, ci, run, pods int, kubeconfig, profDir string) {
	ctx := context.Background()
	b.Run(c.name, func(b *testing.B) {
		ns := fmt.Sprintf("bench-%d-%d", run, ci)
		if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		spec := schedSpec{Kind: c.kind, Policy: c.policy, Name: "default-scheduler", Kubeconfig: kubeconfig,
			QPS: c.qps, Burst: int(2 * c.qps), Out: filepath.Join(b.TempDir(), "result.json")}
		if c.kind == "tide" {
			spec.Name = fmt.Sprintf("tide-%d", ci)
		}
		if profDir != "" {
			spec.CPUProfile = filepath.Join(profDir, fmt.Sprintf("%s-%d.pprof", c.name, run))
		}
		createPods(b, e.cs, ns, spec.Name, pods, c.gang)
		if b.Failed() {
			return
		}
		w := watchBinds(b, e.cs, ns)
		defer w.stop()
		m0 := sampleCPU()
		b.ResetTimer()
		t0 := time.Now()
		w.start(t0)
		child, err := startScheduler(spec, filepath.Join(b.TempDir(), "scheduler.log"))
		if err != nil {
			b.Fatal(err)
		}
		deadline := t0.Add(envDuration(b, "TIDE_BENCH_TIMEOUT", perPods(15*time.Minute, pods)))
		for w.n.Load() < int64(pods) && time.Now().Before(deadline) && !child.exited() {
			time.Sleep(10 * time.Millisecond)
		}
		el := time.Since(t0)
		b.StopTimer()
		// Both write an Event per bound pod (equal work); let the
		// scheduler finish writing them before its CPU is read.
		events := countEvents(b, e.cs, ns, int(w.n.Load()))
		m1 := sampleCPU()
		res, cpu, err := child.stop()
		if err != nil {
			b.Fatalf("scheduler: %v\n%s", err, child.logTail())
		}
		n := w.n.Load()
		if n < int64(pods) {
			b.Errorf("%d of %d pods bound in %v\n%s", n, pods, el, child.logTail())
		}
		b.ReportMetric(float64(n)/el.Seconds(), "pods/s")
		b.ReportMetric(el.Seconds(), "s/drain")
		p50, p99 := res.decisionLatency()
		b.ReportMetric(1e3*p50, "decide-p50-ms")
		b.ReportMetric(1e3*p99, "decide-p99-ms")
		lat := w.latencies()
		b.ReportMetric(quantile(lat, 0.5), "bound-p50-s")
		b.ReportMetric(quantile(lat, 0.99), "bound-p99-s")
		first, pause := bindPace(lat)
		b.ReportMetric(first, "first-bind-s")
		b.ReportMetric(pause, "max-pause-s")
		b.ReportMetric(1e3*cpu/float64(max(n, 1)), "sched-cpu-ms/pod")
		b.ReportMetric(float64(events)/float64(max(n, 1)), "events/pod")
		b.ReportMetric(1e3*(m1.self-m0.self)/float64(max(n, 1)), "apiserver-cpu-ms/pod")
		if busy := (m1.busy - m0.busy) - (m1.self - m0.self) - cpu; busy > 0 {
			b.ReportMetric(busy/el.Seconds(), "others-cores")
		}
		b.ReportMetric(float64(child.maxRSS)/(1<<20), "sched-peak-MiB")
		b.ReportMetric(float64(peakRSS("self"))/(1<<20), "apiserver-peak-MiB")
		if c.kind == "tide" {
			b.ReportMetric(float64(len(res.Decide)), "rounds")
			b.Logf("pods bound per round: %v", res.Binds)
		}
		// Free the nodes for the next case, one pod at a time: deleting
		// thousands in one call can outlast the API server's timeout.
		zero := int64(0)
		parallel(pods, func(i int) {
			err := e.cs.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p-%05d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				b.Logf("deleting pod %d: %v", i, err)
			}
		})
		eventually(b, 5*time.Minute, func() (bool, string) {
			l, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 500})
			if err != nil {
				return false, err.Error()
			}
			for _, p := range l.Items { // a delete that failed above
				_ = e.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			return len(l.Items) == 0, fmt.Sprintf("pods of %s still there", ns)
		})
		if err := e.cs.EventsV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Logf("deleting the events of %s: %v", ns, err)
		}
	})
}

// countEvents waits until ns holds want Scheduled events, or their number
// has not grown for 5 s (a minute per 8,000 at most), and returns it.
func countEvents(b *testing.B, cs kubernetes.Interface, ns string, want int) int {
	ctx := context.Background()
	count := func() int {
		n, cont := 0, ""
		for {
			l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
			if err != nil {
				b.Logf("listing events: %v", err)
				return n
			}
			for _, ev := range l.Items {
				if ev.Reason == "Scheduled" {
					n++
				}
			}
			if cont = l.Continue; cont == "" {
				return n
			}
		}
	}
	n, last, grew := 0, -1, time.Now()
	for end := time.Now().Add(perPods(time.Minute, want)); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if n = count(); n >= want {
			return n
		}
		if n != last {
			last, grew = n, time.Now()
		} else if time.Since(grew) > 5*time.Second {
			return n
		}
	}
	return n
}

// perPods scales d, a wait sized for 8,000 pods, to n pods (never less
// than d).
func perPods(d time.Duration, n int) time.Duration {
	return max(d, d*time.Duration(n)/8000)
}

type drainCase struct {
	name   string
	kind   string // "tide" or "kube-scheduler"
	policy string
	gang   int
	qps    float32
}

// createPods creates n pending one-GPU pods for scheduler name, in gangs of
// gang pods when gang > 1.
func createPods(b *testing.B, cs kubernetes.Interface, ns, name string, n, gang int) {
	ctx := context.Background()
	parallel(n, func(i int) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%05d", i)},
			Spec: corev1.PodSpec{SchedulerName: name, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: resource.MustParse("1")}}}}}}
		if gang > 1 {
			p.Annotations = map[string]string{kube.AnnotJob: fmt.Sprintf("g-%05d", i/gang), kube.AnnotGangSize: strconv.Itoa(gang)}
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Error(err)
		}
	})
}

// bindWatch counts a namespace's pods as they are seen bound.
type bindWatch struct {
	n    atomic.Int64
	mu   sync.Mutex
	t0   time.Time
	at   []float64 // seconds from t0 to each bind seen
	stop context.CancelFunc
}

func watchBinds(b *testing.B, cs kubernetes.Interface, ns string) *bindWatch {
	w := &bindWatch{}
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		if o.(*corev1.Pod).Spec.NodeName == "" && n.(*corev1.Pod).Spec.NodeName != "" {
			w.mu.Lock()
			w.at = append(w.at, time.Since(w.t0).Seconds())
			w.mu.Unlock()
			w.n.Add(1)
		}
	}}); err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

func (w *bindWatch) start(t0 time.Time) {
	w.mu.Lock()
	w.t0 = t0
	w.mu.Unlock()
}

func (w *bindWatch) latencies() []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]float64(nil), w.at...)
}

// bindPace: when the first bind was seen and the longest time between
// two binds seen one after the other, seconds from the scheduler's start.
// A drain slowed down evenly (a busy machine) has short pauses; a stall
// (a round waiting, a connection lost) shows here.
func bindPace(at []float64) (first, pause float64) {
	if len(at) == 0 {
		return 0, 0
	}
	s := append([]float64(nil), at...)
	sort.Float64s(s)
	for i := 1; i < len(s); i++ {
		pause = max(pause, s[i]-s[i-1])
	}
	return s[0], pause
}

// quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

// cpuSample is CPU time so far, in seconds: this process's, and the whole
// machine's busy time.
type cpuSample struct{ self, busy float64 }

func sampleCPU() cpuSample {
	var s cpuSample
	s.self = max(cputime.Process(), 0)
	// /proc/stat: "cpu user nice system idle iowait irq softirq steal ...",
	// in USER_HZ (100 per second on Linux).
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := bytes.Cut(data, []byte("\n"))
		f := strings.Fields(string(line))
		for i := 1; i < len(f) && i <= 8; i++ {
			if i == 4 || i == 5 { // idle, iowait
				continue
			}
			v, _ := strconv.ParseFloat(f[i], 64)
			s.busy += v / 100
		}
	}
	return s
}

// peakRSS is a process's peak resident memory so far, bytes (VmHWM in
// /proc/PID/status; PID "self" for this one), 0 where the system does not
// say. Not getrusage's maxrss: a child started by fork and exec starts
// with its parent's.
func peakRSS(pid string) int64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive whole number", name, v)
		}
		return n
	}
	return def
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration such as 10m", name, v)
		}
		return d
	}
	return def
}

// benchNode registers a Ready, untainted node with 8 GPUs and room for
// 110 pods.
func benchNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	return readyNode(ctx, cs, name, corev1.ResourceList{kube.GPUResource: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")})
}

// parallel runs f(0..n-1) on 32 goroutines.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// writeKubeconfig writes cfg's credentials as a kubeconfig file, as a
// scheduler deployed beside an API server would get them. The test
// server's loopback certificate is for a fixed server name, which the
// file must carry.
func writeKubeconfig(cfg *rest.Config, file string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		CertificateAuthority: cfg.CAFile, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData,
		ClientKeyData: cfg.KeyData, ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	return clientcmd.WriteToFile(*kc, file)
}

// schedEnv, when set in the environment, makes this test binary run a
// scheduler instead of tests (TestMain); its value is a schedSpec in JSON.
const schedEnv = "TIDE_KUBETEST_SCHEDULER"

// schedSpec is the scheduler a benchmark case runs.
type schedSpec struct {
	Kind       string  // "tide" or "kube-scheduler"
	Policy     string  // tide's policy spec
	Name       string  // the pods' spec.schedulerName
	Kubeconfig string  // credentials
	QPS        float32 // client limits
	Burst      int
	Out        string     // file the process writes its schedResult to when it stops
	CPUProfile string     // file for a CPU profile ("" = none)
	Elect      *electSpec // tide: run under leader election (failover_test.go)
	// PolicyStateLimit is tide's kube.Config.PolicyStateLimit (0: the default).
	PolicyStateLimit int
}

// schedResult is what a scheduler process reports when it stops.
type schedResult struct {
	Decide []float64 // tide: each round's decision, seconds
	Binds  []int     // tide: pods bound by each round
	// Hists are kube-scheduler's latency histograms, by metric name.
	Hists map[string]hist
	Stats kube.Stats // tide's counters
}

// hist is a Prometheus histogram: cumulative counts at upper bounds.
type hist struct {
	Upper []float64
	Cum   []uint64
	Sum   float64
	Count uint64
}

// decisionLatency: p50 and p99 of one decision, seconds.
func (r *schedResult) decisionLatency() (p50, p99 float64) {
	if h, ok := r.Hists["scheduler_scheduling_algorithm_duration_seconds"]; ok {
		return h.quantile(0.5), h.quantile(0.99)
	}
	return quantile(r.Decide, 0.5), quantile(r.Decide, 0.99)
}

// quantile interpolates linearly within the bucket holding rank q.
func (h hist) quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	lo, below := 0.0, uint64(0)
	for i, up := range h.Upper {
		if float64(h.Cum[i]) >= rank {
			in := float64(h.Cum[i] - below)
			if in == 0 {
				return up
			}
			return lo + (up-lo)*(rank-float64(below))/in
		}
		lo, below = up, h.Cum[i]
	}
	return lo // in the +Inf bucket: its lower bound
}

// runningScheduler is a scheduler process.
type runningScheduler struct {
	cmd  *exec.Cmd
	spec schedSpec
	log  string
	done chan struct{}
	err  error
	// maxRSS is the process's peak resident memory, bytes, read as it is
	// stopped.
	maxRSS int64
}

func startScheduler(spec schedSpec, logFile string) (*runningScheduler, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), schedEnv+"="+string(js))
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphan if the benchmark dies
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	r := &runningScheduler{cmd: cmd, spec: spec, log: logFile, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		lf.Close()
		close(r.done)
	}()
	return r, nil
}

func (r *runningScheduler) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop ends the process and returns its report and its CPU time, seconds.
func (r *runningScheduler) stop() (*schedResult, float64, error) {
	if !r.exited() {
		r.maxRSS = peakRSS(strconv.Itoa(r.cmd.Process.Pid))
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	ps := r.cmd.ProcessState
	cpu := (ps.UserTime() + ps.SystemTime()).Seconds()
	data, err := os.ReadFile(r.spec.Out)
	if err != nil {
		return nil, cpu, err
	}
	res := &schedResult{}
	return res, cpu, json.Unmarshal(data, res)
}

func (r *runningScheduler) logTail() string {
	data, _ := os.ReadFile(r.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// schedulerMain runs the scheduler spec (JSON) names until SIGTERM, then
// writes its report; it returns the exit status.
func schedulerMain(js string) int {
	var spec schedSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", schedEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	var res schedResult
	var err error
	switch spec.Kind {
	case "tide":
		err = runTide(ctx, spec, &res)
	case "kube-scheduler":
		err = runKubeScheduler(ctx, spec)
		res.Hists = map[string]hist{}
		for _, name := range []string{"scheduler_scheduling_algorithm_duration_seconds", "scheduler_scheduling_attempt_duration_seconds"} {
			res.Hists[name] = gatherHist(name)
		}
	default:
		err = fmt.Errorf("unknown scheduler kind %q", spec.Kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	data, err := json.Marshal(&res)
	if err == nil {
		err = os.WriteFile(spec.Out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runTide runs tide kube's scheduler as `tide kube` would, plain pods only.
func runTide(ctx context.Context, spec schedSpec, res *schedResult) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return err
	}
	cs, _, err := kube.Clients(cfg, spec.QPS, spec.Burst, false)
	if err != nil {
		return err
	}
	// An Event for every bind, as kube-scheduler writes them (tide kube's
	// default is at most 20 a second).
	s, err := kube.New(kube.Config{Client: cs, SchedulerName: spec.Name, Policy: spec.Policy, EventQPS: -1,
		PolicyStateLimit: spec.PolicyStateLimit,
		Observe: func(r kube.RoundInfo) {
			res.Decide = append(res.Decide, r.Decide.Seconds())
			res.Binds = append(res.Binds, r.Binds)
		}})
	if err != nil {
		return err
	}
	defer func() { res.Stats = s.Stats() }()
	if spec.Elect != nil {
		return spec.Elect.run(ctx, s, cfg)
	}
	return s.Run(ctx)
}

// runKubeScheduler runs the stock kube-scheduler as its command does
// (cmd/kube-scheduler/app), default profile, leader election and serving
// off, until ctx ends.
func runKubeScheduler(ctx context.Context, spec schedSpec) error {
	opts := schedoptions.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{"--kubeconfig=" + spec.Kubeconfig, "--leader-elect=false", "--secure-port=0", "-v=0",
		fmt.Sprintf("--kube-api-qps=%g", spec.QPS), fmt.Sprintf("--kube-api-burst=%d", spec.Burst)}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	cc, sched, err := schedapp.Setup(ctx, opts)
	if err != nil {
		return err
	}
	err = schedapp.Run(ctx, cc, sched)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// gatherHist sums a histogram's series in the process's legacy metrics
// registry (where the kube-scheduler registers its own).
func gatherHist(name string) hist {
	var h hist
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return h
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ph := m.GetHistogram()
			if ph == nil {
				continue
			}
			if h.Upper == nil {
				for _, bk := range ph.GetBucket() {
					h.Upper = append(h.Upper, bk.GetUpperBound())
				}
				h.Cum = make([]uint64, len(h.Upper))
			}
			for i, bk := range ph.GetBucket() {
				if i < len(h.Cum) {
					h.Cum[i] += bk.GetCumulativeCount()
				}
			}
			h.Sum += ph.GetSampleSum()
			h.Count += ph.GetSampleCount()
		}
	}
	return h
}
