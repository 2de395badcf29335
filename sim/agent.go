package sim

import "github.com/tide-sched/tide/perf/goodput"

// agent plays a training job's own agent, as adaptdl runs one inside every
// job: it records the step times the job measures on each configuration it
// runs, fits the goodput model to them (goodput.Agent, which tide serve's
// live jobs use too), picks the batch size of adaptive jobs, and reports
// its hints to the engine, which is all an elastic policy learns about the
// job's performance. Times come from the simulator's ground-truth model
// (perf.Observer), never from the fitted one.
type agent struct {
	goodput.Agent
	grad   goodput.Grad // gradient statistics last reported
	hinted bool
}

// tune runs r's agent at a (re)start or an epoch boundary: with a fitted
// model an adaptive job takes the batch configuration of highest predicted
// goodput on its allocation (the job's own batch before that); then the job
// observes the configuration it runs and its current gradient statistics,
// refits when the configuration is new, and reports.
func (s *simulator) tune(r *running) {
	if s.obs == nil {
		return
	}
	r.alloc.LocalBsz, r.alloc.AccumSteps = 0, 0
	s.pick(r)
	s.observe(r, true)
}

// retune runs r's agent at a scheduling round, before the policy runs, as
// the Pollux artifact's job does at the end of every 60 s step: it records
// what the job measured since the last round (new when the batch changed
// then), and an adaptive job re-picks its batch configuration from the
// model refitted on everything measured so far. The new configuration is
// measured at the next round, so a policy learns of it one round later, as
// in the artifact. A batch change costs nothing (adaptdl rescales the batch
// in place); it changes the job's rate from now on.
func (s *simulator) retune(r *running) {
	if s.obs == nil || r.delay > 0 {
		return
	}
	s.observe(r, false)
	if !r.st.Job.AdaptBatch {
		return
	}
	local, accum := r.alloc.LocalBsz, r.alloc.AccumSteps
	s.pick(r)
	if r.alloc.LocalBsz == local && r.alloc.AccumSteps == accum {
		return
	}
	r.rate, r.until = s.cfg.Model.Rate(r.st.Job, r.alloc, r.progress)
	// The boundary pushed for the old rate is stale.
	s.gens[r.idx]++
	r.gen = s.gens[r.idx]
	s.push(r)
}

// pick sets an adaptive job's batch configuration to the one of highest
// goodput its fitted model predicts on its allocation; without a fitted
// model it leaves the configuration alone.
func (s *simulator) pick(r *running) {
	j := r.st.Job
	if !j.AdaptBatch {
		return
	}
	if a := s.agents[r.idx]; a == nil || !a.Fitted() {
		return
	}
	h := s.eng.Job(j.ID).Hints
	if h == nil {
		return
	}
	if c := h.Function().Optimize(r.alloc.Nodes(), r.alloc.GPUs()); c.Goodput > 0 {
		r.alloc.LocalBsz, r.alloc.AccumSteps = c.LocalBsz, c.AccumSteps
	}
}

// observe records what r measures on its current configuration (the fit
// changes only when the configuration is new) and reports hints when they
// changed, or always with force.
func (s *simulator) observe(r *running, force bool) {
	j := r.st.Job
	a := s.agents[r.idx]
	if a == nil {
		a = &agent{}
		s.agents[r.idx] = a
	}
	o, grad, ok := s.obs.Observe(j, r.alloc, r.progress)
	if !ok {
		return
	}
	refit := a.Observe(o)
	if !force && !refit && a.hinted && grad == a.grad {
		return
	}
	// The hints carry the model's batch limits even for a fixed-batch job:
	// the Pollux artifact's Optimus reads speed-ups the same way.
	if h := a.Hints(grad, s.obs.Limits(j)); h != nil {
		a.grad, a.hinted = grad, true
		_ = s.eng.Hint(j.ID, h)
	}
}
