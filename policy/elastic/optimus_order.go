package elastic

import (
	"cmp"
	"slices"

	"github.com/tide-sched/tide/policy/internal/kept"
)

// Optimus' order of the minimums (issue 19: a policy that sorts every
// active job each round).
//
// Optimus gives every job of a pool its minimum GPU count, smallest
// minimum first, ties in the pool's order (the snapshot's: submission,
// then ID), as the Pollux artifact's stable sort by min_replicas does. The
// key is a small integer: at least 1 in an engine (job.Validate) and at
// most the pool's GPU count (elasticRound.pool leaves out a job whose
// minimum exceeds it). So a stable counting sort gives the stable sort's
// result, job for job, with two passes over the pool and one over the
// range of its minimums, and no comparison at all.
//
// The order is not kept from round to round (policy/internal/kept, as
// SRTF, EDF and 2D-Gittins keep theirs): that was tried and measured
// slower than the sort it replaced (docs/scale.md, "Optimus' minimums").
// The pools are rebuilt every round (a waiting job that accepts any GPU
// type may be bound to another pool each round), so a kept order still
// walks every job of the pool, and its total order (minimum, then
// submission, then ID) reads each job's record where the sort reads only
// the minimum.

// optimusSpan bounds the range of minimums the counting sort takes, by the
// pool's size: past it (a snapshot built by hand with minimums far apart)
// the comparison sort is cheaper, and nothing grows with a job's key.
func optimusSpan(jobs int) int { return 4*jobs + 64 }

// optimusByMin returns jobs sorted by minimum GPU count, ties in the order
// of jobs: the result of slices.SortStableFunc by elasticJob.min, in r's
// memory (r.order), valid until r's next call.
func (r *elasticRound) optimusByMin(jobs []*elasticJob) []*elasticJob {
	order := resize(r.order, len(jobs))
	r.order = order
	if len(jobs) == 0 {
		return order
	}
	lo, hi := jobs[0].min, jobs[0].min
	for _, e := range jobs[1:] {
		lo, hi = min(lo, e.min), max(hi, e.min)
	}
	span := hi - lo // negative when it overflows
	if span == 0 {
		copy(order, jobs) // one minimum: the pool's order
		return order
	}
	if span < 0 || span > optimusSpan(len(jobs)) {
		copy(order, jobs)
		slices.SortStableFunc(order, func(a, b *elasticJob) int { return cmp.Compare(a.min, b.min) })
		return order
	}
	r.order, r.counts = kept.ByCount(order, jobs, func(e *elasticJob) int { return e.min }, lo, hi, r.counts)
	return r.order
}
