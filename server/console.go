package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/console"
	"github.com/tide-sched/tide/store"
)

// consoleHandler is the web console (package console) reading this
// server. Its history sampler runs until the server closes; its live
// streams end when the HTTP server shuts down.
func (s *Server) consoleHandler() http.Handler {
	c := console.New(consoleSource{s}, console.Options{SampleEvery: s.cfg.ConsoleSample, Samples: sampleStore{s.db}, Logger: s.log})
	go c.Run(context.Background())
	h := c.Handler()
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// s.http is set before it serves (Start), so it is safe to read
		// here; without it (a handler used on its own) streams end with
		// their requests.
		once.Do(func() {
			if s.http != nil {
				s.http.RegisterOnShutdown(c.Close)
			}
		})
		h.ServeHTTP(w, r)
	})
}

// sampleStore keeps the console's utilisation history in the database.
type sampleStore struct{ db *store.DB }

func (ss sampleStore) SaveSample(at time.Time, data []byte, forget time.Time) error {
	return ss.db.Update(func(tx *store.Tx) error { return tx.PutSample(at, data, forget) })
}

func (ss sampleStore) LoadSamples(from time.Time) ([][]byte, error) {
	var out [][]byte
	err := ss.db.View(func(tx *store.Tx) error {
		return tx.Samples(from, func(data []byte) error {
			out = append(out, append([]byte(nil), data...))
			return nil
		})
	})
	return out, err
}

// consoleSource is the server as the console's Source, Actor and Replayer.
type consoleSource struct{ s *Server }

// logTail is how much of a job's log the job view shows, bytes.
const logTail = 16 << 10

func (cs consoleSource) Auth(token string) (console.Principal, bool) {
	s := cs.s
	s.tmu.RLock()
	t := s.tokens[store.HashToken(token)]
	s.tmu.RUnlock()
	if t == nil {
		return console.Principal{}, false
	}
	return console.Principal{Tenant: t.Name, Admin: t.Admin}, true
}

func (cs consoleSource) Snapshot() (*console.Snapshot, error) {
	s := cs.s
	s.tmu.RLock()
	var names []string
	quotas := map[string]int{}
	for _, t := range s.tenants {
		if !t.Admin {
			names = append(names, t.Name)
		}
		if t.Limits.MaxGPUs > 0 {
			quotas[t.Name] = t.Limits.MaxGPUs
		}
	}
	s.tmu.RUnlock()
	s.lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, console.ErrClosed
	}
	out := &console.Snapshot{Time: console.Unix(s.clk.Now()), Kind: "tide serve", Policy: s.policyName, Placer: s.placerName,
		Rounds: s.eng.Rounds(), Tenants: names, Quotas: quotas, Unquoted: true}
	out.Nodes = console.EngineNodes(s.cluster, s.eng, func(g cluster.GPUID) string { return "GPU " + strconv.Itoa(s.devices[g]) })
	out.Jobs = make([]console.Job, len(s.order))
	for i, lj := range s.order {
		s.consoleJob(&out.Jobs[i], lj)
	}
	return out, nil
}

// consoleJob fills the console's row of a job. Under mu.
func (s *Server) consoleJob(j *console.Job, lj *liveJob) {
	r := lj.rec
	*j = console.Job{ID: r.ID, Name: r.Spec.Name, Tenant: r.Tenant, State: r.State, GPUs: r.Spec.GPUs,
		Submitted: console.Unix(r.Submitted), Started: toTime(r.FirstStart), Ended: toTime(r.Ended),
		Progress: r.Progress, Throughput: r.Throughput, Preemptions: r.Preemptions, Restarts: r.Restarts,
		Message: r.Message, Reason: r.Reason}
	if r.Spec.Deadline != "" {
		if t, err := time.Parse(time.RFC3339, r.Spec.Deadline); err == nil {
			j.Deadline = &t
		}
	}
	if api.Terminal(r.State) || lj.j == nil {
		return
	}
	if st := s.eng.Job(r.ID); st != nil {
		console.FromStatus(j, st)
	}
	j.Working = lj.att != nil && lj.att.proc != nil && lj.att.stop == ""
	if r.Held && lj.att == nil {
		j.State = console.StateHeld
	}
}

