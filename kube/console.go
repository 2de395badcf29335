package kube

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/console"
	"github.com/tide-sched/tide/engine"
)

// ServeConsole serves the web console (package console) on ln until ctx
// ends: the engine's decisions and the pods the informers list, read-only
// (tide kube does not cancel, hold or release). tokens authenticates;
// samples, when not nil, keeps the utilisation history across restarts.
func (s *Scheduler) ServeConsole(ctx context.Context, ln net.Listener, tokens *console.Tokens, samples console.SampleStore) error {
	c := console.New(consoleSource{s: s, tokens: tokens}, console.Options{Samples: samples, Logger: s.log})
	go c.Run(ctx)
	ui := c.Handler()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", ui)
	mux.Handle("/ui/", ui)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(c.Close)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// consoleSource is the scheduler as the console's Source and Replayer.
type consoleSource struct {
	s      *Scheduler
	tokens *console.Tokens
}

func (cs consoleSource) Auth(token string) (console.Principal, bool) { return cs.tokens.Auth(token) }

func (cs consoleSource) Snapshot() (*console.Snapshot, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &console.Snapshot{Time: console.Unix(s.cfg.Clock.Now()), Kind: "tide kube", Policy: s.pol.Name(), Quotas: s.cfg.Quotas}
	for t := range s.cfg.Quotas {
		out.Tenants = append(out.Tenants, t)
	}
	sort.Strings(out.Tenants)
	if s.eng == nil {
		return out, nil // no round has seen GPUs yet
	}
	out.Rounds = s.eng.Rounds()
	out.Nodes = console.EngineNodes(s.eng.Snapshot().Cluster, s.eng, nil)
	out.Nodes = s.outsideGPUs(out.Nodes)
	for id, w := range s.work {
		st := s.eng.Job(id)
		if st == nil {
			continue
		}
		out.Jobs = append(out.Jobs, consoleJob(id, w, st))
	}
	return out, nil
}

// outsideGPUs adds to the engine's nodes the GPUs the last round left out
// of its cluster: those held by pods tide does not schedule (taken back
// from tide) and those of cordoned or NotReady nodes (down), with nodes
// the engine has none of. Under mu.
func (s *Scheduler) outsideGPUs(nodes []console.Node) []console.Node {
	v := s.seen
	if v == nil {
		return nodes
	}
	at := make(map[string]int, len(nodes))
	for i := range nodes {
		at[nodes[i].Name] = i
	}
	names := make([]string, 0, len(v.nodes))
	for n := range v.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		i, ok := at[name]
		if !ok {
			typ := s.gpuType(v.nodes[name])
			// The node's own labels name its site; one whose kind label
			// tide does not know shows in the default cloud site, as
			// the warning about it says it is left out.
			site, kind, why := s.cfg.Sites.siteOf(v.nodes[name])
			if why != "" {
				site, kind = "default", cluster.SiteCloud
			}
			nodes = append(nodes, console.Node{Name: name, GPUType: typ, Site: site, SiteKind: kind})
			i = len(nodes) - 1
		}
		n := &nodes[i]
		rest := v.alloc[name] - len(n.GPUs)
		taken := min(max(0, v.foreign[name]), rest)
		why := "node " + name + " is NotReady"
		if st := v.states[name]; st != nil && st.node.Spec.Unschedulable {
			why = "node " + name + " is cordoned"
		}
		for k := 0; k < rest; k++ {
			g := console.GPU{Label: strconv.Itoa(len(n.GPUs))}
			if k < taken {
				g.Reclaimed, g.Why = true, "held by pods tide does not schedule"
			} else {
				g.Down, g.Why = true, why
			}
			n.GPUs = append(n.GPUs, g)
		}
	}
	return nodes
}

