// Package server is tide serve: the scheduling engine with a real clock,
// driving the local executor (package localexec) on this machine's GPUs,
// behind the HTTP/JSON API of package api, with its state in package store.
//
// Concurrency: the engine is not goroutine-safe. Every access to it, and to
// the in-memory job table, holds Server.mu. Store writes that change a
// job's state happen under mu too, before the change is acted on (a
// process is launched or signalled only after its new state is durable).
// Submissions are written to the store outside mu, coalesced by bbolt's
// batching, then put in an inbox that whoever takes mu next (Server.lock)
// moves into the job table and the engine: a submission never waits for
// a scheduling round in progress.
//
// A job's life: the engine's round emits a Change; the server records an
// attempt (phase waiting) and a goroutine waits until the GPUs' previous
// processes are gone, launches the command, records its pid and start time
// (phase running) and waits for it. Exit 0 finishes the job; another exit
// code retries it in place on the same GPUs after a backoff, until the
// retry limit, then fails it. Preemption, resize and cancellation send
// SIGTERM, wait the grace period, then SIGKILL.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/store"
)

// Config configures a server.
type Config struct {
	DataDir string
	// GPUs are the devices to schedule (localexec.Discover).
	GPUs []localexec.GPU
	// Policy is a policy spec (policy.Parse), default "fifo"; Placer a
	// placer name (place.Lookup), default "pack".
	Policy, Placer string
	// Round is the time between periodic scheduling rounds (default 10 s);
	// rounds also run at every submission, completion and cancellation,
	// at most one per MinRoundGap (default 20 ms) or per 8 times the
	// last round's duration, whichever is longer, so a burst of
	// submissions shares rounds and rounds over a long queue take at
	// most a ninth of the time.
	Round       time.Duration
	MinRoundGap time.Duration
	// ConsoleSample is the web console's utilisation resolution (default
	// 10 s); its history is kept in the database across restarts.
	ConsoleSample time.Duration
	// Grace is how long a stopped job has between SIGTERM and SIGKILL
	// (default 30 s).
	Grace time.Duration
	// MaxRetries is the default retry limit of jobs that do not set one
	// (default 3; negative means 0).
	MaxRetries int
	// RetryBackoff is the delay before the first retry, doubled at each
	// further failure up to a minute (default 1 s).
	RetryBackoff time.Duration
	// AdminTokenFile, when set, holds the admin token (its first line).
	// Otherwise a token is generated at the first start and written to
	// DataDir/admin.token.
	AdminTokenFile string
	// StopJobsOnExit makes Close stop running jobs (they restart from
	// their checkpoints at the next start). By default they keep running
	// and the next server re-adopts them.
	StopJobsOnExit bool
	// MaxLogBytes is the size a job's output log may reach (default
	// 1 GiB); a tenant's limits.max_log_bytes overrides it. Output beyond
	// it is dropped after a marker line.
	MaxLogBytes int64
	// TLSCert and TLSKey, when set, are the PEM files of the certificate
	// (chain) and key the API is served with over HTTPS. Jobs then report
	// through $TIDE_REPORT_FILE (no $TIDE_REPORT_URL: they would have to
	// verify the certificate).
	TLSCert, TLSKey string
	// Retention, when positive, is how long a finished (failed,
	// cancelled, declined) job's files are kept: its log, checkpoint,
	// report file and default working directory are removed that long
	// after it ended (its record stays).
	Retention time.Duration
	// SingleUser runs every tenant's jobs as the server's own Unix user.
	// Without it, a server run as root runs each tenant's jobs as the
	// tenant's user, and a server not run as root refuses a second tenant
	// (its jobs could read everything the server can).
	SingleUser bool
	// MPS is the CUDA MPS control program run for GPUs that jobs share
	// (docs/sharing.md): "" finds nvidia-cuda-mps-control in PATH on real
	// GPUs (none with fake ones), "off" runs none, a path runs that one.
	MPS string
	// PairThroughputs, when set, is a file of Gavel's measured
	// throughputs (simulation_throughputs.json's format) whose pairs rate
	// two jobs sharing a GPU by their job_type: with it the engine lets
	// the packing policies (Gandiva pack=true, Gavel space_sharing=true)
	// pack two whole-GPU jobs on the same GPUs, as the simulator does,
	// and the step times jobs report alone and packed refine the pairs
	// (perf.Pairs, docs/sharing.md). Without it no policy packs.
	PairThroughputs string
	// ReportURL is the base URL jobs report to (default: the listener's
	// address, 127.0.0.1 for a wildcard one).
	ReportURL string
	// Logger receives structured logs (default: discard).
	Logger *slog.Logger

	// wrapPolicy, when set, wraps the policy built from Policy (tests
	// force policy warnings through it).
	wrapPolicy func(engine.Policy) engine.Policy
}

