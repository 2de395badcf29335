// Command tide-kube runs tide as a Kubernetes scheduler (docs/kubernetes.md).
//
// It is a binary of its own, apart from cmd/tide, so that the simulator
// builds without the Kubernetes client (about 400 k8s.io packages): `go run
// ./cmd/tide sim` on a fresh machine compiles none of them. `tide kube
// [flags]` runs this binary when it is installed beside tide or on $PATH
// (go install ./cmd/tide ./cmd/tide-kube; the image of deploy/Dockerfile
// holds both), so either spelling works:
//
//	go run ./cmd/tide-kube --policy tiresias
//	tide kube --policy tiresias
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tide-sched/tide/cmd/internal/cmdflags"
	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/policy"
)

const kubeHelp = `Usage: tide-kube [flags]   (also: tide kube [flags])

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

Packing (docs/sharing.md): --pair-throughputs FILE (Gavel's throughput file,
as tide serve takes it) lets the packing policies (gandiva:pack=true,
gavel-*:space_sharing=true) run two TideJobs on one GPU. A TideJob whose
spec.jobType the file knows is packable: its workers ask for no
nvidia.com/gpu and are bound to a GPU index tide records (annotation
tide-sched.io/gpu-index), with NVIDIA_VISIBLE_DEVICES of that index and,
when made packed, half the GPU's threads (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE).
Pods asking for nvidia.com/gpu are never packed.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (0 done, 1
// failed, 2 a mistake on the command line).
func run(args []string, stdout, stderr io.Writer) int {
	err := cmdKube(args, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "tide kube: %v\n", err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

// usageError marks mistakes on the command line (exit code 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func cmdKube(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tide-kube", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "`FILE` with cluster credentials (default: in-cluster, then $KUBECONFIG or ~/.kube/config)")
	name := fs.String("scheduler-name", "tide", "spec.schedulerName of the pods tide schedules")
	pol := fs.String("policy", "fifo", "scheduling policy spec (see 'tide policies')")
	quota := fs.String("quota", "", "GPU quotas per tenant: `TENANT=GPUS,...` (default: none)")
	borrow := fs.Bool("borrow", true, "with --quota: lend idle GPUs beyond quota, reclaimed by preemption")
	typeLabel := fs.String("gpu-type-label", "nvidia.com/gpu.product", "node `LABEL` holding the GPU type")
	round := fs.Duration("round", 2*time.Second, "time between periodic scheduling rounds (rounds also run on every change)")
	grace := fs.Duration("grace", 30*time.Second, "grace period of evicted pods")
	notReady := fs.Duration("not-ready-grace", kube.DefaultNotReadyGrace, "how long a node may be NotReady before the workers on it count as lost and are rescheduled")
	parallel := fs.Int("parallel", 32, "API calls in flight at once")
	qps := fs.Float64("kube-api-qps", 1000, "client-side limit on API requests per second")
	burst := fs.Int("kube-api-burst", 2000, "client-side burst of API requests")
	eventQPS := fs.Float64("event-qps", 20, "most Events (Scheduled, FailedScheduling, Preempted) written per second, the rest dropped; negative: no limit (kube-scheduler writes one per pod)")
	fill := fs.Bool("fill-idle", false, "give GPUs the policy's plan leaves idle to waiting jobs until its next plan claims them (for policies with long rounds, e.g. Gavel's 360 s)")
	noCRD := fs.Bool("no-tidejobs", false, "do not watch TideJobs (when the CRD is not installed)")
	pairs := fs.String("pair-throughputs", "", "`FILE` of Gavel's measured throughputs (simulation_throughputs.json): TideJobs whose spec.jobType it knows are packable, and the packing policies may run two on one GPU, bound by GPU index (docs/sharing.md); none: one job per whole GPU")
	level := slog.LevelInfo
	fs.TextVar(&level, "log-level", level, "log `LEVEL`: debug, info, warn or error")
	ops := addKubeOpsFlags(fs)
	var ui kube.UIFlags
	ui.Register(fs)
	var sites kube.SiteLabels
	sites.Register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, kubeHelp+kubeOpsHelp+"\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := cmdflags.Parse(fs, args, "tide-kube -h"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q (tide-kube takes flags only)", fs.Args())}
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
		Quotas: quotas, Borrow: *borrow, GPUTypeLabel: *typeLabel, Sites: sites, Round: *round, Grace: grace,
		Parallel: *parallel, EventQPS: *eventQPS, FillIdle: *fill, Log: logger, NotReadyGrace: *notReady, Self: selfRef(),
		PairThroughputs: *pairs})
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "tide kube: scheduling pods with schedulerName %s on %s (policy %s)\n", *name, cfg.Host, *pol)
	if !*fill && (strings.HasPrefix(*pol, "gavel") || strings.HasPrefix(*pol, "fifo-perf")) {
		fmt.Fprintf(stdout, "tide kube: %s re-plans on its own rounds (360 s by default): pods arriving in between wait with GPUs idle; --fill-idle gives them idle GPUs at once (docs/kubernetes.md, \"Policies with long rounds\")\n", *pol)
	}
	if url, err := ui.Start(ctx, s); err != nil {
		return usageError{err}
	} else if url != "" {
		fmt.Fprintf(stdout, "tide kube: web console on %s\n", url)
	}
	return ops.run(ctx, s, cfg, *name, logger)
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

// selfRef is tide's own pod, named by POD_NAME and POD_NAMESPACE (the
// Deployment sets them from the downward API), for events about tide
// itself; nil outside a pod.
func selfRef() *corev1.ObjectReference {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(os.Getenv("POD_UID"))}
}
