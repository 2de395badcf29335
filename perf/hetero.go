package perf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/job"
)

// Sharer is a Model that knows how fast two jobs run when they share the same
// GPUs (space sharing, "packing": both processes on each GPU at once), where
// that was measured. Gavel's throughput tables hold such pairs; Gandiva and
// Gavel's packing policies read them.
type Sharer interface {
	Model
	// Shared returns the progress rates (model units per second) of j1 and j2
	// when they share the GPUs of allocation a; ok is false when the pair was
	// not measured on a's GPU type (the policy must not pack them). A rate of
	// 0 means that job makes no progress next to the other (it does not fit).
	Shared(j1, j2 *job.Job, a Alloc) (r1, r2 float64, ok bool)
}

// SpeedFactors is a Model that runs Base's jobs faster or slower by GPU type:
// the rate on type t is Base's rate times Speed[t] (GPU types compare
// case-insensitively), and 0 on a type Speed does not list when Strict is
// set, else Base's rate unchanged. It gives traces that carry only durations
// (Philly, Tiresias, Alibaba) a heterogeneous cluster: Speed{"v100": 1,
// "p100": 0.6, "k80": 0.25} makes a job recorded on V100s run at 60% of that
// speed on P100s.
type SpeedFactors struct {
	Base   Model
	Speed  map[string]float64
	Strict bool
}

// ParseSpeedFactors reads "v100=1,p100=0.6,k80=0.25" into a map, keys lower
// case; every factor must be a finite number > 0.
func ParseSpeedFactors(spec string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || k == "" || err != nil || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("speed factors %q: item %q: want TYPE=FACTOR with FACTOR > 0", spec, kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("speed factors %q: GPU type %s given twice", spec, k)
		}
		out[k] = f
	}
	return out, nil
}

// Name implements Model.
func (s SpeedFactors) Name() string {
	keys := make([]string, 0, len(s.Speed))
	for k := range s.Speed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%g", k, s.Speed[k])
	}
	return s.Base.Name() + "+speed(" + strings.Join(parts, ",") + ")"
}

// Check implements Model: Base's check, and with Strict a job pinned to a GPU
// type must name one with a speed factor.
func (s SpeedFactors) Check(j *job.Job) error {
	if err := s.Base.Check(j); err != nil {
		return err
	}
	if s.Strict && j.GPUType != "" {
		if _, ok := s.Speed[strings.ToLower(j.GPUType)]; !ok {
			return fmt.Errorf("job %s: GPU type %q has no speed factor", j.ID, j.GPUType)
		}
	}
	return nil
}

// Work implements Model.
func (s SpeedFactors) Work(j *job.Job) float64 { return s.Base.Work(j) }

// Factor is the speed factor of GPU type t.
func (s SpeedFactors) Factor(t string) float64 {
	if f, ok := s.Speed[strings.ToLower(t)]; ok {
		return f
	}
	if s.Strict {
		return 0
	}
	return 1
}

// Rate implements Model.
func (s SpeedFactors) Rate(j *job.Job, a Alloc, p float64) (float64, float64) {
	r, until := s.Base.Rate(j, a, p)
	return r * s.Factor(a.GPUType), until
}

// Costs implements Model.
func (s SpeedFactors) Costs(j *job.Job) Costs { return s.Base.Costs(j) }

// MaxRate implements Bounder: Base's bound times the speed factor of the
// span's one GPU type, as Rate scales Base's rate on any allocation of
// that type; ok is false when Base has no bound (it is no Bounder).
func (s SpeedFactors) MaxRate(j *job.Job, sp Span, p float64) (float64, float64, bool) {
	r, until, ok := MaxRate(s.Base, j, sp, p)
	if !ok {
		return 0, math.Inf(1), false
	}
	return r * s.Factor(sp.GPUType), until, true
}

var _ Bounder = SpeedFactors{}