// Server is tide serve.
type Server struct {
	cfg        Config
	db         *store.DB
	clk        WallClock
	eng        *engine.Engine
	cluster    *cluster.Cluster
	devices    []int // cluster GPU id -> CUDA index
	gpus       []localexec.GPU
	policyName string
	placerName string
	adapt      bool // the policy adapts batch sizes (policy.Info.AdaptBatch)
	// wholeOnly names the policy when it is elastic: it runs jobs on
	// whole GPUs only (policy.Info.Elastic; see partsWait).
	wholeOnly  string
	polState   []byte // the policy's state after the last round, until committed (policystate.go)
	savedState []byte // the policy state last taken (policystate.go)
	isolate    bool   // run jobs as their tenants' Unix users (root, not SingleUser)
	log        *slog.Logger
	jobsDir    string
	adminPath  string // the admin token file written at the first start, if any

	mu      sync.Mutex
	imu     sync.Mutex // guards inbox; taken under mu or alone
	inbox   []*liveJob // jobs recorded by submissions, not yet in jobs (drain)
	wmu     sync.Mutex // orders commits' writes; taken under mu
	writing int        // commits whose write is in flight (mu let go); under mu
	idle    sync.Cond  // on mu: signalled when writing or inLaunch drops to 0
	jobs    map[string]*liveJob
	order   []*liveJob // by submission sequence
	busy    []*attempt // per cluster GPU: the attempt whose process may occupy it
	tmu     sync.RWMutex
	mmu     sync.Mutex               // guards metrics.requests
	tenants map[string]*store.Tenant // by name; guarded by tmu
	tokens  map[string]*store.Tenant // by token hash; guarded by tmu
	dirty   map[*liveJob]bool        // records changed since the last commit
	events  []*store.Event           // events not yet committed
	after   []func()                 // actions to run once the next commit is durable
	metrics metrics
	rates   rateLimiter
	paths   pathCache
	quotas  *quotaPolicy
	deps    map[*liveJob]bool // waiting jobs with dependencies; under mu
	held    map[*liveJob]bool // jobs held (some may have been released or ended since); under mu
	// parts are the jobs asking for part of a GPU recovered under an
	// elastic policy (some may have ended since): they wait (partsWait).
	// Under mu.
	parts map[*liveJob]bool
	// dropped is, by job, the last reason the engine gave for dropping its
	// assignment (engine.WarnDropped), so that a mistake the policy repeats
	// every round is recorded once; under mu.
	dropped  map[string]string
	tls      *tls.Config // nil: plain HTTP
	closed   bool
	inLaunch int    // attempts run is launching outside mu; Close waits for them to be recorded
	report   string // base URL for TIDE_REPORT_URL
	lastSave time.Time

	kick    chan struct{}
	cancel  context.CancelFunc
	loops   sync.WaitGroup
	running sync.WaitGroup // attempt goroutines
	http    *http.Server

	// sharing are, per GPU, the attempts whose processes may run on it
	// together (parts, packed pairs; share.go) and the leftover processes
	// recovery is stopping there (stopStray); mps runs the GPUs' MPS
	// daemons.
	sharing map[cluster.GPUID][]*attempt
	mps     *localexec.MPS
	// mpsOrphans are the GPUs whose daemon a recovered attempt, gone
	// while the server was down, held (counted as held until recovery
	// is done); mpsStops are the daemons' releases in flight, which
	// Close waits for.
	mpsOrphans []int
	mpsStops   sync.WaitGroup
	// pairs rates jobs packed in pairs (Config.PairThroughputs); nil when
	// the engine runs one job per GPU (pack.go).
	pairs *perf.Pairs
}

