package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/policy"
)

const kubeHelp = `Usage: tide kube [flags]

Runs tide as a Kubernetes scheduler (docs/kubernetes.md). It schedules the
pods whose spec.schedulerName is --scheduler-name: TideJob workers (the CRD
in deploy/), gangs of pods annotated tide-sched.io/job and
tide-sched.io/gang-size, and single pods asking for nvidia.com/gpu. It binds
pods through the binding subresource and preempts through the Eviction API.

Credentials: --kubeconfig FILE, else the in-cluster service account, else
$KUBECONFIG or ~/.kube/config.

Quotas: --quota team-a=16,team-b=8 guarantees GPUs to tenants (a namespace,
or a job's queue); with --borrow (the default) idle GPUs are lent beyond
quota and taken back by preemption when their owner needs them.

Flags:
`

func cmdKube(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kube", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "`FILE` with cluster credentials (default: in-cluster, then $KUBECONFIG or ~/.kube/config)")
	name := fs.String("scheduler-name", "tide", "spec.schedulerName of the pods tide schedules")
	pol := fs.String("policy", "fifo", "scheduling policy spec (see 'tide policies')")
	quota := fs.String("quota", "", "GPU quotas per tenant: `TENANT=GPUS,...` (default: none)")
	borrow := fs.Bool("borrow", true, "with --quota: lend idle GPUs beyond quota, reclaimed by preemption")
	typeLabel := fs.String("gpu-type-label", "nvidia.com/gpu.product", "node `LABEL` holding the GPU type")
	round := fs.Duration("round", 2*time.Second, "time between periodic scheduling rounds (rounds also run on every change)")
	grace := fs.Duration("grace", 30*time.Second, "grace period of evicted pods")
	parallel := fs.Int("parallel", 32, "API calls in flight at once")
	qps := fs.Float64("kube-api-qps", 1000, "client-side limit on API requests per second")
	burst := fs.Int("kube-api-burst", 2000, "client-side burst of API requests")
	noCRD := fs.Bool("no-tidejobs", false, "do not watch TideJobs (when the CRD is not installed)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	var ui kube.UIFlags
	ui.Register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, kubeHelp)
		fs.PrintDefaults()
	}
	if err := parseOnlyFlags(fs, args); err != nil {
		return err
	}
	level, err := parseLogLevel(*logLevel)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var quotas map[string]int
	if *quota != "" {
		q, err := policy.ParseQuotas(*quota)
		if err != nil {
			return usageError{fmt.Errorf("--quota: %w", err)}
		}
		quotas = q
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	cs, dyn, err := kube.Clients(cfg, float32(*qps), *burst, !*noCRD)
	if err != nil {
		return err
	}
	s, err := kube.New(kube.Config{Client: cs, Dynamic: dyn, SchedulerName: *name, Policy: *pol,
		Quotas: quotas, Borrow: *borrow, GPUTypeLabel: *typeLabel, Round: *round, Grace: grace,
		Parallel: *parallel, Log: logger})
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "tide kube: scheduling pods with schedulerName %s on %s (policy %s)\n", *name, cfg.Host, *pol)
	if url, err := ui.Start(ctx, s); err != nil {
		return usageError{err}
	} else if url != "" {
		fmt.Fprintf(stdout, "tide kube: web console on %s\n", url)
	}
	return s.Run(ctx)
}

// restConfig finds credentials: an explicit file, the in-cluster service
// account, then $KUBECONFIG or ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster credentials: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no credentials: not in a cluster, and $KUBECONFIG or ~/.kube/config: %w (give --kubeconfig)", err)
	}
	return cfg, nil
}
