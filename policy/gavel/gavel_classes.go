package gavel

import (
	"math"

	"github.com/tide-sched/tide/solver"
)

// Job classes: Gavel's LP over classes of jobs instead of jobs, for large
// clusters (the classes knob; docs/scale.md).
//
// Gavel's throughputs are per job type and scale factor, so jobs of the same
// type, scale factor and weight are interchangeable in its LPs, and one
// variable set per class serves them all (Gavel, OSDI'20, and its
// simulator's job types). tide's model gives each job its own throughput
// (it may change with progress), so a class here is the jobs that ask for
// the same GPUs, can run on the same types, and whose throughput on every
// type (and, for the objectives that read them, work left and age) agree
// within a relative tolerance: they share one allocation X[class][k]. Each
// member's own rows are merged into one that is at least as strict for
// every member (the smallest coefficient of each variable, the largest
// right-hand side; the variables are >= 0), so the class LP's allocation is
// feasible for the per-job LP, and its objective is at most the per-job
// optimum; how much it gives up is measured in TestGavelClassesQuality.
// Space sharing keeps the per-job LP (its pair variables name jobs).

// gavelClassKeys says what, besides GPUs and throughputs, a class's jobs
// must agree on for an allocator: its rows read work left (makespan,
// finish-time fairness) and age (finish-time fairness).
func gavelClassKeys(a gavelAllocator) (rem, age bool) {
	switch a.(type) {
	case gavelMakespan:
		return true, false
	case gavelFTF:
		return true, true
	}
	return false, false
}

// classify sets p.class: jobs whose GPUs, runnable types and bucketed
// throughputs (and rem, age when asked) agree share a class, buckets
// being powers of 1+tol. Classes are numbered in order of their first job.
func (p *gavelProblem) classify(tol float64, rem, age bool) {
	bucket := func(v float64) int64 {
		if !(v > 0) {
			return math.MinInt64
		}
		return int64(math.Floor(math.Log(v) / math.Log1p(tol)))
	}
	type key string
	index := map[key]int{}
	p.class = make([]int, len(p.jobs))
	buf := make([]byte, 0, 64)
	put := func(v int64) {
		for i := range 8 {
			buf = append(buf, byte(v>>(8*i)))
		}
	}
	for m := range p.jobs {
		buf = buf[:0]
		put(int64(p.gpus[m]))
		for _, r := range p.tput[m] {
			put(bucket(r))
		}
		if rem {
			put(bucket(p.rem[m]))
		}
		if age {
			put(bucket(p.age[m] + 1))
		}
		c, ok := index[key(buf)]
		if !ok {
			c = len(index)
			index[key(buf)] = c
		}
		p.class[m] = c
	}
	p.classes = len(index)
}

// classRow is the merged row of a class: the smallest coefficient of each
// variable over its members' rows, the largest right-hand side.
type classRow struct {
	terms []solver.Term
	rhs   float64
}

// ge adds job m's row sum(terms) >= rhs: at once without classes, else
// merged into its class's row (flush adds those).
func (l *gavelLP) ge(m int, terms []solver.Term, rhs float64) {
	if l.p.class == nil {
		l.m.Ge(terms, rhs, "")
		return
	}
	if l.rows == nil {
		l.rows = make([]*classRow, l.p.classes)
	}
	c := l.p.class[m]
	r := l.rows[c]
	if r == nil {
		l.rows[c] = &classRow{terms: append([]solver.Term(nil), terms...), rhs: rhs}
		return
	}
	// Members share their variables and list them in the same order (they
	// run on the same types).
	for i := range r.terms {
		r.terms[i].Coef = math.Min(r.terms[i].Coef, terms[i].Coef)
	}
	r.rhs = math.Max(r.rhs, rhs)
}

// flush adds the classes' merged rows.
func (l *gavelLP) flush() {
	for _, r := range l.rows {
		if r != nil {
			l.m.Ge(r.terms, r.rhs, "")
		}
	}
	l.rows = nil
}
