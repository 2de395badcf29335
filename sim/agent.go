package sim

import "github.com/tide-sched/tide/perf/goodput"

// agent plays a training job's own agent, as adaptdl runs one inside every
// job: it records the step times the job measures on each configuration it
// runs, fits the goodput model to them (goodput.Agent, which tide serve's
// live jobs use too), picks the batch size of adaptive jobs, and reports
// its hints to the engine, which is all an elastic policy learns about the
// job's performance. Times come from the simulator's ground-truth model
// (perf.Observer), never from the fitted one.
type agent = goodput.Agent

// tune runs r's agent at a (re)start or an epoch boundary: with a fitted
// model an adaptive job takes the batch configuration of highest predicted
// goodput on its allocation (the job's own batch before that); then the job
// observes the configuration it runs and its current gradient statistics,
// refits when the configuration is new, and reports.
func (s *simulator) tune(r *running) {
	if s.obs == nil {
		return
	}
	j := r.st.Job
	a := s.agents[r.idx]
	if a == nil {
		a = &agent{}
		s.agents[r.idx] = a
	}
	nodes, replicas := r.alloc.Nodes(), r.alloc.GPUs()
	limits := s.obs.Limits(j)
	r.alloc.LocalBsz, r.alloc.AccumSteps = 0, 0
	if j.AdaptBatch && a.Fitted() {
		h := s.eng.Job(j.ID).Hints
		if h != nil {
			if c := h.Function().Optimize(nodes, replicas); c.Goodput > 0 {
				r.alloc.LocalBsz, r.alloc.AccumSteps = c.LocalBsz, c.AccumSteps
			}
		}
	}
	o, grad, ok := s.obs.Observe(j, r.alloc, r.progress)
	if !ok {
		return
	}
	a.Observe(o)
	// The hints carry the model's batch limits even for a fixed-batch job:
	// the Pollux artifact's Optimus reads speed-ups the same way.
	if h := a.Hints(grad, limits); h != nil {
		_ = s.eng.Hint(j.ID, h)
	}
}
