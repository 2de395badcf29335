package elastic

import (
	"cmp"
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
)

// afsPolicies registers the policies this file defines; Policies calls it.
func afsPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "afs",
		Summary: "AFS-L (CoDDL, NSDI'21): one GPU each, shortest remaining time first when GPUs are short; " +
			"each further GPU by pairwise comparison of how much it shortens a shorter and a longer job",
		Knobs:    elasticOracleKnob,
		Elastic:  true,
		Defaults: AFS{},
		Build:    contract.Typed(AFS{}, func(_ contract.Context, k AFS) (*AFS, error) { return &k, nil }),
	})
}

// AFS is the AFS-L allocation of CoDDL (NSDI'21), following alg_c in the
// public simulator code the shared policy notes quote
// (../shared/docs/POLICIES.md, beside the repository, not in it)
// (a Python module of policies fifo, srtf, optimus, alg_c, opt_pp,
// tiresias_las...). Within each GPU type's pool, with r(n) a job's predicted
// remaining seconds on n GPUs:
//
//  1. every job gets its minimum GPU count (1 for the elastic jobs the
//     simulator replays), shortest r(min) first (ties: earlier submission,
//     then smaller ID), while GPUs last; a job that does not fit gets none
//     and later ones may still fit. With fewer GPUs than jobs this gives one
//     GPU each to the jobs with the shortest remaining time, as alg_c does.
//  2. each remaining GPU goes to the winner of one pass of pairwise
//     comparisons over the jobs that hold GPUs and can take one more, in
//     arrival order: the candidate starts as the first job; against each
//     next job m, the shorter of the two (smaller r at its current count;
//     the candidate on a tie) is l, the other h, and the candidate becomes l
//     iff r_l(n_l)/r_l(n_l+1) + r_h(n_h+1)/r_h(n_h) > 2, else h. The winner
//     gets the GPU; a job leaves the comparisons at its maximum. As in
//     alg_c, GPUs keep being handed out while any job can take one, even
//     when they no longer shorten anything.
//
// Deviations from alg_c: minimum counts above 1, per-type pools of the GPUs
// up for training where, on a cluster of several sites, each job runs in
// one site and takes a further GPU only while its site has one (Sites in
// elastic.go), and a job whose predicted time on one more GPU is
// infinite (the model says it cannot run there) leaves the comparisons. A job's maximum and the
// remaining-time estimate are Optimus' (elasticMaxGPUs, estimator).
type AFS struct {
	Oracle bool          `knob:"oracle"` // predict with the performance model, not the hints
	kept   *elasticRound // the memory of its rounds, made at the first
}

// Name implements engine.Policy.
func (a *AFS) Name() string {
	if a.Oracle {
		return "afs:oracle=true"
	}
	return "afs"
}

// ProgressOnDemand implements engine.ProgressOnDemand: AFS reads progress
// only through the snapshot (estimator). Its rule orders every job by its
// remaining time at its minimum each round, so a round pulls every running
// job; with job agents (the Pollux model) the simulator keeps every job
// current anyway.
func (a *AFS) ProgressOnDemand() bool { return true }

// Schedule implements engine.Policy. A round allocates nothing once the
// policy's memory has grown (elasticRound), but a reason whose text changed.
func (a *AFS) Schedule(s *engine.Snapshot) engine.Plan {
	if a.kept == nil {
		a.kept = new(elasticRound)
	}
	return a.kept.schedule(s, a.Oracle, (*elasticRound).afsAllocate, afsTerms)
}

// afsTerms are AFS' reason terms.
func afsTerms(b []byte, st *engine.Status) []byte {
	return append(appendMinTerm(b, st), " shortest remaining first, then GPUs go by AFS' pairwise speedup rule"...)
}

// afsAllocate hands out free GPUs of one pool (jobs in arrival order).
func (r *elasticRound) afsAllocate(jobs []*elasticJob, free int) {
	order := append(r.order[:0], jobs...)
	r.order = order
	slices.SortStableFunc(order, func(a, b *elasticJob) int {
		return cmp.Compare(a.remaining(a.min), b.remaining(b.min))
	})
	for _, e := range order {
		if e.min <= free && r.take(e) {
			e.n = e.min
			free -= e.min
		}
	}
	cands := r.cands[:0]
	for _, e := range jobs {
		if afsOpen(e) {
			cands = append(cands, e)
		}
	}
	for free > 0 {
		if r.sites { // a job whose site is full leaves the comparisons
			open := cands[:0]
			for _, e := range cands {
				if !r.full(e) {
					open = append(open, e)
				}
			}
			cands = open
		}
		if len(cands) == 0 {
			break
		}
		c := cands[0]
		for _, m := range cands[1:] {
			l, h := c, m
			if m.remaining(m.n) < c.remaining(c.n) {
				l, h = m, c
			}
			if afsRatio(l.remaining(l.n), l.remaining(l.n+1))+afsRatio(h.remaining(h.n+1), h.remaining(h.n)) > 2 {
				c = l
			} else {
				c = h
			}
		}
		r.grow(c)
		free--
		if !afsOpen(c) {
			i := slices.Index(cands, c)
			cands = slices.Delete(cands, i, i+1)
		}
	}
	r.cands = cands
}

// afsOpen reports whether e takes part in AFS' comparisons: it runs, is
// below its maximum and can run on one GPU more.
func afsOpen(e *elasticJob) bool {
	return e.n > 0 && e.n < e.max && !math.IsInf(e.remaining(e.n+1), 1)
}

// afsRatio is a/b, with 1 for equal values (0/0 for a finished job, Inf/Inf
// for one that cannot run on either count).
func afsRatio(a, b float64) float64 {
	if a == b {
		return 1
	}
	return a / b
}