func (cs consoleSource) Detail(p console.Principal, id string) (*console.Detail, error) {
	s := cs.s
	s.lock()
	lj := s.jobs[id]
	if lj == nil || !(p.Admin || lj.rec.Tenant == p.Tenant) {
		s.mu.Unlock()
		return nil, console.ErrNotFound
	}
	d := &console.Detail{Command: append([]string(nil), lj.rec.Spec.Command...)}
	s.consoleJob(&d.Job, lj)
	for _, a := range lj.rec.Attempts {
		out := a.Outcome
		if out == "" {
			out = a.Phase
		}
		d.Attempts = append(d.Attempts, console.Attempt{N: a.N, GPUs: append([]int(nil), a.Devices...), Started: toTime(a.Started), Ended: toTime(a.Ended), Outcome: out})
	}
	if pv := s.perfView(lj); pv != nil {
		for _, pt := range pv.Predicted {
			d.Goodput = append(d.Goodput, console.GoodputPoint{GPUs: pt.GPUs, Throughput: pt.Throughput, Speedup: pt.Speedup})
		}
	}
	// The job's events: those written (wmu after mu, as commit takes
	// them, waits for a commit in flight) and those still queued.
	s.wmu.Lock()
	var evs []store.Event
	err := s.db.View(func(tx *store.Tx) error {
		var err error
		evs, err = tx.Events(id)
		return err
	})
	s.wmu.Unlock()
	for _, e := range s.events {
		if e.Job == id {
			evs = append(evs, *e)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s: %w", id, err)
	}
	d.Events = make([]console.Event, 0, len(evs))
	for _, e := range evs {
		d.Events = append(d.Events, console.Event{Time: console.Unix(e.Time), Kind: e.Kind, Message: e.Message})
	}
	d.LogTail, err = tail(s.logFile(id), logTail)
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, err)
	}
	return d, nil
}

// tail reads the last n bytes of a file ("" when it does not exist).
func tail(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	off := max(0, fi.Size()-n)
	data, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	return string(data), err
}

// Actions: owners cancel, hold and release their jobs, as with the API.
func (cs consoleSource) Actions() []string { return []string{"cancel", "hold", "release"} }

func (cs consoleSource) Act(p console.Principal, id, action string) error {
	s := cs.s
	switch action {
	case "cancel", "hold", "release":
	default:
		return &console.ActionError{Msg: "tide serve does not " + action + " jobs"}
	}
	s.lock()
	lj := s.jobs[id]
	if lj == nil || !(p.Admin || lj.rec.Tenant == p.Tenant) {
		s.mu.Unlock()
		return console.ErrNotFound
	}
	var err error
	switch {
	case action != "cancel":
		var refused string
		refused, err = s.holdLocked(lj, action == "hold", p.Tenant)
		if refused != "" {
			s.mu.Unlock()
			return &console.ActionError{Msg: refused}
		}
	case api.Terminal(lj.rec.State):
		st := lj.rec.State
		s.mu.Unlock()
		return &console.ActionError{Msg: fmt.Sprintf("job %s is already %s", id, st)}
	default:
		err = s.cancelJob(lj, p.Tenant)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.kickRound()
	return nil
}

func (cs consoleSource) Replay() (*console.Replay, error) {
	s := cs.s
	s.lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, console.ErrClosed
	}
	r := console.EngineReplay(s.eng, s.cluster, s.cfg.Policy, s.placerName, s.cfg.Round.Seconds(), console.Unix(s.clk.Now()))
	// As in the rounds: the jobs that may not start yet (held, or waiting
	// for others) are left out (nothing in the replay would let them
	// start), and the tenants' quotas apply over the policy.
	if s.gated() {
		keep := r.Jobs[:0]
		for _, j := range r.Jobs {
			if s.blocked(j.ID) == "" {
				keep = append(keep, j)
			} else {
				delete(r.Age, j.ID)
			}
		}
		r.Jobs = keep
	}
	if q := s.quotas; q != nil && q.on {
		limits := make(map[string]int, len(q.quota.Limits))
		for t, n := range q.quota.Limits {
			limits[t] = n
		}
		for _, j := range r.Jobs {
			if _, ok := limits[j.Tenant]; !ok { // arrived since the last round
				limits[j.Tenant] = s.cluster.TotalGPUs()
			}
		}
		quota := q.quota
		quota.Limits = limits
		r.Quota = &quota
	}
	return r, nil
}