// liveJob is a job in memory. rec is the durable record (changed under mu
// and written by commit).
type liveJob struct {
	rec  *store.Job
	j    *job.Job // nil when the job never reached the engine
	att  *attempt // the attempt holding the job's GPUs now, or nil
	last *attempt // the latest attempt, which may still be stopping

	reportOff int64         // bytes of the report file already read
	agent     goodput.Agent // the goodput model fitted to the job's reports
}

// attempt is one launch (or planned launch) of a job.
type attempt struct {
	lj      *liveJob
	n       int // 1-based, index+1 in rec.Attempts
	gpus    []cluster.GPUID
	devs    []int
	delay   time.Duration
	waitFor []*attempt
	done    chan struct{} // closed when the process is gone or never started
	wake    chan struct{} // closed when a stop is asked before the launch
	woken   bool
	proc    *localexec.Proc
	stop    string // why tide is stopping it; "" while it should run
	noRetry string // why its failure must not be retried (noRetry), if so
	mpsHeld bool   // it holds its GPU's MPS daemon (share.go)
	// frac: its job holds part of each GPU (job.Job.Fractional), fixed
	// when the attempt is made. The launch reads it outside mu, where the
	// job's lj.j may be changing (a requeue replaces it).
	frac bool
	// partner is the job it shares its GPUs with at launch (a packed
	// pair, pack.go), "" when it runs alone or holds a part.
	partner string
}

// New opens the data directory, recovers every job recorded there
// (re-adopting processes still alive, restarting the others from their
// checkpoints) and returns a server ready to Start.
func New(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: a data directory is required")
	}
	if cfg.Policy == "" {
		cfg.Policy = "fifo"
	}
	if cfg.Round <= 0 {
		cfg.Round = 10 * time.Second
	}
	if cfg.MinRoundGap <= 0 {
		cfg.MinRoundGap = 20 * time.Millisecond
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = time.Second
	}
	if cfg.MaxLogBytes <= 0 {
		cfg.MaxLogBytes = 1 << 30
	}
	cfg.MaxRetries = max(cfg.MaxRetries, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, devices, err := localexec.Cluster(cfg.GPUs)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("server: data directory: %w", err)
	}
	cfg.DataDir = dataDir
	s := &Server{cfg: cfg, cluster: c, devices: devices, gpus: cfg.GPUs, log: cfg.Logger,
		jobsDir: filepath.Join(dataDir, "jobs"), jobs: map[string]*liveJob{}, tenants: map[string]*store.Tenant{}, tokens: map[string]*store.Tenant{},
		dirty: map[*liveJob]bool{}, deps: map[*liveJob]bool{}, held: map[*liveJob]bool{}, parts: map[*liveJob]bool{}, dropped: map[string]string{}, metrics: newMetrics(), kick: make(chan struct{}, 1),
		busy: make([]*attempt, c.TotalGPUs()), isolate: geteuid() == 0 && !cfg.SingleUser}
	s.idle.L = &s.mu
	s.mps = localexec.NewMPS(cfg.MPS, filepath.Join(dataDir, "mps"), cfg.GPUs)
	if s.pairs, err = loadPairs(cfg.PairThroughputs, c.GPUTypes()); err != nil {
		return nil, fmt.Errorf("server: --pair-throughputs: %w", err)
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return nil, errors.New("server: --tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("server: --tls-cert/--tls-key: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if s.isolate {
		if err := s.prepareDataDir(); err != nil {
			return nil, err
		}
	}
	db, err := store.Open(dataDir)
	if err != nil {
		return nil, err
	}
	s.db = db
	if err := s.setup(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) setup() error {
	var recs []*store.Job
	err := s.db.View(func(tx *store.Tx) error {
		tenants, err := tx.Tenants()
		if err != nil {
			return err
		}
		for i := range tenants {
			s.putTenant(&tenants[i])
		}
		return tx.Jobs(func(j *store.Job) error { recs = append(recs, j); return nil })
	})
	if err != nil {
		return fmt.Errorf("server: reading the store: %w", err)
	}
	if err := s.setupAdmin(); err != nil {
		return err
	}
	if err := checkIsolation(geteuid(), len(s.tenants), s.cfg.SingleUser); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].Seq < recs[b].Seq })
	if info, ok := policy.Lookup(s.cfg.Policy); ok {
		s.adapt = info.AdaptBatch
		if info.Elastic {
			s.wholeOnly = info.Name
		}
	}
	// The policy may learn the jobs known at start (Tiresias' trace order).
	var known []*job.Job
	for _, r := range recs {
		if j, err := s.specJob(&r.Spec, r.ID, queuedSince(r)); err == nil {
			known = append(known, j)
		}
	}
	pol, err := assemble.Policy(s.cfg.Policy, policy.Context{Jobs: known}, nil, false)
	if err != nil {
		return fmt.Errorf("server: --%w", err)
	}
	if s.cfg.wrapPolicy != nil {
		pol = s.cfg.wrapPolicy(pol)
	}
	pl, err := place.Lookup(s.cfg.Placer)
	if err != nil {
		return fmt.Errorf("server: --placer: %w", err)
	}
	s.policyName, s.placerName = pol.Name(), pl.Name()
	s.quotas = &quotaPolicy{inner: pol, blocked: s.blocked, gated: s.gated, stopped: s.partStopped}
	s.eng, err = engine.New(engine.Config{Cluster: s.cluster, Model: s.model(), Policy: s.quotas, Placer: pl, Clock: s.clk, Sharing: s.pairs != nil,
		DropInvalid: true})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.recover(r)
	}
	// The daemons of attempts gone while the server was down go now,
	// unless a re-adopted attempt holds them too.
	for _, dev := range s.mpsOrphans {
		s.releaseDev(dev)
	}
	s.mpsOrphans = nil
	s.restorePolicyState()
	s.addEvent(&store.Event{Kind: "server-start", Message: fmt.Sprintf("policy %s, %s, %d jobs recovered", s.policyName, s.cluster, len(recs))})
	if err := s.commit(); err != nil {
		return fmt.Errorf("server: recording the recovery: %w", err)
	}
	return nil
}

