package goodput

// Agent is the part of a training job's own agent (adaptdl runs one inside
// every job) that learns the job's performance: it keeps one observation
// per configuration (nodes, replicas, local batch) the job has run on,
// refits the throughput model when a new configuration is seen, and turns
// the fit into the Hints a job reports to the scheduler. The simulator's
// job agents (package sim) and tide serve's live jobs (package server) both
// use it, so an elastic policy learns about a simulated job and a real one
// the same way. The zero Agent is ready to use; an Agent is not safe for
// concurrent use.
type Agent struct {
	obs    []Observation
	seen   map[[3]int]bool
	params Params
	maxRep int
}

// Observe records o if its configuration is new, refitting the model, and
// reports whether it did. Later observations of a known configuration are
// ignored, as adaptdl's agent keeps the first profile of each. Invalid
// observations (see Fit) are ignored too.
func (a *Agent) Observe(o Observation) bool {
	if !validObservation(o) {
		return false
	}
	key := [3]int{o.Nodes, o.Replicas, o.LocalBsz}
	if a.seen[key] {
		return false
	}
	if a.seen == nil {
		a.seen = map[[3]int]bool{}
	}
	a.seen[key] = true
	a.obs = append(a.obs, o)
	a.params = Fit(a.obs)
	a.maxRep = max(a.maxRep, o.Replicas)
	return true
}

// Fitted reports whether the agent has observed anything.
func (a *Agent) Fitted() bool { return len(a.obs) > 0 }

// Observations returns the observations the fit is made of, in the order
// they were first seen. The caller must not modify them.
func (a *Agent) Observations() []Observation { return a.obs }

// Params returns the fitted model (the zero Params before any observation).
func (a *Agent) Params() Params { return a.params }

// MaxReplicas is the largest replica count observed.
func (a *Agent) MaxReplicas() int { return a.maxRep }

// Hints returns what the job reports to the scheduler: the fitted model
// with the job's current gradient statistics and batch limits. Before any
// observation it returns nil (a policy then treats the job as unprofiled).
func (a *Agent) Hints(g Grad, l Limits) *Hints {
	if !a.Fitted() {
		return nil
	}
	return &Hints{Perf: a.params, Grad: g, Limits: l, MaxReplicas: a.maxRep, Fitted: true}
}
