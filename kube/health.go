package kube

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// health is the state /healthz, /readyz and /metrics report. Its fields are
// atomics so that the probes never wait for a round in progress.
type health struct {
	synced  atomic.Bool  // the informers' caches have synced
	elected atomic.Bool  // the scheduler runs under leader election
	leading atomic.Bool  // ... and holds the Lease
	roundAt atomic.Int64 // when the round in progress began, Unix ns; 0 between rounds
	last    atomic.Value // Stats as of the last round that ended, for /metrics during a round
}

func (h *health) begin() { h.roundAt.Store(time.Now().UnixNano()) }
func (h *health) end(st Stats) {
	h.last.Store(st)
	h.roundAt.Store(0)
}

// roundFor is how long the round in progress has run (0 between rounds).
func (h *health) roundFor() time.Duration {
	at := h.roundAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

// Handler serves the scheduler's probes and metrics:
//
//   - /healthz: 200 unless one round has been running for longer than
//     stuck (a hung round: restarting the process is the way out); a
//     standby's rounds do not run, so it is healthy while it waits;
//   - /readyz: 200 once the caches have synced, whether the scheduler leads
//     or stands by (a synced standby is ready to take over); the body says
//     which;
//   - /metrics: counters and gauges in Prometheus' text format (version
//     0.0.4), prefixed tide_.
//
// stuck <= 0 means 5 minutes.
func (s *Scheduler) Handler(stuck time.Duration) http.Handler {
	if stuck <= 0 {
		stuck = 5 * time.Minute
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if d := s.health.roundFor(); d > stuck {
			http.Error(w, fmt.Sprintf("a scheduling round has run for %v (limit %v)", d.Round(time.Second), stuck), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.health.synced.Load() {
			http.Error(w, "caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok:", s.role())
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.writeMetrics(w)
	})
	return mux
}

// role is "leading", "standing by" or "running" (no election).
func (s *Scheduler) role() string {
	switch {
	case !s.health.elected.Load():
		return "running"
	case s.health.leading.Load():
		return "leading"
	default:
		return "standing by"
	}
}

// statsNow returns the counters without waiting for a round in progress:
// during one, those as of the last round that ended.
func (s *Scheduler) statsNow() Stats {
	if s.mu.TryLock() {
		st := s.stats
		s.mu.Unlock()
		return st
	}
	if st, ok := s.health.last.Load().(Stats); ok {
		return st
	}
	return Stats{}
}

func (s *Scheduler) writeMetrics(w http.ResponseWriter) {
	st := s.statsNow()
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"tide_rounds_total", "counter", "Scheduling rounds run.", float64(st.Rounds)},
		{"tide_rebuilds_total", "counter", "Engine rebuilds (the nodes' GPUs changed, or a call failed).", float64(st.Rebuilds)},
		{"tide_round_seconds_total", "counter", "Time in rounds: reading caches, deciding and API calls.", st.RoundSeconds},
		{"tide_decide_seconds_total", "counter", "Time in the engine's decisions alone.", st.DecideSeconds},
		{"tide_decide_seconds_max", "gauge", "Longest single decision so far.", st.MaxDecideSeconds},
		{"tide_pods_bound_total", "counter", "Pods bound.", float64(st.Bound)},
		{"tide_bind_errors_total", "counter", "Binding calls that failed.", float64(st.BindErrors)},
		{"tide_pods_evicted_total", "counter", "Pods evicted (preempted).", float64(st.Evicted)},
		{"tide_evict_errors_total", "counter", "Eviction calls that failed (a PodDisruptionBudget, for one).", float64(st.EvictErrors)},
		{"tide_pods_created_total", "counter", "TideJob worker pods created.", float64(st.Created)},
		{"tide_create_errors_total", "counter", "Worker pod creations that failed.", float64(st.CreateErrors)},
		{"tide_round_running_seconds", "gauge", "How long the round in progress has run (0 between rounds).", s.health.roundFor().Seconds()},
		{"tide_caches_synced", "gauge", "1 once the informers' caches have synced.", b2f(s.health.synced.Load())},
		{"tide_leader", "gauge", "1 while this replica schedules (holds the Lease, or runs without election).",
			b2f(s.health.leading.Load() || !s.health.elected.Load())},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
	writeTidalMetrics(w, st)
	writeDeadlineMetrics(w, st)
}
