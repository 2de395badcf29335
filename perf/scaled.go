package perf

import (
	"math"
	"strings"

	"github.com/tide-sched/tide/job"
)

// Scaled runs a slower GPU type at Lambda times the speed of a reference
// type of the base model: EdgeFlow's model of edge servers, whose throughput
// is lambda x the cloud throughput (0 < lambda < 1, from a profiler). On g
// GPUs of Type a job runs at Lambda x its speed on g GPUs of Ref; every
// other type is the base model's own.
type Scaled struct {
	Model
	Type   string  // the slower GPU type, e.g. v100
	Ref    string  // the type it is scaled from, e.g. a100
	Lambda float64 // speed ratio, in (0, 1]
}

// Name implements Model.
func (s Scaled) Name() string { return s.Model.Name() + "+" + s.Type + "=lambda*" + s.Ref }

// Rate implements Model.
func (s Scaled) Rate(j *job.Job, a Alloc, p float64) (float64, float64) {
	if strings.EqualFold(a.GPUType, s.Type) {
		ref := a
		ref.GPUType = s.Ref
		r, until := s.Model.Rate(j, ref, p)
		return s.Lambda * r, until
	}
	return s.Model.Rate(j, a, p)
}

// MaxRate implements Bounder as Rate scales: on Type, Lambda times the
// base model's bound over the same span of Ref GPUs (same counts, nodes
// and GPUs per node); on every other type the base model's own. ok is
// false when the base model has no bound (it is no Bounder).
func (s Scaled) MaxRate(j *job.Job, sp Span, p float64) (float64, float64, bool) {
	if strings.EqualFold(sp.GPUType, s.Type) {
		ref := sp
		ref.GPUType = s.Ref
		r, until, ok := MaxRate(s.Model, j, ref, p)
		return s.Lambda * r, until, ok
	}
	return MaxRate(s.Model, j, sp, p)
}

// Valid reports whether Lambda is usable.
func (s Scaled) Valid() bool { return s.Lambda > 0 && s.Lambda <= 1 && !math.IsNaN(s.Lambda) }

// Observe and Limits are not forwarded: a Scaled model is never an Observer.
var _ Bounder = Scaled{}
