package sim

import (
	"math"

	"github.com/tide-sched/tide/engine"
)

// Lazy advance (issue 19): a round no longer brings every running job up
// to now. When the policy never reads progress (engine.ProgressFree), or
// reads it only on demand (engine.ProgressOnDemand: the engine then asks
// PullProgress for the jobs it reads, below), and
// nothing else needs every job current each round (job agents, sites,
// shared GPUs, the artifact's whole seconds), a job past its start delay
// is left where it was, and the round's instant is logged. When the job
// must be current (its next event, a change the round makes to it, the
// end of the run) it is brought up to date by advancing it through every
// instant it missed, in order, with the same arithmetic a round would have
// done: its GPU-seconds, progress and times are the same to the bit
// (TestLazyAdvanceMatches). Jobs still paying their start delay are
// advanced every round as before: the end of a delay changes the
// timeline's useful GPUs at the round it falls in.

// lazyOK reports whether this round may leave running jobs behind.
func (s *simulator) lazyOK() bool {
	return !s.eager && s.obs == nil && s.st == nil && !s.sharing && !s.cfg.WholeSeconds && !s.eng.NeedsProgress()
}

// PullProgress implements engine.ProgressSource: it brings st, a running
// job, up to the round's instant if rounds left it behind, and reports its
// progress as an eager round reports every running job's (advanceAll): the
// same value to the bit, so a policy that reads the progress of a few
// running jobs costs those alone.
func (s *simulator) PullProgress(st *engine.Status) {
	if !s.lazy {
		return // the round reported every running job's progress (advanceAll)
	}
	r := s.runs[s.index(st)]
	if r == nil || r.st != st {
		return
	}
	if r.lazy && r.synced < s.instBase+len(s.instants) {
		s.pulls++
	}
	s.sync(r)
	s.eng.ReportStatus(st, r.progress)
}

// advanceAll brings the running jobs up to the round at t: the delayed
// ones only, when lazy; every one otherwise, reporting its progress.
func (s *simulator) advanceAll(t float64) {
	lazy := s.lazyOK()
	if !lazy {
		if s.lazy {
			s.syncAll()
			s.lazy = false
		}
		for _, r := range s.live {
			s.advance(r, t)
			s.eng.ReportStatus(r.st, r.progress)
			s.retune(r)
		}
		return
	}
	s.lazyRounds++
	if n := len(s.instants); !whole(t) || (n > 0 && t < s.instants[n-1]) {
		s.lastOdd = s.instBase + n
	}
	s.instants = append(s.instants, t)
	if !s.lazy {
		// Every running job was advanced to the last round: from now
		// on, those past their delay are advanced when needed.
		s.lazy = true
		for _, r := range s.live {
			if r.delay > 0 {
				s.delayed = append(s.delayed, r)
			} else {
				r.lazy, r.synced = true, s.instBase+len(s.instants)-1
			}
		}
	}
	keep := s.delayed[:0]
	for _, r := range s.delayed {
		if s.runs[r.idx] != r {
			continue // stopped
		}
		s.advance(r, t)
		if r.delay > 0 {
			keep = append(keep, r)
			continue
		}
		r.lazy, r.synced = true, s.instBase+len(s.instants)
	}
	clear(s.delayed[len(keep):])
	s.delayed = keep
	if len(s.instants) >= maxInstants {
		s.trim()
	}
}

// started files a job that has just started at the last round's instant
// as delayed or lazy, when rounds are lazy.
func (s *simulator) started(r *running) {
	if !s.lazy {
		return
	}
	if r.delay > 0 {
		s.delayed = append(s.delayed, r)
		return
	}
	r.lazy, r.synced = true, s.instBase+len(s.instants)
}

// sync brings r up to the last round's instant if it was left behind.
func (s *simulator) sync(r *running) {
	if !r.lazy {
		return
	}
	first := r.synced
	ts := s.instants[r.synced-s.instBase:]
	r.synced = s.instBase + len(s.instants)
	if r.delay > 0 || s.st != nil {
		for _, t := range ts {
			s.advance(r, t)
		}
		return
	}
	if len(ts) > 1 && s.lastOdd < first && s.syncWhole(r, ts[len(ts)-1]) {
		return
	}
	// advance at each instant, for a job past its delay on a run without
	// sites, with its sums in registers: the same operations in the same
	// order.
	rec := &s.recs[r.idx]
	gpus := charged(r)
	held, gs, shared, useful := s.held[r.idx], rec.GPUSeconds, rec.SharedGPUSeconds, rec.UsefulGPUSeconds
	progress, last := r.progress, r.last
	for _, t := range ts {
		dt := t - last
		if dt <= 0 {
			continue
		}
		held += dt
		gs += dt * gpus
		shared += dt * (float64(r.gpus) - gpus)
		progress += r.rate * dt
		useful += dt * gpus
		last = t
	}
	s.held[r.idx], rec.GPUSeconds, rec.SharedGPUSeconds, rec.UsefulGPUSeconds = held, gs, shared, useful
	r.progress, r.last = progress, last
}

// syncWhole is sync's loop through instants that are whole seconds, in
// order, up to end: when r's sums, its GPUs, its rate and the seconds to
// add are whole numbers too (below 2^52), every addition the loop makes is
// exact, so the sums telescope and adding end - last at once gives the
// very same bits. It reports false, changing nothing, otherwise.
func (s *simulator) syncWhole(r *running, end float64) bool {
	if !whole(r.last) {
		return false
	}
	d := end - r.last
	if d <= 0 {
		return true // every step adds nothing, as in the loop
	}
	rec := &s.recs[r.idx]
	gpus := charged(r)
	other := float64(r.gpus) - gpus
	held, gs, shared, useful, progress := s.held[r.idx]+d, rec.GPUSeconds+d*gpus, rec.SharedGPUSeconds+d*other,
		rec.UsefulGPUSeconds+d*gpus, r.progress+r.rate*d
	for _, x := range [...]float64{gpus, other, r.rate, s.held[r.idx], rec.GPUSeconds, rec.SharedGPUSeconds, rec.UsefulGPUSeconds, r.progress,
		held, gs, shared, useful, progress} {
		if !whole(x) {
			return false
		}
	}
	s.held[r.idx], rec.GPUSeconds, rec.SharedGPUSeconds, rec.UsefulGPUSeconds = held, gs, shared, useful
	r.progress, r.last = progress, end
	return true
}

// whole reports whether x is a whole number below 2^52 in size: sums and
// products of such numbers that stay below it are exact.
func whole(x float64) bool { return x == math.Trunc(x) && math.Abs(x) < 1<<52 }

// syncAll brings every running job up to the last round's instant and
// makes rounds eager again.
func (s *simulator) syncAll() {
	for _, r := range s.live {
		s.sync(r)
		r.lazy = false
	}
	clear(s.delayed)
	s.delayed = s.delayed[:0]
	s.instants, s.instBase = s.instants[:0], s.instBase+len(s.instants)
}

// maxInstants is the most round instants the simulator logs: then every
// running job is brought up to date (what its next event would do, done
// earlier) and the log starts afresh, so its memory stays bounded.
var maxInstants = 1 << 16

// trim brings every running job up to the last instant and empties the
// log.
func (s *simulator) trim() {
	for _, r := range s.live {
		s.sync(r)
	}
	s.instBase += len(s.instants)
	s.instants = s.instants[:0]
}
