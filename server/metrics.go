package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/tide-sched/tide/engine"
)

// roundBuckets are the upper bounds of the round-duration histogram, s.
var roundBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// metrics are the server's counters; guarded by Server.mu.
type metrics struct {
	rounds      uint64
	roundCounts []uint64 // per bucket, not cumulative; the last is +Inf
	roundSum    float64
	counters    map[string]uint64 // tide_jobs_<kind>_total, by kind
	requests    map[int]uint64    // HTTP responses by status code; guarded by Server.mmu
	warnings    map[string]uint64 // policy warnings by kind (engine.Warning.Kind)
}

func newMetrics() metrics {
	return metrics{roundCounts: make([]uint64, len(roundBuckets)+1), counters: map[string]uint64{}, requests: map[int]uint64{}, warnings: map[string]uint64{}}
}

func (m *metrics) observeRound(seconds float64) {
	m.rounds++
	m.roundSum += seconds
	i := sort.SearchFloat64s(roundBuckets, seconds)
	m.roundCounts[i]++
}

// counterHelp lists the event counters in the order they are exposed.
var counterHelp = []struct{ kind, help string }{
	{"submitted", "Jobs accepted."},
	{"started", "First launches of jobs."},
	{"restarted", "Relaunches after a preemption, resize or failure."},
	{"preempted", "Preemptions: running jobs stopped by the scheduler."},
	{"resized", "Resizes: running jobs moved to a different GPU set."},
	{"finished", "Jobs that exited 0."},
	{"failed", "Jobs that failed past their retry limit."},
	{"cancelled", "Jobs cancelled by a client."},
	{"declined", "Jobs a deadline policy refused at admission."},
	{"attempt_failures", "Attempts that exited non-zero or were lost."},
	{"adopted", "Running jobs re-adopted after a server restart."},
	{"requeued", "Jobs put back in the queue (tide requeue)."},
}

// writeMetrics writes the Prometheus text exposition format (version 0.0.4).
func (s *Server) writeMetrics(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.lock()
	queued, running, sharing := 0, 0, 0
	for _, st := range s.eng.Active() {
		if len(st.GPUs) > 0 {
			running++
			if st.PackedWith != "" || st.Job.Fractional() {
				sharing++
			}
		} else {
			queued++
		}
	}
	states := map[string]int{}
	for _, lj := range s.order {
		states[lj.rec.State]++
	}
	alloc, total := s.eng.Allocated(), s.cluster.TotalGPUs()
	m := s.metrics
	counts := append([]uint64(nil), m.roundCounts...)
	counters := map[string]uint64{}
	for k, v := range m.counters {
		counters[k] = v
	}
	fallbacks, dropped := m.warnings[engine.WarnFallback], m.warnings[engine.WarnDropped]
	s.mu.Unlock()
	reqs := map[int]uint64{}
	s.mmu.Lock()
	for k, v := range m.requests {
		reqs[k] = v
	}
	s.mmu.Unlock()

	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, num(v))
	}
	gauge("tide_queue_length", "Jobs waiting for GPUs (pending or preempted).", float64(queued))
	gauge("tide_running_jobs", "Jobs holding GPUs.", float64(running))
	gauge("tide_running_jobs_sharing", "Running jobs that share their GPUs: packed pairs' members and jobs holding parts of GPUs.", float64(sharing))
	gauge("tide_gpus_total", "GPUs the server schedules.", float64(total))
	gauge("tide_gpus_allocated", "GPUs held by jobs.", float64(alloc))
	fmt.Fprintf(w, "# HELP tide_jobs Jobs known to the server, by state.\n# TYPE tide_jobs gauge\n")
	for _, st := range []string{"pending", "running", "preempted", "finished", "failed", "cancelled", "declined"} {
		fmt.Fprintf(w, "tide_jobs{state=%q} %d\n", st, states[st])
	}
	fmt.Fprintf(w, "# HELP tide_round_duration_seconds Time one scheduling round takes.\n# TYPE tide_round_duration_seconds histogram\n")
	var cum uint64
	for i, b := range roundBuckets {
		cum += counts[i]
		fmt.Fprintf(w, "tide_round_duration_seconds_bucket{le=%q} %d\n", num(b), cum)
	}
	cum += counts[len(roundBuckets)]
	fmt.Fprintf(w, "tide_round_duration_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(w, "tide_round_duration_seconds_sum %s\ntide_round_duration_seconds_count %d\n", num(m.roundSum), m.rounds)
	for _, c := range counterHelp {
		name := "tide_jobs_" + c.kind + "_total"
		if c.kind == "preempted" {
			name = "tide_preemptions_total"
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, c.help, name, name, counters[c.kind])
	}
	fmt.Fprintf(w, "# HELP tide_policy_fallbacks_total Rounds in which the policy fell back to a simpler rule (a solver failed); the events say why.\n# TYPE tide_policy_fallbacks_total counter\ntide_policy_fallbacks_total %d\n", fallbacks)
	fmt.Fprintf(w, "# HELP tide_policy_dropped_total Assignments the engine dropped from the policy's plans because no placement could honour them for their job (the job's events say which and why).\n# TYPE tide_policy_dropped_total counter\ntide_policy_dropped_total %d\n", dropped)
	codes := make([]int, 0, len(reqs))
	for c := range reqs {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	fmt.Fprintf(w, "# HELP tide_http_responses_total API responses by status code.\n# TYPE tide_http_responses_total counter\n")
	for _, c := range codes {
		fmt.Fprintf(w, "tide_http_responses_total{code=\"%d\"} %d\n", c, reqs[c])
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
