package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/tide-sched/tide/job"
)

// livelockWindow is how long, in simulated seconds, jobs may stay active
// with none finishing, none arriving and none getting further than it ever
// got before the run fails. A year: far longer than any job of a shipped
// trace runs, and reached in about a second of wall time by a run that
// goes nowhere.
const livelockWindow = 365 * 86400.0

// churnRounds is how many rounds' time (Config.Round) the churn check
// waits at least: a policy that starts and restarts jobs for that long and
// stops every one of them before it gets past its start or restart cost,
// with nothing else happening, makes no progress at all and never will.
const churnRounds = 10000

// churnStops is the fewest such wasted starts the churn check wants to
// have seen before it fails a run.
const churnStops = 100

// livelock watches for a run that can never end although something keeps
// happening, so the stuck test (nothing runs, nothing to come) never fires.
//
// The year check: nodes that fail faster than a job reaches its next
// checkpoint (a faults sweep run at --points 1, an MTBF of one second) roll
// every job back, round after round, forever. Once per window it brings
// the running jobs up to date (trim: the same results, bit for bit, as
// without it) and compares each active job's progress with the most it had
// at the last check.
//
// The churn check, much sooner: a policy that re-plans faster than a job
// can restart (Gavel's rounds of 26 s, restarts of 30 s) preempts every job
// it starts before the job has paid its start or restart cost, so no job
// ever runs, while rounds, starts and preemptions keep coming. It watches
// for a window (churnWindow, counting only the time in which some job held
// GPUs) in which the policy stopped at least churnStops runs still paying
// their cost and nothing else happened: no run got past its cost (none did
// any work), no job finished or arrived, capacity did not change but for a
// diurnal wave's steps, and no node failed or came back. Each of those starts the window afresh, so a run
// that waits (for capacity, a repair, an arrival) is never failed by it,
// only one that spins. It counts and compares; it changes nothing.
type livelock struct {
	next  float64   // simulated time of the next check; 0 = not set
	done  int       // jobs finished at the last check
	seen  int       // jobs arrived at the last check
	most  []float64 // by job index: the most progress seen at a check
	since float64   // time of the last check that saw progress

	// What the year check's window saw, for its message.
	year churnSeen

	// The churn check: the window started at churn.since.
	churn      churnSeen
	churnDone  int  // jobs finished when the window started
	churnSeen  int  // jobs arrived when the window started
	churnReset bool // something happened that starts the window afresh
	window     float64
	// busy is the time in the window during which some job held GPUs
	// (paying its cost, as nothing else happens in the window): only that
	// counts towards the window, so a run that spins a while and then
	// waits, with nothing running, is not failed for the wait. last is the
	// previous check's time, running whether a job held GPUs then.
	busy, last float64
	running    bool
}

// churnSeen counts what happened to runs in a window.
type churnSeen struct {
	since  float64
	starts int     // runs started: starts, restarts, resizes
	wasted int     // runs the policy stopped before they paid their cost
	held   float64 // the longest one of those held its GPUs
	cost   float64 // the least cost one of those was given
	faults int     // runs a node fault stopped
}

// reset starts w afresh at t.
func (w *churnSeen) reset(t float64) { *w = churnSeen{since: t} }

// startedRun notes that r has just started (a start, restart or resize).
func (s *simulator) startedRun(r *running) {
	s.livelock.year.starts++
	s.livelock.churn.starts++
	if r.delay <= 0 {
		s.livelock.churnReset = true // it works from now on
	}
}

// paidCost notes that a run has just done its first work since it
// (re)started: it got past its start or restart cost.
func (s *simulator) paidCost() { s.livelock.churnReset = true }

// stoppedRun notes that the policy stops r (a preemption or a resize) at
// t. It counts as wasted when r did no work: still paying its cost, or
// stopped at the very round its cost ended (rounds as long as a restart).
func (s *simulator) stoppedRun(r *running, t float64) {
	if r.delay <= 0 && (r.progress > r.from || t <= r.began) {
		return
	}
	for _, w := range [...]*churnSeen{&s.livelock.year, &s.livelock.churn} {
		if r.began <= w.since {
			continue // started before the window (or as it began): not among its starts
		}
		if w.wasted == 0 || r.delay+t-r.began < w.cost {
			w.cost = r.delay + t - r.began
		}
		w.wasted++
		w.held = math.Max(w.held, t-r.began)
	}
}

// capacityEvent notes a capacity change that is not a diurnal wave's step:
// a step of an availability file, a node failing or coming back.
func (s *simulator) capacityEvent() { s.livelock.churnReset = true }

// faultStopped notes that a node fault stopped a running job.
func (s *simulator) faultStopped() { s.livelock.year.faults++ }

