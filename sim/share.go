package sim

import "github.com/tide-sched/tide/perf"

// Space sharing in the simulator: a job whose engine status names a partner
// (engine.Status.PackedWith) runs at the pair's rate from the model's
// perf.Sharer; the rate's boundary is the one the model gives the job
// alone. Each member is charged half of every GPU it shares, so the
// report's GPU-seconds and utilisation count a shared GPU once.

// rate is r's progress rate on its allocation, next to its partner if any.
func (s *simulator) rate(r *running) (rate, until float64) {
	rate, until = s.cfg.Model.Rate(r.st.Job, r.alloc, r.progress)
	if r.partner == "" {
		return rate, until
	}
	p := s.eng.Job(r.partner)
	r1, _, ok := s.cfg.Model.(perf.Sharer).Shared(r.st.Job, p.Job, r.alloc)
	if !ok {
		r1 = 0 // the engine refuses unrated pairs; never progress on a guess
	}
	return r1, until
}

// rerate brings r up to t and rates it anew with the partner the engine
// gives it now.
func (s *simulator) rerate(r *running, t float64) {
	s.advance(r, t)
	if r.partner != "" {
		s.nShared--
	}
	r.partner = r.st.PackedWith
	if r.partner != "" {
		s.nShared++
	}
	r.rate, r.until = s.rate(r)
	s.gens[r.idx]++
	r.gen = s.gens[r.idx]
	s.push(r)
}

// repack rerates, after a round, every running job whose partner changed.
func (s *simulator) repack(t float64) {
	for _, r := range s.live {
		if r.partner != r.st.PackedWith {
			s.rerate(r, t)
		}
	}
}

// alone rerates job id, which lost its partner at t, if it still runs.
func (s *simulator) alone(id string, t float64) {
	if id == "" {
		return
	}
	st := s.eng.Job(id)
	if st == nil {
		return
	}
	if r := s.runs[s.index(st)]; r != nil && r.partner != r.st.PackedWith {
		s.rerate(r, t)
	}
}

// halves is 2 for a job alone on its GPUs, 1 for one that shares them.
func halves(r *running) int {
	if r.partner != "" {
		return 1
	}
	return 2
}

// occupancy is the number of GPUs held, and of those held by a job past its
// start delay (a shared GPU with one member still in its delay counts half),
// with every GPU counted once.
func (s *simulator) occupancy() (alloc, useful int) {
	if s.nParts > 0 {
		return s.occupancyParts()
	}
	if s.nShared == 0 {
		return s.alloc, s.useful
	}
	for _, r := range s.live {
		h := halves(r) * r.gpus
		alloc += h
		if r.delay <= 0 {
			useful += h
		}
	}
	return alloc / 2, useful / 2
}
