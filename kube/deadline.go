package kube

import (
	"fmt"
	"io"
)

// Deadlines. A TideJob with spec.deadline reports in status.deadlineOutcome
// whether it met it: Met once it succeeded by then, Missed once the
// deadline passed before it succeeded (a running or waiting job misses it
// as soon as it passes). A job the policy declines at admission (EDF,
// ElasticFlow, EdgeFlow: a deadline it cannot meet) is phase Declined with
// the policy's reason, and counts as declined, not missed. Times are the
// engine's clock (Config.Clock). Metrics: tide_deadlines_met_total,
// tide_deadlines_missed_total, tide_declined_total.

// Deadline outcomes.
const (
	DeadlineMet    = "Met"
	DeadlineMissed = "Missed"
)

// deadlines counts outcomes, each TideJob once.
type deadlines struct {
	said                 map[string]string // workload key -> outcome (or "Declined") counted
	met, missed, decline int
}

// withDeadline adds w's deadline outcome to out (the status statusOf
// made) and counts it the first time it is known. A succeeded job keeps
// the outcome it was given when it ended.
func (s *Scheduler) withDeadline(w *workload, out TideJobStatus) TideJobStatus {
	d := &s.deadlines
	if d.said == nil {
		d.said = map[string]string{}
	}
	deadline := w.deadline
	if st := s.eng.Job(s.ids[w.key]); st != nil {
		deadline = st.Job.Deadline // in the engine's clock (a live driver's may differ)
	}
	outcome := ""
	switch {
	case out.Phase == PhaseDeclined:
		outcome = PhaseDeclined
	case deadline <= 0:
	case out.Phase == PhaseSucceeded && w.tj.Status.DeadlineOutcome != "":
		outcome = w.tj.Status.DeadlineOutcome
	case out.Phase == PhaseSucceeded && s.cfg.Clock.Now() <= deadline:
		outcome = DeadlineMet
	case s.cfg.Clock.Now() > deadline && out.Phase != PhaseFailed && out.Phase != PhaseInvalid:
		outcome = DeadlineMissed
	}
	if outcome != PhaseDeclined {
		out.DeadlineOutcome = outcome
	}
	if outcome != "" && d.said[w.key] != outcome {
		switch outcome {
		case DeadlineMet:
			d.met++
		case DeadlineMissed:
			d.missed++
		case PhaseDeclined:
			d.decline++
		}
		d.said[w.key] = outcome
	}
	return out
}

// forgetDeadlines drops what is counted of TideJobs no longer listed.
func (s *Scheduler) forgetDeadlines(v *view) {
	for k := range s.deadlines.said {
		if v.work[k] == nil {
			delete(s.deadlines.said, k)
		}
	}
}

func writeDeadlineMetrics(w io.Writer, st Stats) {
	for _, m := range []struct {
		name, help string
		v          int
	}{
		{"tide_deadlines_met_total", "TideJobs that succeeded by their deadline.", st.DeadlinesMet},
		{"tide_deadlines_missed_total", "TideJobs whose deadline passed before they succeeded.", st.DeadlinesMissed},
		{"tide_declined_total", "TideJobs the policy declined at admission (a deadline it cannot meet).", st.Declined},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
}
