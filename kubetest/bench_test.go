package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics/legacyregistry"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/tide-sched/tide/kube"
)

// BenchmarkDrain measures how fast a scheduler drains a backlog: NODES
// fake nodes of 8 GPUs (default 1000) and PODS pending one-GPU pods
// (default 8000), alone or in gangs of 8, scheduled by tide (FIFO,
// Tiresias) or by the stock kube-scheduler built from the same Kubernetes
// module with its default profile and its default client rate limits
// (50 QPS, burst 100). The clock starts when the scheduler starts (its
// caches sync inside the measurement) and stops when the last pod is seen
// bound. Run it once per case: -bench Drain -benchtime 1x. Sizes come from
// TIDE_BENCH_NODES and TIDE_BENCH_PODS.
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
	cases := []struct {
		name   string
		sched  string // "" = kube-scheduler
		policy string
		gang   int
		qps    float32 // kube-scheduler's client QPS; 0 = its default
	}{
		{"tide-fifo-pods", "tide", "fifo", 1, 0},
		{"tide-tiresias-pods", "tide", "tiresias", 1, 0},
		{"kube-scheduler-pods", "", "", 1, 0},
		{"tide-fifo-gang8", "tide", "fifo", 8, 0},
		{"tide-tiresias-gang8", "tide", "tiresias", 8, 0},
		{"kube-scheduler-gang8", "", "", 8, 0},
		{"kube-scheduler-pods-qps1000", "", "", 1, 1000},
	}
	for ci, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ns := fmt.Sprintf("bench-%d", ci)
			if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			schedName := "default-scheduler"
			if c.sched != "" {
				schedName = fmt.Sprintf("tide-%d", ci)
			}
			parallel(pods, func(i int) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%05d", i)},
					Spec: corev1.PodSpec{SchedulerName: schedName, Containers: []corev1.Container{{Name: "c", Image: "x",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.GPUResource: resource.MustParse("1")}}}}}}
				if c.gang > 1 {
					p.Annotations = map[string]string{kube.AnnotJob: fmt.Sprintf("g-%05d", i/c.gang), kube.AnnotGangSize: strconv.Itoa(c.gang)}
				}
				if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			})
			if b.Failed() {
				return
			}
			var bound atomic.Int64
			wctx, wstop := context.WithCancel(ctx)
			f := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))
			inf := f.Core().V1().Pods().Informer()
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
				if o.(*corev1.Pod).Spec.NodeName == "" && n.(*corev1.Pod).Spec.NodeName != "" {
					bound.Add(1)
				}
			}})
			f.Start(wctx.Done())
			f.WaitForCacheSync(wctx.Done())
			sum0, cnt0 := histogram("scheduler_scheduling_algorithm_duration_seconds")
			sctx, sstop := context.WithCancel(ctx)
			b.ResetTimer()
			t0 := time.Now()
			var tide *kube.Scheduler
			done := make(chan error, 1)
			if c.sched != "" {
				cfg := rest.CopyConfig(e.cfg)
				cfg.QPS, cfg.Burst = 1000, 2000 // tide kube's defaults
				tide, _ = kube.New(kube.Config{Client: kubernetes.NewForConfigOrDie(cfg), SchedulerName: schedName, Policy: c.policy})
				go func() { done <- tide.Run(sctx) }()
			} else {
				go func() { done <- runKubeScheduler(sctx, b, e.cfg, c.qps) }()
			}
			deadline := time.Now().Add(20 * time.Minute)
			for bound.Load() < int64(pods) && time.Now().Before(deadline) {
				select {
				case err := <-done:
					b.Fatalf("scheduler stopped: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			el := time.Since(t0)
			b.StopTimer()
			sstop()
			<-done
			wstop()
			n := bound.Load()
			b.ReportMetric(float64(n)/el.Seconds(), "pods/s")
			b.ReportMetric(el.Seconds(), "s/drain")
			if tide != nil {
				st := tide.Stats()
				b.ReportMetric(1e3*st.DecideSeconds/float64(max(1, st.Rounds)), "ms/decision")
				b.ReportMetric(1e3*st.MaxDecideSeconds, "max-ms/decision")
				b.ReportMetric(float64(st.Rounds), "rounds")
			} else if sum, cnt := histogram("scheduler_scheduling_algorithm_duration_seconds"); cnt > cnt0 {
				b.ReportMetric(1e3*(sum-sum0)/(cnt-cnt0), "ms/decision")
			}
			if n < int64(pods) {
				b.Errorf("%d of %d pods bound in %v", n, pods, el)
			}
			// Free the nodes for the next case.
			zero := int64(0)
			if err := e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
				b.Fatal(err)
			}
		})
	}
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

// benchNode registers a Ready, untainted node with 8 GPUs and room for
// 110 pods.
func benchNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"nvidia.com/gpu.product": "a100", "kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status.Capacity = corev1.ResourceList{kube.GPUResource: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	n.Status.Allocatable = n.Status.Capacity
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

// runKubeScheduler runs the stock kube-scheduler in this process as its
// command does (cmd/kube-scheduler/app), with leader election and serving
// off, until ctx ends.
func runKubeScheduler(ctx context.Context, b *testing.B, cfg *rest.Config, qps float32) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	file := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		return err
	}
	opts := schedoptions.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{"--kubeconfig=" + file, "--leader-elect=false", "--secure-port=0", "-v=0"}
	if qps > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%g", qps), fmt.Sprintf("--kube-api-burst=%g", 2*qps))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	configz.Delete("componentconfig") // registered by an earlier case
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

// histogram reads the sum and count of a histogram in the process's
// legacy metrics registry (where the kube-scheduler registers its own).
func histogram(name string) (sum, count float64) {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				sum += h.GetSampleSum()
				count += float64(h.GetSampleCount())
			}
		}
	}
	return sum, count
}