// churnWindow is how long the churn check waits: churnRounds rounds, and
// at least twice the trace's own time scales, which a policy may wait out
// (the longest job, as recorded or counted in seconds; the furthest
// deadline from its job's submission; a diurnal wave's period).
func (s *simulator) churnWindow() float64 {
	l := &s.livelock
	if l.window > 0 {
		return l.window
	}
	w := churnRounds * s.cfg.Round
	for _, j := range s.jobs {
		long := j.Duration
		if j.Unit == job.Seconds {
			long = math.Max(long, j.Work)
		}
		if j.Deadline > 0 {
			long = math.Max(long, j.Deadline-j.Submit)
		}
		w = math.Max(w, 2*long)
	}
	if s.st != nil {
		for _, d := range s.st.cfg.Diurnal {
			w = math.Max(w, 2*d.Period)
		}
	}
	l.window = w
	return w
}

// checkLivelock runs at time t of the loop, with arrived jobs submitted so
// far. It returns an error when a whole window has passed without progress.
func (s *simulator) checkLivelock(t float64, arrived int) error {
	if err := s.checkChurn(t, arrived); err != nil {
		return err
	}
	l := &s.livelock
	if s.active == 0 || l.next == 0 {
		l.next, l.done, l.seen, l.since = t+livelockWindow, s.done, arrived, t
		l.year.reset(t)
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
			"the run would never end: %s",
			l.since, t, (t-l.since)/86400, s.cfg.Policy.Name(), s.active, stalled, s.yearHint())
	}
	l.next, l.done, l.seen, l.since = t+livelockWindow, s.done, arrived, t
	l.year.reset(t)
	return nil
}

// yearHint says what the year check's window saw, and what may cause it.
func (s *simulator) yearHint() string {
	w := &s.livelock.year
	// The cause named is the one that stopped more runs: faults and a
	// policy that re-plans too often both roll jobs back, and a churn
	// beside faults is not caught by the churn check, which every failure
	// and repair starts afresh.
	switch {
	case w.faults > 0 && w.faults >= w.wasted:
		return fmt.Sprintf("node faults stopped running jobs %d time(s) in that time: are faults more frequent than a job can reach its next checkpoint (every %g s of running)?",
			w.faults, s.st.cfg.CheckpointInterval)
	case w.wasted > 0:
		also := ""
		if w.faults > 0 {
			also = fmt.Sprintf(" (node faults stopped %d)", w.faults)
		}
		return fmt.Sprintf("jobs were started or restarted %d time(s) in that time, and the policy stopped %d of them before they got past their start or restart cost%s (%s or more; none held its GPUs more than %s): "+
			"does the policy re-plan (the simulator's rounds are %s apart) more often than a job can restart?",
			w.starts, w.wasted, also, span(w.cost), span(w.held), span(s.cfg.Round))
	case w.starts == 0:
		return "no job was started in that time: is a site's capacity too small for its jobs?"
	}
	return fmt.Sprintf("jobs were started or restarted %d time(s) in that time: are faults more frequent than a job can reach its next checkpoint, or a site's capacity too small for its jobs?", w.starts)
}

// checkChurn is the churn check (livelock): it fails the run at t when the
// policy has spun for a churn window.
func (s *simulator) checkChurn(t float64, arrived int) error {
	l := &s.livelock
	if l.running {
		l.busy += t - l.last
	}
	l.last, l.running = t, s.nrun > 0
	if s.active == 0 || l.churnReset || s.useful > 0 || s.done != l.churnDone || arrived != l.churnSeen {
		l.churn.reset(t)
		l.churnReset, l.churnDone, l.churnSeen, l.busy = false, s.done, arrived, 0
		return nil
	}
	w := &l.churn
	if w.wasted < churnStops || l.busy < s.churnWindow() {
		return nil
	}
	return fmt.Errorf("sim: from t=%.0f s to t=%.0f s (%s of simulated time) the policy %s started or restarted jobs %d time(s) and none got past its start or restart cost: "+
		"it preempted or resized %d of them while they paid it (none held its GPUs more than %s; a start or restart costs %s or more), so none of the %d active job(s) got further (first: %v), and none finished or arrived; "+
		"the run would never end: the policy re-plans more often than a job can restart (the simulator's rounds are %s apart)",
		w.since, t, span(t-w.since), s.cfg.Policy.Name(), w.starts, w.wasted, span(w.held), span(w.cost), s.active, s.firstActive(), span(s.cfg.Round))
}

// span writes seconds for an error message: "26 s", "7h13m20s".
func span(sec float64) string {
	if sec < 3600 {
		return fmt.Sprintf("%.3g s", sec)
	}
	return (time.Duration(math.Round(sec)) * time.Second).String()
}