// setupAdmin makes sure an admin tenant exists.
func (s *Server) setupAdmin() error {
	now := s.clk.Now()
	if s.cfg.AdminTokenFile != "" {
		data, err := os.ReadFile(s.cfg.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("server: --admin-token-file: %w", err)
		}
		tok, _, _ := strings.Cut(string(data), "\n")
		tok = strings.TrimSpace(tok)
		if len(tok) < 16 {
			return fmt.Errorf("server: --admin-token-file %s: want a token of at least 16 characters", s.cfg.AdminTokenFile)
		}
		return s.putAdmin(store.HashToken(tok), now)
	}
	for _, t := range s.tenants {
		if t.Admin {
			return nil
		}
	}
	tok, err := store.NewToken()
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	path := filepath.Join(s.cfg.DataDir, "admin.token")
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("server: writing the admin token: %w", err)
	}
	s.adminPath = path
	return s.putAdmin(store.HashToken(tok), now)
}

func (s *Server) putAdmin(hash string, now float64) error {
	t := &store.Tenant{Name: "admin", TokenHash: hash, Admin: true, Created: now}
	err := s.db.Update(func(tx *store.Tx) error {
		if old, err := tx.Tenant("admin"); err == nil {
			*t = *old
			if old.TokenHash == hash {
				return nil
			}
			t.TokenHash = hash
		}
		return tx.PutTenant(t)
	})
	if err != nil {
		return fmt.Errorf("server: admin tenant: %w", err)
	}
	s.tmu.Lock()
	s.putTenant(t)
	s.tmu.Unlock()
	return nil
}

// AdminTokenFile is the file the admin token was written to at this start
// ("" when the data directory already had an admin, or one was given).
func (s *Server) AdminTokenFile() string { return s.adminPath }

// Cluster is the cluster the server schedules.
func (s *Server) Cluster() *cluster.Cluster { return s.cluster }