// consoleJob is the console's row of a workload. Under mu.
func consoleJob(id string, w *workload, st *engine.Status) console.Job {
	j := console.Job{ID: id, Name: w.ns + "/" + w.name, Tenant: w.tenant, State: string(st.State),
		Submitted: console.Unix(w.created)}
	if st.FirstStart > 0 {
		t := console.Unix(st.FirstStart)
		j.Started = &t
	}
	if st.Finish > 0 {
		t := console.Unix(st.Finish)
		j.Ended = &t
	}
	console.FromStatus(&j, st)
	if st.Work > 0 {
		j.Progress = min(1, st.Progress/st.Work)
	}
	if st.State.Terminal() {
		j.Held, j.RemainingS = 0, 0
		return j
	}
	// Useful when every pod of the job runs.
	running := 0
	for _, p := range w.pods {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	j.Working = j.Held > 0 && running == len(w.pods)
	return j
}

func (cs consoleSource) Detail(p console.Principal, id string) (*console.Detail, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.work[id]
	if s.eng == nil || w == nil || !(p.Admin || p.Tenant == w.tenant) {
		return nil, console.ErrNotFound
	}
	st := s.eng.Job(id)
	if st == nil {
		return nil, console.ErrNotFound
	}
	d := &console.Detail{Job: consoleJob(id, w, st), Events: []console.Event{}}
	for _, pod := range w.pods {
		msg := pod.Name
		if n := s.nodeOf(pod); n != "" {
			msg += " on " + n
		}
		d.Events = append(d.Events, console.Event{Time: pod.CreationTimestamp.Time, Kind: "pod " + string(pod.Status.Phase), Message: msg})
	}
	d.Events, d.Attempts = append(d.Events, engineMoments(st)...), engineAttempt(st)
	sort.SliceStable(d.Events, func(a, b int) bool { return d.Events[a].Time.Before(d.Events[b].Time) })
	d.LogTail = "(tide kube does not read pod logs: kubectl logs -n " + w.ns + " POD)"
	return d, nil
}

// engineMoments are the starts, resizes and preemptions of a job the
// engine remembers (it keeps the first start, the last start or resize and
// the last stop, not each one), for the job view's timeline.
func engineMoments(st *engine.Status) []console.Event {
	var out []console.Event
	if st.FirstStart >= 0 {
		out = append(out, console.Event{Time: console.Unix(st.FirstStart), Kind: "start", Message: "first start"})
	}
	if st.Preemptions > 0 && st.LastStop > st.FirstStart {
		msg := fmt.Sprintf("the last of %d preemption(s)", st.Preemptions)
		if r := st.Reason(); st.State.Waiting() && r.Text != "" {
			msg += ": " + api.WallReason(r.Text)
		}
		out = append(out, console.Event{Time: console.Unix(st.LastStop), Kind: "preempted", Message: msg})
	}
	if st.LastStart > st.FirstStart { // the last start or resize
		e := console.Event{Time: console.Unix(st.LastStart), Kind: "restart"}
		switch {
		case st.Resizes == 0:
			e.Message = fmt.Sprintf("start %d, the last", st.Starts)
		case st.Starts <= 1:
			e.Kind, e.Message = "resized", fmt.Sprintf("the last of %d resize(s)", st.Resizes)
		default:
			e.Message = fmt.Sprintf("the last start or resize (%d starts, %d resizes)", st.Starts, st.Resizes)
		}
		out = append(out, e)
	}
	return out
}

// engineAttempt is a job's last launch (the engine keeps no earlier ones):
// from its last start to its end, to its preemption, or on while it runs;
// nil when it never started.
func engineAttempt(st *engine.Status) []console.Attempt {
	if st.LastStart < 0 {
		return nil
	}
	t := console.Unix(st.LastStart)
	a := console.Attempt{N: st.Starts, GPUs: []int{}, Started: &t, Outcome: "running"}
	end := -1.0
	switch {
	case st.Finish >= 0:
		end, a.Outcome = st.Finish, string(st.State)
	case st.State.Waiting() && st.LastStop >= st.LastStart:
		end, a.Outcome = st.LastStop, "preempted"
	}
	if end >= 0 {
		e := console.Unix(end)
		a.Ended = &e
	}
	return []console.Attempt{a}
}

func (cs consoleSource) Replay() (*console.Replay, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng == nil {
		return nil, errors.New("no scheduling round has seen GPUs yet")
	}
	// The replay places with "pack": the worker placer tide kube uses is
	// its own (whole workers per node).
	r := console.EngineReplay(s.eng, s.eng.Snapshot().Cluster, s.cfg.Policy, "pack", s.cfg.Round.Seconds(), console.Unix(s.cfg.Clock.Now()))
	// The quotas in force apply over the policy, as in the rounds.
	s.quota.mu.Lock()
	if q := s.quota.q; q != nil {
		c := *q
		r.Quota = &c
	}
	s.quota.mu.Unlock()
	return r, nil
}

// UIFlags are tide kube's web console flags (docs/console.md).
type UIFlags struct {
	Listen, Tokens, History string
}

// Register adds --ui-listen and --ui-tokens to fs.
func (u *UIFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&u.Listen, "ui-listen", "", "`ADDR` (host:port) to serve the web console on, a port of its own (default: no console; docs/console.md)")
	fs.StringVar(&u.Tokens, "ui-tokens", "", "`FILE` of console tokens, one 'TENANT TOKEN' a line; tenant 'admin' sees everything (required with --ui-listen)")
	fs.StringVar(&u.History, "ui-history", "", "`FILE` keeping the console's utilisation history (24 h) across restarts, on a volume that outlives the pod (default: the history starts with the process)")
}

// Start serves the console in the background until ctx ends, when
// --ui-listen is set, and returns its URL ("" when off). Bad flags, an
// unreadable token file and a port in use are errors.
func (u *UIFlags) Start(ctx context.Context, s *Scheduler) (string, error) {
	if u.Listen == "" {
		if u.Tokens != "" || u.History != "" {
			return "", errors.New("--ui-tokens or --ui-history without --ui-listen: give the console's address too")
		}
		return "", nil
	}
	if u.Tokens == "" {
		return "", errors.New("--ui-listen needs --ui-tokens FILE (one 'TENANT TOKEN' a line)")
	}
	toks, err := console.LoadTokens(u.Tokens)
	if err != nil {
		return "", fmt.Errorf("--ui-tokens: %w", err)
	}
	var samples console.SampleStore
	if u.History != "" {
		f, err := console.OpenSampleFile(u.History)
		if err != nil {
			return "", fmt.Errorf("--ui-history: %w", err)
		}
		samples = f
	}
	ln, err := net.Listen("tcp", u.Listen)
	if err != nil {
		return "", fmt.Errorf("--ui-listen: %w", err)
	}
	go func() {
		if err := s.ServeConsole(ctx, ln, toks, samples); err != nil {
			s.log.Error("web console", "err", err)
		}
	}()
	return "http://" + ln.Addr().String() + "/", nil
}
