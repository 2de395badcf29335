package perf

import (
	"strings"
	"sync"

	"github.com/tide-sched/tide/job"
)

// Pairs is the Sharer of a live executor (tide serve) whose jobs are timed
// in seconds, not in a table's units: a job alone runs as Base rates it,
// and each of two jobs sharing GPUs runs at Base's rate times its speed
// packed over its speed alone. That ratio is measured live where it can be
// (Observe: the step times a job reports alone and beside its partner, on
// the GPU type), else taken from Table, the measured pair throughputs of
// the jobs' types (job.Model names a job type of Table: Gavel's), packed
// over alone. Without either the pair is not measured (Shared's ok is
// false) and the packing policies do not pack it.
//
// A Pairs must not be copied after first use; Observe and Forget may run
// beside readers.
type Pairs struct {
	Base  Model
	Table Sharer // nil: only pairs measured live

	mu     sync.RWMutex
	alone  map[stepKey]float64 // job alone on a GPU type -> last step time, s
	beside map[stepKey]float64 // job beside partner on a GPU type -> last step time, s
}

// stepKey is a job's step time alone (partner "") or beside partner, on
// GPUs of a type (lower case).
type stepKey struct{ job, partner, gpuType string }

// Name implements Model.
func (p *Pairs) Name() string {
	if p.Table == nil {
		return p.Base.Name() + "+measured-pairs"
	}
	return p.Base.Name() + "+pairs:" + p.Table.Name()
}

// Check implements Model (Base's).
func (p *Pairs) Check(j *job.Job) error { return p.Base.Check(j) }

// Work implements Model (Base's).
func (p *Pairs) Work(j *job.Job) float64 { return p.Base.Work(j) }

// Rate implements Model (Base's).
func (p *Pairs) Rate(j *job.Job, a Alloc, pr float64) (float64, float64) {
	return p.Base.Rate(j, a, pr)
}

// Costs implements Model (Base's).
func (p *Pairs) Costs(j *job.Job) Costs { return p.Base.Costs(j) }

// MaxRate implements Bounder (Base's bound, as Rate is Base's rate); ok is
// false when Base has no bound (it is no Bounder). It bounds a job alone:
// sharing GPUs, a job runs at its rate alone times its ratio (Ratios),
// above the bound only where a ratio is above 1 (none in Gavel's table).
func (p *Pairs) MaxRate(j *job.Job, s Span, pr float64) (float64, float64, bool) {
	return MaxRate(p.Base, j, s, pr)
}

// Shared implements Sharer: Base's rate of each job on a times its speed
// beside the other over its speed alone (Ratio).
func (p *Pairs) Shared(j1, j2 *job.Job, a Alloc) (r1, r2 float64, ok bool) {
	q1, q2, ok := p.Ratios(j1, j2, a)
	if !ok {
		return 0, 0, false
	}
	b1, _ := p.Base.Rate(j1, a, 0)
	b2, _ := p.Base.Rate(j2, a, 0)
	return b1 * q1, b2 * q2, true
}

// Ratios are j1's and j2's speeds sharing a's GPUs over their speeds
// alone on them: each measured live when the job has reported step times
// both alone and beside the other on a's GPU type, else Table's packed
// throughput over its throughput alone for the jobs' types; ok is false
// when a member has neither.
func (p *Pairs) Ratios(j1, j2 *job.Job, a Alloc) (q1, q2 float64, ok bool) {
	m1, ok1 := p.measured(j1.ID, j2.ID, a.GPUType)
	m2, ok2 := p.measured(j2.ID, j1.ID, a.GPUType)
	if ok1 && ok2 {
		return m1, m2, true
	}
	t1, t2, ok := p.table(j1, j2, a)
	if !ok {
		return 0, 0, false
	}
	if ok1 {
		t1 = m1
	}
	if ok2 {
		t2 = m2
	}
	return t1, t2, true
}

// table is Table's ratios of j1 and j2 on a.
func (p *Pairs) table(j1, j2 *job.Job, a Alloc) (q1, q2 float64, ok bool) {
	if p.Table == nil || j1.Model == "" || j2.Model == "" {
		return 0, 0, false
	}
	r1, r2, ok := p.Table.Shared(j1, j2, a)
	if !ok {
		return 0, 0, false
	}
	t1, _ := p.Table.Rate(j1, a, 0)
	t2, _ := p.Table.Rate(j2, a, 0)
	if !(t1 > 0 && t2 > 0) {
		return 0, 0, false
	}
	return r1 / t1, r2 / t2, true
}

// measured is job id's step time alone over its step time beside partner
// on GPU type t, when both were reported.
func (p *Pairs) measured(id, partner, t string) (float64, bool) {
	t = strings.ToLower(t)
	p.mu.RLock()
	defer p.mu.RUnlock()
	alone, ok1 := p.alone[stepKey{id, "", t}]
	packed, ok2 := p.beside[stepKey{id, partner, t}]
	if !ok1 || !ok2 {
		return 0, false
	}
	return alone / packed, true
}

// Observe records a step time (seconds, > 0) job id reported on GPUs of
// type gpuType, alone (partner "") or sharing them with partner; the
// latest replaces the one before. Other values are ignored.
func (p *Pairs) Observe(id, partner, gpuType string, stepTime float64) {
	if !(stepTime > 0) || stepTime > 1e9 || id == "" {
		return
	}
	k := stepKey{id, partner, strings.ToLower(gpuType)}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := &p.alone
	if partner != "" {
		m = &p.beside
	}
	if *m == nil {
		*m = map[stepKey]float64{}
	}
	(*m)[k] = stepTime
}

// Forget drops what job id reported, alone and beside others (it ended).
func (p *Pairs) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range []map[stepKey]float64{p.alone, p.beside} {
		for k := range m {
			if k.job == id {
				delete(m, k)
			}
		}
	}
}

var (
	_ Sharer  = (*Pairs)(nil)
	_ Bounder = (*Pairs)(nil)
)
