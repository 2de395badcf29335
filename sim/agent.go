package sim

import "github.com/tide-sched/tide/perf/goodput"

// agent plays a training job's own agent, as adaptdl runs one inside every
// job: it records the step times the job measures on each configuration it
// runs, fits the goodput model to them, picks the batch size of adaptive
// jobs, and reports its hints to the engine, which is all an elastic policy
// learns about the job's performance. Times come from the simulator's
// ground-truth model (perf.Observer), never from the fitted one.
type agent struct {
	obs    []goodput.Observation
	seen   map[[3]int]bool
	params goodput.Params
	maxRep int
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
	j := r.st.Job
	a := s.agents[r.idx]
	if a == nil {
		a = &agent{seen: map[[3]int]bool{}}
		s.agents[r.idx] = a
	}
	nodes, replicas := r.alloc.Nodes(), r.alloc.GPUs()
	limits := s.obs.Limits(j)
	r.alloc.LocalBsz, r.alloc.AccumSteps = 0, 0
	if j.AdaptBatch && len(a.obs) > 0 {
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
	key := [3]int{o.Nodes, o.Replicas, o.LocalBsz}
	if !a.seen[key] {
		a.seen[key] = true
		a.obs = append(a.obs, o)
		a.params = goodput.Fit(a.obs)
		a.maxRep = max(a.maxRep, o.Replicas)
	}
	// The hints carry the model's batch limits even for a fixed-batch job:
	// the Pollux artifact's Optimus reads speed-ups the same way.
	_ = s.eng.Hint(j.ID, &goodput.Hints{Perf: a.params, Grad: grad, Limits: limits, MaxReplicas: a.maxRep, Fitted: true})
}