// recover brings one recorded job back: into the engine with its counters
// when it is not over, its last attempt re-adopted when its process still
// runs, or accounted for (finished, failed, to restart) when it is gone.
// Called under mu.
func (s *Server) recover(r *store.Job) {
	lj := &liveJob{rec: r}
	s.jobs[r.ID] = lj
	s.order = append(s.order, lj)
	now := s.clk.Now()
	last := r.Last()
	// An earlier attempt not ended was being stopped when the previous
	// server went away (a requeue, preemption or resize whose next
	// attempt waited for it): its process, if still there, is stopped
	// and keeps its GPUs until it is gone; otherwise it is recorded
	// ended.
	for i := range len(r.Attempts) - 1 {
		if a := &r.Attempts[i]; a.Phase != store.PhaseEnded {
			if p := s.find(r, a); p != nil {
				s.stopStray(lj, a, p, "a later attempt of the job exists")
			} else {
				s.endGone(lj, a, now)
			}
		}
	}
	var proc *localexec.Proc
	if last != nil && last.Phase != store.PhaseEnded {
		proc = s.find(r, last)
	}
	if api.Terminal(r.State) {
		if proc != nil {
			s.stopStray(lj, last, proc, "the job is "+r.State)
		} else if last != nil && last.Phase != store.PhaseEnded {
			s.endGone(lj, last, now) // being stopped (cancelled, say) when the server went away
		}
		return
	}
	j, err := s.specJob(&r.Spec, r.ID, queuedSince(r))
	var st *engine.Status
	if err == nil {
		st, err = s.eng.Submit(j)
	}
	if err != nil {
		// The job can no longer run here (fewer GPUs than when it was
		// accepted, say): fail it, saying why.
		if proc != nil {
			s.stopStray(lj, last, proc, "the job cannot be scheduled")
		}
		r.State, r.Ended, r.Reason = api.StateFailed, now, "after a restart: "+err.Error()
		s.touch(lj)
		s.addEvent(&store.Event{Job: r.ID, Kind: "failed", Message: r.Reason})
		return
	}
	lj.j = j
	if len(r.Spec.After) > 0 && r.FirstStart == 0 {
		s.deps[lj] = true
	}
	if r.Held {
		s.held[lj] = true
	}
	if s.wholeOnly != "" && j.Fractional() {
		s.parts[lj] = true
	}
	e := r.Engine
	restoreUsage(st, &e)
	if e.FirstStart > 0 {
		st.FirstStart = e.FirstStart
	}
	if e.LastStop > 0 {
		st.LastStop = e.LastStop
	}
	if st.Starts > 0 {
		st.State = job.Preempted
	}
	_ = s.eng.Report(r.ID, r.Progress*st.Work)
	s.restorePerf(lj)

	if last == nil || last.Phase == store.PhaseEnded {
		if r.State == api.StateRunning {
			// Stopped by the previous server (shutdown): restart.
			r.State = api.StatePreempted
			s.touch(lj)
		}
		return
	}
	if proc != nil {
		gpus, ok := s.gpuIDs(last)
		if ok && r.State == api.StateRunning && last.Stop == "" && s.eng.Adopt(r.ID, gpus) == nil {
			att := &attempt{lj: lj, n: last.N, gpus: gpus, devs: last.Devices, done: make(chan struct{}), wake: make(chan struct{}), proc: proc, frac: j.Fractional()}
			lj.att, lj.last = att, att
			att.partner = s.eng.Job(r.ID).PackedWith // Adopt paired it with the job on its GPUs
			for _, g := range gpus {
				s.claim(att, g)
			}
			s.adoptMPS(att, last.MPS)
			if p := s.jobs[att.partner]; p != nil && p.att != nil && p.att.partner == "" {
				p.att.partner = r.ID // adopted alone before this one joined it
			}
			last.Phase, last.PID, last.StartTicks = store.PhaseRunning, proc.PID(), proc.StartTicks()
			s.touch(lj)
			s.metrics.counters["adopted"]++
			s.addEvent(&store.Event{Job: r.ID, Kind: "adopted", Attempt: last.N, Message: fmt.Sprintf("process %d still running on GPUs %v", proc.PID(), last.Devices)})
			s.log.Info("job re-adopted", "job", r.ID, "attempt", last.N, "pid", proc.PID(), "gpus", last.Devices)
			s.running.Add(1)
			go s.watch(att)
			return
		}
		s.stopStray(lj, last, proc, "not adoptable")
		if r.State == api.StateRunning {
			r.State = api.StatePreempted
		}
		return
	}
	// The process is gone: how did it end?
	s.orphanMPS(last)
	code, known := localexec.ExitCode(s.exitFile(r.ID, last.N))
	last.Phase, last.Ended = store.PhaseEnded, now
	if known {
		last.ExitCode = &code
	}
	s.touch(lj)
	switch {
	case last.Stop != "" || r.State != api.StateRunning || (last.PID == 0 && !known):
		// Being stopped, or never launched: nothing to count.
		if last.Outcome == "" {
			last.Outcome = outcomeOf(last.Stop)
		}
		if r.State == api.StateRunning {
			r.State = api.StatePreempted
		}
	case known && code == 0:
		last.Outcome = "finished"
		s.finish(lj, "exit code 0 while the server was down")
	default:
		last.Outcome = "lost"
		msg := "process gone without an exit code while the server was down"
		if known {
			last.Outcome = "failed"
			msg = fmt.Sprintf("exit code %d while the server was down", code)
		}
		r.Failures++
		s.metrics.counters["attempt_failures"]++
		s.addEvent(&store.Event{Job: r.ID, Kind: "attempt-" + last.Outcome, Attempt: last.N, Message: msg})
		if why := s.noRetry(r.ID, code, known); why != "" {
			s.fail(lj, fmt.Sprintf("%s (attempt %d): %s: not retried", msg, last.N, why))
		} else if r.Failures > s.maxRetries(r) {
			s.fail(lj, fmt.Sprintf("%s (attempt %d); %d failures, retry limit %d", msg, last.N, r.Failures, s.maxRetries(r)))
		} else {
			r.State = api.StatePreempted // waits for the scheduler to restart it
		}
	}
}

