package capacity

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Diurnal generates a site's capacity as a daily wave: the measure (servers
// available, or GPUs inference needs) moves from Trough at Phase to Peak half
// a period later and back, sampled every Step seconds, plus Gaussian noise of
// standard deviation Noise, rounded to a whole count and clamped at 0 (and,
// by the simulator, at the site's size). The same Seed gives the same wave.
type Diurnal struct {
	Site    string
	Measure string  // "available" (servers) or "inference" (GPUs)
	Period  float64 // s, default 86400
	Trough  float64 // the measure's low point
	Peak    float64 // the measure's high point
	Noise   float64 // standard deviation of the noise, in the measure's unit
	Step    float64 // s between samples, default 600
	Phase   float64 // s: time of the trough, default 0
	Seed    uint64
}

// Validate checks the fields and fills defaults.
func (d *Diurnal) Validate() error {
	if d.Site == "" {
		return &FieldError{What: "diurnal", Field: "site", Msg: "missing"}
	}
	switch d.Measure {
	case "available", "inference":
	default:
		return &FieldError{What: "diurnal " + d.Site, Field: "measure", Msg: fmt.Sprintf("%q: want available or inference", d.Measure)}
	}
	if d.Period == 0 {
		d.Period = 86400
	}
	if d.Step == 0 {
		d.Step = 600
	}
	for _, f := range []struct {
		name string
		v    float64
		pos  bool
	}{{"period", d.Period, true}, {"step", d.Step, true}, {"trough", d.Trough, false}, {"peak", d.Peak, false}, {"noise", d.Noise, false}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || (f.pos && f.v == 0) || f.v > MaxValue*1e3 {
			return &FieldError{What: "diurnal " + d.Site, Field: f.name, Msg: fmt.Sprintf("want a finite number %s, got %v", map[bool]string{true: "> 0", false: ">= 0"}[f.pos], f.v)}
		}
	}
	// A sample a millisecond apart once took 24 GB before the first round.
	if d.Step < MinInterval {
		return &FieldError{What: "diurnal " + d.Site, Field: "step", Msg: fmt.Sprintf("want at least %g second between samples, got %v", float64(MinInterval), d.Step)}
	}
	if math.IsNaN(d.Phase) || math.IsInf(d.Phase, 0) {
		return &FieldError{What: "diurnal " + d.Site, Field: "phase", Msg: fmt.Sprintf("want a finite number, got %v", d.Phase)}
	}
	return nil
}

// At is the k-th sample, at time k*Step.
func (d *Diurnal) At(k int) Change {
	t := float64(k) * d.Step
	v := d.Trough + (d.Peak-d.Trough)*(1-math.Cos(2*math.Pi*(t-d.Phase)/d.Period))/2
	if d.Noise > 0 {
		r := rand.New(rand.NewPCG(d.Seed, uint64(k)))
		v += d.Noise * r.NormFloat64()
	}
	n := int(math.Max(0, math.Round(v)))
	ch := Change{T: t, Site: d.Site, Available: -1, Inference: -1}
	if d.Measure == "available" {
		ch.Available = n
	} else {
		ch.Inference = n
	}
	return ch
}

// FieldError is a generator's field out of range: Error gives
// "What: Field: Msg"; a caller that knows where the generator came from
// (a scenario file's line) names the field with Field.
type FieldError struct {
	What, Field, Msg string
}

func (e *FieldError) Error() string { return e.What + ": " + e.Field + ": " + e.Msg }

// MinInterval is the shortest time, in seconds, between a diurnal wave's
// samples and the mean time between a node's failures or to its repair.
const MinInterval = 1

// Faults injects node failures in a site: each node fails after an
// exponentially distributed time of mean MTBF seconds and comes back MTTR
// seconds later (both measured from the previous event). Each node draws
// from its own stream, so adding a node does not change the others' faults.
type Faults struct {
	Site string
	MTBF float64 // mean time between failures of one node, s (> 0)
	MTTR float64 // repair time, s (>= 0; default 3600)
	Seed uint64
}

// Validate checks the fields and fills defaults.
func (f *Faults) Validate() error {
	if f.Site == "" {
		return &FieldError{What: "faults", Field: "site", Msg: "missing"}
	}
	// Below a second, failures come faster than any run can use, and times
	// that never add up (1e-300 apart) once held a run at t=0 for ever.
	if !(f.MTBF >= MinInterval) || math.IsInf(f.MTBF, 0) {
		return &FieldError{What: "faults " + f.Site, Field: "mtbf", Msg: fmt.Sprintf("want a finite number of seconds >= %g, got %v", float64(MinInterval), f.MTBF)}
	}
	if f.MTTR == 0 {
		f.MTTR = 3600
	}
	if !(f.MTTR >= MinInterval) || math.IsInf(f.MTTR, 0) {
		return &FieldError{What: "faults " + f.Site, Field: "mttr", Msg: fmt.Sprintf("want a finite number of seconds >= %g, got %v", float64(MinInterval), f.MTTR)}
	}
	return nil
}

// Node returns the fault stream of the node with the given index in the
// site: each call gives the next failure time and its repair time.
func (f *Faults) Node(i int) func() (fail, repair float64) {
	r := rand.New(rand.NewPCG(f.Seed, uint64(i)+1))
	t := 0.0
	return func() (float64, float64) {
		t += r.ExpFloat64() * f.MTBF
		fail := t
		t += f.MTTR
		return fail, t
	}
}
