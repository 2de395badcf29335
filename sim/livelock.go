package sim

import (
	"fmt"
	"math"
)

// livelockWindow is how long, in simulated seconds, jobs may stay active
// with none finishing, none arriving and none getting further than it ever
// got before the run fails. A year: far longer than any job of a shipped
// trace runs, and reached in about a second of wall time by a run that
// goes nowhere.
const livelockWindow = 365 * 86400.0

// livelock watches for a run that can never end although something keeps
// happening, so the stuck test (nothing runs, nothing to come) never fires:
// nodes that fail faster than a job reaches its next checkpoint (a faults
// sweep run at --points 1, an MTBF of one second) roll every job back, round
// after round, forever. Once per window it brings the running jobs up to date
// (trim: the same results, bit for bit, as without it) and compares each
// active job's progress with the most it had at the last check.
type livelock struct {
	next  float64   // simulated time of the next check; 0 = not set
	done  int       // jobs finished at the last check
	seen  int       // jobs arrived at the last check
	most  []float64 // by job index: the most progress seen at a check
	since float64   // time of the last check that saw progress
}

// checkLivelock runs at time t of the loop, with arrived jobs submitted so
// far. It returns an error when a whole window has passed without progress.
func (s *simulator) checkLivelock(t float64, arrived int) error {
	l := &s.livelock
	if s.active == 0 || l.next == 0 {
		l.next, l.done, l.seen, l.since = t+livelockWindow, s.done, arrived, t
		return nil
	}
	if t < l.next {
		return nil
	}
	if l.most == nil {
		l.most = make([]float64, len(s.jobs))
	}
	if s.lazy {
		s.trim()
	}
	moved := s.done != l.done || arrived != l.seen
	var stalled []string
	for _, st := range s.eng.Active() {
		idx := s.index(st)
		p := st.Progress
		if r := s.runs[idx]; r != nil {
			p = math.Max(p, r.progress)
		}
		if p > l.most[idx] {
			l.most[idx] = p
			moved = true
		} else if len(stalled) < 5 {
			stalled = append(stalled, st.Job.ID)
		}
	}
	if !moved {
		return fmt.Errorf("sim: from t=%.0f s to t=%.0f s (%.0f simulated days) the policy %s ran with %d job(s) active and none finished, arrived or got further than before (first: %v); "+
			"the run would never end: are faults more frequent than a job can reach its next checkpoint, or a site's capacity too small for its jobs?",
			l.since, t, (t-l.since)/86400, s.cfg.Policy.Name(), s.active, stalled)
	}
	l.next, l.done, l.seen, l.since = t+livelockWindow, s.done, arrived, t
	return nil
}
