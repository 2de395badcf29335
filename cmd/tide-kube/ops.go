package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tide-sched/tide/kube"
)

// kubeOps holds tide kube's operational flags: leader election among
// replicas, and the HTTP server of probes and metrics.
type kubeOps struct {
	elect                        bool
	leaseNS, leaseName           string
	leaseDur, renewDur, retryDur time.Duration
	httpAddr                     string
	stuck                        time.Duration
	pprof                        bool
}

const kubeOpsHelp = `
High availability: with --leader-elect (the default) replicas share a
coordination.k8s.io Lease; one schedules, the others keep their caches
synced and take over when it stops renewing (--leader-elect-lease-duration
after its last renewal). A replica that loses the Lease exits (status 1)
to start over as a standby. The leader keeps the policy's state (Tiresias'
queues and each job's attained service, Gavel's priorities...) on the
Lease NAME-policy-state, which the next leader loads; a state over 200 KiB
is not saved, with a Warning Event on that Lease (docs/kubernetes.md).

Probes and metrics (--http-addr): /healthz fails while one round has run
longer than --stuck-round; /readyz succeeds once the caches have synced,
leading or standing by; /metrics has tide_* counters in Prometheus' format;
with --pprof, /debug/pprof/ has Go's CPU, heap and goroutine profiles.
`

func addKubeOpsFlags(fs *flag.FlagSet) *kubeOps {
	o := &kubeOps{}
	fs.BoolVar(&o.elect, "leader-elect", true, "elect one leader among replicas through a Lease (false: schedule at once; run one replica only)")
	fs.StringVar(&o.leaseNS, "leader-elect-namespace", "", "`NAMESPACE` of the Lease (default: $POD_NAMESPACE, else the service account's namespace, else default)")
	fs.StringVar(&o.leaseName, "leader-elect-name", "", "`NAME` of the Lease (default: the scheduler name)")
	fs.DurationVar(&o.leaseDur, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the leader's last renewal before taking over")
	fs.DurationVar(&o.renewDur, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops scheduling (less than the lease duration)")
	fs.DurationVar(&o.retryDur, "leader-elect-retry-period", 2*time.Second, "time between tries to acquire or renew the Lease")
	fs.StringVar(&o.httpAddr, "http-addr", ":10251", "`ADDRESS` serving /healthz, /readyz and /metrics (empty: none)")
	fs.DurationVar(&o.stuck, "stuck-round", 5*time.Minute, "/healthz fails while one scheduling round has run longer than this")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr (e.g. go tool pprof http://ADDRESS/debug/pprof/profile?seconds=30)")
	return o
}

// handler is what --http-addr serves: probes and metrics, and with
// --pprof Go's profiles.
func (o *kubeOps) handler(probes http.Handler) http.Handler {
	if !o.pprof {
		return probes
	}
	mux := http.NewServeMux()
	mux.Handle("/", probes)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// run serves the probes and runs s, elected or not, until ctx ends.
func (o *kubeOps) run(ctx context.Context, s *kube.Scheduler, cfg *rest.Config, name string, log *slog.Logger) error {
	if o.httpAddr != "" {
		ln, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			return fmt.Errorf("--http-addr: %w", err)
		}
		srv := &http.Server{Handler: o.handler(s.Handler(o.stuck)), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("probe server stopped", "err", err)
			}
		}()
		defer srv.Close()
		log.Info("serving /healthz, /readyz and /metrics", "addr", ln.Addr().String())
	}
	if !o.elect {
		return s.Run(ctx)
	}
	ec, err := kube.ElectionClient(cfg)
	if err != nil {
		return err
	}
	el := kube.Election{Client: ec, Namespace: o.leaseNS, Name: o.leaseName,
		LeaseDuration: o.leaseDur, RenewDeadline: o.renewDur, RetryPeriod: o.retryDur}
	if el.Namespace == "" {
		el.Namespace = podNamespace()
	}
	if el.Name == "" {
		el.Name = name
	}
	return s.RunElected(ctx, el)
}

// podNamespace is the namespace tide runs in: $POD_NAMESPACE (the
// Deployment sets it from the downward API), else the service account's,
// else "default".
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}
