package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/server"
)

const serveHelp = `Usage: tide serve [flags]

Runs tide on this machine: the scheduling engine under --policy, driving
jobs as local processes on the machine's GPUs, behind the HTTP/JSON API
(docs/api.md). State lives in --data-dir; after a crash or a restart every
accepted job is recovered, running processes re-adopted.

Without GPUs (tests, demos): tide serve --gpus fake:4:t4 --data-dir DIR

On the first start an admin token is written to DIR/admin.token (unless
--admin-token-file gives one); create tenants with 'tide tenant add NAME'.

Flags:
`

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tide")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "tide")
	}
	return "tide-data"
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", defaultDataDir(), "`DIR` for the database, job logs and checkpoints")
	listen := fs.String("listen", "127.0.0.1:7450", "`ADDR` to serve the API on (host:port; port 0 picks one)")
	gpus := fs.String("gpus", "", "GPUs: fake:N[:TYPE] for N pretend GPUs, or nvidia (default: discover with nvidia-smi)")
	pol := fs.String("policy", "fifo", "scheduling policy spec (see 'tide policies')")
	placer := fs.String("placer", "pack", "GPU placer: pack, most-free or hived[:vc=TENANT@GPUS[@TYPE]/...] (HiveD cells and virtual clusters, docs/fairness.md)")
	round := fs.Duration("round", 10*time.Second, "time between periodic scheduling rounds (rounds also run on events)")
	grace := fs.Duration("grace", 30*time.Second, "time a stopped job gets between SIGTERM and SIGKILL")
	retries := fs.Int("max-retries", 3, "default retry limit for jobs that exit non-zero")
	backoff := fs.Duration("retry-backoff", time.Second, "delay before the first retry (doubled per failure, at most 1m)")
	adminFile := fs.String("admin-token-file", "", "`FILE` holding the admin token (default: generated at the first start into DIR/admin.token)")
	singleUser := fs.Bool("single-user", false, "run every tenant's jobs as tide serve's own Unix user. Without it, tide serve run as root runs each tenant's jobs as the "+
		"tenant's Unix user ('tide tenant add NAME --user USER'), and not run as root it refuses a second tenant (its jobs could read the others' and the admin token)")
	tlsCert := fs.String("tls-cert", "", "`FILE`: PEM certificate (chain) to serve the API over HTTPS (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "`FILE`: PEM private key of --tls-cert")
	insecure := fs.Bool("insecure", false, "allow --listen on a non-loopback address without TLS (tokens then cross the network in the clear)")
	maxLog := fs.Int64("max-log-bytes", 1<<30, "size a job's output log may reach; the rest is dropped after a marker line (a tenant's limits.max_log_bytes overrides it)")
	retention := fs.Duration("retention", 0, "remove a finished job's files (log, checkpoint, report) this long after it ended (e.g. 720h; 0 keeps them)")
	stopJobs := fs.Bool("stop-jobs-on-exit", false, "stop running jobs when tide serve exits (default: leave them running, to be re-adopted)")
	pairs := fs.String("pair-throughputs", "", "`FILE` of Gavel's measured throughputs (simulation_throughputs.json): pairs of jobs, by job_type, the packing policies may run on one GPU (docs/sharing.md); none: one whole-GPU job per GPU")
	mps := fs.String("mps", "", "`PROGRAM`: CUDA MPS control for GPUs that jobs share (docs/sharing.md); empty: nvidia-cuda-mps-control from PATH on real GPUs, none on fake ones; off: none")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(stderr, serveHelp)
		fs.PrintDefaults()
	}
	if err := parseOnlyFlags(fs, args); err != nil {
		return err
	}
	level, err := parseLogLevel(*logLevel)
	if err != nil {
		return err
	}
	opts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch *logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		return usageError{fmt.Errorf("--log-format %q: want text or json", *logFormat)}
	}
	if err := checkListen(*listen, *tlsCert != "", *insecure); err != nil {
		return usageError{err}
	}
	if *maxLog < 1024 {
		return usageError{fmt.Errorf("--max-log-bytes %d: want at least 1024", *maxLog)}
	}
	devs, err := localexec.Discover(*gpus)
	if err != nil {
		if errors.Is(err, localexec.ErrNoGPUs) {
			return err
		}
		return usageError{err}
	}
	s, err := server.New(server.Config{DataDir: *dataDir, GPUs: devs, Policy: *pol, Placer: *placer, Round: *round,
		Grace: *grace, MaxRetries: *retries, RetryBackoff: *backoff, AdminTokenFile: *adminFile,
		StopJobsOnExit: *stopJobs, SingleUser: *singleUser, TLSCert: *tlsCert, TLSKey: *tlsKey, MaxLogBytes: *maxLog, Retention: *retention, MPS: *mps, PairThroughputs: *pairs, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(ctx)
		return fmt.Errorf("--listen: %w", err)
	}
	if f := s.AdminTokenFile(); f != "" {
		fmt.Fprintf(stdout, "admin token written to %s\n", f)
	}
	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "tide serve: listening on %s://%s (%s, policy %s, data in %s)\n", scheme, ln.Addr(), s.Cluster(), *pol, *dataDir)
	s.Start(ln)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	got := <-sig
	signal.Stop(sig)
	logger.Info("shutting down", "signal", got.String(), "stop_jobs", *stopJobs)
	ctx, cancel := context.WithTimeout(context.Background(), *grace+10*time.Second)
	defer cancel()
	return s.Close(ctx)
}

// parseLogLevel reads --log-level for the long-running commands (serve,
// kube); a bad value is a usage error.
func parseLogLevel(s string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", s)}
	}
	return level, nil
}

// checkListen refuses to serve the API in the clear beyond this machine:
// a --listen address that is not loopback needs TLS or --insecure.
func checkListen(addr string, tls, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port: %w", addr, err)
	}
	if tls || insecure || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	what := host
	if host == "" || host == "0.0.0.0" || host == "::" {
		what = "every interface"
	}
	return fmt.Errorf("--listen %s serves the API on %s without TLS: tokens would cross the network in the clear. "+
		"Give --tls-cert and --tls-key, listen on 127.0.0.1, or pass --insecure to accept it", addr, what)
}