// endGone records ended, at now, a recovered attempt whose process is
// gone and whose end does not count: it was being stopped, or its job is
// over. Under mu.
func (s *Server) endGone(lj *liveJob, a *store.Attempt, now float64) {
	s.orphanMPS(a)
	code, known := localexec.ExitCode(s.exitFile(lj.rec.ID, a.N))
	a.Phase, a.Ended = store.PhaseEnded, now
	if known {
		a.ExitCode = &code
	}
	switch {
	case a.Outcome != "":
	case a.Stop == "" && api.Terminal(lj.rec.State):
		a.Outcome = lj.rec.State
	default:
		a.Outcome = outcomeOf(a.Stop)
	}
	s.touch(lj)
}

// find looks for the process of a recorded attempt.
func (s *Server) find(r *store.Job, a *store.Attempt) *localexec.Proc {
	exit := s.exitFile(r.ID, a.N)
	if a.PID > 0 {
		if p, ok := localexec.Adopt(a.PID, a.StartTicks, exit); ok {
			return p
		}
		return nil
	}
	// Launched, but the server died before recording the pid?
	if p, ok := localexec.FindByPIDFile(s.pidFile(r.ID, a.N), exit, r.ID, a.N); ok {
		a.PID, a.StartTicks = p.PID(), p.StartTicks()
		return p
	}
	return nil
}

// stopStray stops a recovered process that must not keep running, and
// keeps its GPUs busy until it is gone. Called under mu.
func (s *Server) stopStray(lj *liveJob, a *store.Attempt, proc *localexec.Proc, why string) {
	gpus, _ := s.gpuIDs(a)
	att := &attempt{lj: lj, n: a.N, gpus: gpus, devs: a.Devices, done: make(chan struct{}), wake: make(chan struct{}), proc: proc, stop: "recovery",
		frac: lj.j != nil && lj.j.Fractional()}
	lj.last = att
	for _, g := range gpus {
		// Listed with the GPU's sharers, not as its holder: several
		// leftovers may be on one GPU (parts, a packed pair), and each
		// later attempt there must wait for every one of them (claim
		// waits for each sharer being stopped).
		if s.sharing == nil {
			s.sharing = make(map[cluster.GPUID][]*attempt)
		}
		s.sharing[g] = append(s.sharing[g], att)
	}
	if a.MPS && len(a.Devices) == 1 && s.mps.Available() {
		// Its daemon serves it until it is gone, then goes with it.
		s.mps.Adopt(a.Devices[0])
		att.mpsHeld = true
	}
	a.Phase, a.Stop, a.PID, a.StartTicks = store.PhaseStopping, "recovery", proc.PID(), proc.StartTicks()
	s.touch(lj)
	s.addEvent(&store.Event{Job: lj.rec.ID, Kind: "stopping", Attempt: a.N, Message: "stopping a leftover process: " + why})
	s.running.Add(1)
	s.after = append(s.after, func() {
		go proc.Stop(s.cfg.Grace)
		go s.watch(att)
	})
}

// gpuIDs maps a recorded attempt's GPUs to this cluster's, checking that
// they still are the same devices.
func (s *Server) gpuIDs(a *store.Attempt) ([]cluster.GPUID, bool) {
	if len(a.GPUs) != len(a.Devices) {
		return nil, false
	}
	var out []cluster.GPUID
	for i, g := range a.GPUs {
		if g < 0 || g >= len(s.devices) || s.devices[g] != a.Devices[i] {
			return nil, false
		}
		out = append(out, cluster.GPUID(g))
	}
	return out, true
}

func (s *Server) maxRetries(r *store.Job) int {
	if r.Spec.MaxRetries != nil {
		return *r.Spec.MaxRetries
	}
	return s.cfg.MaxRetries
}

func (s *Server) jobDir(id string) string { return filepath.Join(s.jobsDir, id) }
func (s *Server) logFile(id string) string {
	return filepath.Join(s.jobDir(id), "output.log")
}
func (s *Server) exitFile(id string, n int) string {
	return filepath.Join(s.jobDir(id), "attempt-"+strconv.Itoa(n)+".exit")
}
func (s *Server) pidFile(id string, n int) string {
	return filepath.Join(s.jobDir(id), "attempt-"+strconv.Itoa(n)+".pid")
}
func (s *Server) reportFile(id string) string {
	return filepath.Join(s.jobDir(id), "report.jsonl")
}
func (s *Server) checkpointDir(id string) string {
	return filepath.Join(s.jobDir(id), "checkpoint")
}

// touch marks a record for the next commit. Under mu.
func (s *Server) touch(lj *liveJob) { s.dirty[lj] = true }

// addEvent queues an event for the next commit. Under mu.
func (s *Server) addEvent(e *store.Event) {
	e.Time = s.clk.Now()
	s.events = append(s.events, e)
}

// commit writes the changed records (with the engine's counters) and the
// queued events in one transaction, then runs the actions that waited for
// them. Called under mu, it releases mu during the write (writes stay in
// order: wmu is taken before mu is let go), so submissions and reports
// are not held up by an fsync. On a write error the changes stay queued
// for the next commit and the actions run anyway: the processes must be
// driven.
func (s *Server) commit() error {
	if s.db == nil {
		return errors.New("server: closed")
	}
	var err error
	acts := s.after
	s.after = nil
	if len(s.dirty) > 0 || len(s.events) > 0 || s.polState != nil {
		polState := s.polState
		s.polState = nil
		recs := make([]*store.Job, 0, len(s.dirty))
		dirty := make([]*liveJob, 0, len(s.dirty))
		for lj := range s.dirty {
			s.syncEngine(lj)
			recs = append(recs, lj.rec.Clone())
			dirty = append(dirty, lj)
		}
		events := s.events
		clear(s.dirty)
		s.events = nil
		db := s.db
		s.wmu.Lock()
		s.writing++
		s.mu.Unlock()
		// Batch: the write shares its commit (and fsync) with concurrent
		// submissions.
		err = db.Batch(func(tx *store.Tx) error {
			for _, r := range recs {
				if err := tx.PutJob(r); err != nil {
					return err
				}
			}
			for _, e := range events {
				if err := tx.AddEvent(e); err != nil {
					return err
				}
			}
			return putPolicyState(tx, polState)
		})
		s.wmu.Unlock()
		s.mu.Lock() // not lock: the caller may be amid a walk of s.order
		s.writing--
		if s.writing == 0 {
			s.idle.Broadcast()
		}
		if err != nil {
			s.log.Error("store write failed", "err", err)
			for _, lj := range dirty {
				s.dirty[lj] = true
			}
			s.events = append(events, s.events...)
			if s.polState == nil {
				s.polState = polState
			}
		} else {
			s.lastSave = time.Now()
		}
	}
	for _, f := range acts {
		f()
	}
	return err
}

// syncEngine copies the engine's counters into a job's record. Under mu.
func (s *Server) syncEngine(lj *liveJob) {
	if lj.j == nil {
		return
	}
	st := s.eng.Job(lj.rec.ID)
	if st == nil {
		return
	}
	lj.rec.Engine = store.EngineStats{Attained: st.Attained, Executed: st.Executed, Waited: st.Waited,
		Starts: st.Starts, Preemptions: st.Preemptions, Resizes: st.Resizes, FirstStart: max(st.FirstStart, 0),
		LastStop: st.LastStop, Memo: st.Memo}
}

// Start serves the API on ln (over TLS when Config.TLSCert is set) and
// starts scheduling.
func (s *Server) Start(ln net.Listener) {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.lock()
	s.report = s.cfg.ReportURL
	// Over TLS, jobs report through their report file.
	if s.report == "" && s.tls == nil {
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		s.report = "http://" + net.JoinHostPort(host, port)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.loops.Add(3)
	go func() {
		defer s.loops.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	go func() { defer s.loops.Done(); s.scheduleLoop(ctx) }()
	go func() { defer s.loops.Done(); s.monitorLoop(ctx) }()
	s.log.Info("tide serve started", "listen", ln.Addr().String(), "policy", s.policyName, "placer", s.placerName,
		"gpus", s.cluster.String(), "data_dir", s.cfg.DataDir)
	s.kickRound()
}

// Close stops serving. Running jobs keep running (to be re-adopted by the
// next server) unless Config.StopJobsOnExit, in which case they are stopped
// and restart from their checkpoints at the next start. Whatever was
// accepted before (reports, launches, state changes) is durable in the
// store when Close returns: it waits for writes still in flight.
func (s *Server) Close(ctx context.Context) error {
	var errs []error
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.loops.Wait()
	s.lock()
	if s.closed {
		s.mu.Unlock()
		return errors.Join(errs...)
	}
	s.closed = true
	if s.cfg.StopJobsOnExit {
		for _, lj := range s.order {
			if lj.att != nil {
				s.stopAttempt(lj.att, "shutdown")
				lj.att = nil
			}
		}
	}
	if err := s.commit(); err != nil {
		errs = append(errs, err)
	}
	// A launch in flight is recorded (its pid, or why it did not start)
	// before the store closes. Left running, its process would otherwise
	// be unknown to the store, and the next server, finding no pid file
	// yet, would take the attempt as never launched and start the job
	// again beside it (TestRandomOperations under load, after a restart).
	for s.inLaunch > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	if s.cfg.StopJobsOnExit {
		s.running.Wait()
		s.mpsStops.Wait() // a daemon left running would outlive its jobs
		s.lock()
		if err := s.commit(); err != nil {
			errs = append(errs, err)
		}
		s.mu.Unlock()
	}
	s.lock()
	if err := s.flush(); err != nil {
		errs = append(errs, err)
	}
	err := s.db.Close()
	s.db = nil
	s.mu.Unlock()
	if err != nil {
		errs = append(errs, err)
	}
	// A daemon whose last job ended before the store closed is stopped
	// before Close returns, jobs left running or not: the store says no
	// job holds it, so the next server starts it afresh for the next part,
	// and a stop still in flight would then stop that one, or be cut off
	// by tide serve's exit and leave this one running beside it. With the
	// store closed no attempt ends here any more (watch), so nothing adds
	// to mpsStops now.
	s.mpsStops.Wait()
	return errors.Join(errs...)
}

// flush returns once no commit's write is in flight and nothing waits to
// be written, so that the store may be closed: a commit from an attempt
// goroutine may have taken the changes (a report, a launch) just before
// Close and still be writing them, or have failed and queued them again.
// Under mu, which it lets go while it waits.
func (s *Server) flush() error {
	for {
		for s.writing > 0 {
			s.idle.Wait()
		}
		if len(s.dirty) == 0 && len(s.events) == 0 {
			return nil
		}
		if err := s.commit(); err != nil {
			return err
		}
	}
}

func (s *Server) kickRound() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
