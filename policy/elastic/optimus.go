package elastic

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
)

// optimusPolicies registers the policies this file defines; Policies calls it.
func optimusPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "optimus",
		Presets: []string{"optimus:oracle=true"},
		Summary: "Optimus (EuroSys'18) as the Pollux artifact re-implements it: one GPU per job in arrival " +
			"order, then each further GPU to the job whose remaining time it shortens most; jobs keep their own batch size",
		Knobs:    elasticOracleKnob,
		Elastic:  true,
		Defaults: Optimus{},
		Build:    contract.Typed(Optimus{}, func(_ contract.Context, k Optimus) (*Optimus, error) { return &k, nil }),
	})
}

// Optimus is the elastic scheduler of Optimus (EuroSys'18) in the form the
// Pollux (OSDI'21) artifact re-implements it (simulator/optimus.py,
// OptimusPolicy.optimize), which is what Pollux compares against:
//
//  1. every job gets its minimum GPU count (1 for the elastic jobs the
//     simulator replays), smallest minimum first, in arrival order among
//     equals, while GPUs last; a job that does not fit gets none and later
//     ones may still fit;
//  2. each remaining GPU goes, one at a time, to the running job with the
//     largest marginal gain r(n) - r(n+1), where r(n) is its predicted
//     remaining seconds on n GPUs (the artifact: remaining iterations x the
//     drop in step time), until no job gains (gain <= 0) or every job is at
//     its maximum. Ties go to the earlier submission, then the smaller ID
//     (the artifact: the first in its job table, which is arrival order).
//
// A job's maximum is its MaxGPUs, capped at batch size / smallest per-GPU
// batch when its limits are known (the artifact's max_replicas); a job's
// batch size never changes. Remaining times come from the jobs' hints or the
// performance model (see estimator); the artifact reads the applications'
// measured step times, which Oracle approximates (it compares remaining
// times, so a larger batch's statistical efficiency counts; the artifact
// compares step times at the job's batch). Each GPU type is a separate
// pool of the GPUs up for training; on a cluster of several sites each job
// runs in one site and takes a further GPU only while its site has one
// (Sites in elastic.go). Optimus' own convergence-curve fitting is not
// modelled: the remaining work is the job's own (Status.Work less its
// progress, Snapshot.Progress).
type Optimus struct {
	Oracle bool          `knob:"oracle"` // predict with the performance model, not the hints
	kept   *elasticRound // the memory of its rounds, made at the first
}

// Name implements engine.Policy.
func (o *Optimus) Name() string {
	if o.Oracle {
		return "optimus:oracle=true"
	}
	return "optimus"
}

// ProgressOnDemand implements engine.ProgressOnDemand: Optimus reads
// progress only through the snapshot (estimator: Snapshot.Progress for a
// job with fitted hints, Snapshot.Remaining otherwise), and only for the
// jobs it may give a further GPU: once every job has its minimum, each
// running job below its maximum while GPUs are left, none when the
// minimums take every GPU. With job agents (the Pollux model) the
// simulator keeps every job current anyway.
func (o *Optimus) ProgressOnDemand() bool { return true }

// Schedule implements engine.Policy. A round allocates nothing once the
// policy's memory has grown (elasticRound), but a reason whose text changed.
func (o *Optimus) Schedule(s *engine.Snapshot) engine.Plan {
	if o.kept == nil {
		o.kept = new(elasticRound)
	}
	return o.kept.schedule(s, o.Oracle, (*elasticRound).optimusAllocate, optimusTerms)
}

// optimusTerms are Optimus' reason terms.
func optimusTerms(b []byte, st *engine.Status) []byte {
	return append(appendMinTerm(b, st), " fewest first, then each free GPU goes where it saves the most remaining time"...)
}

// optimusAllocate hands out free GPUs of one pool (jobs in the snapshot's
// order: submission, then ID). The minimums go smallest first, ties in the
// pool's order (optimusByMin).
func (r *elasticRound) optimusAllocate(jobs []*elasticJob, free int) {
	order := r.optimusByMin(jobs)
	for _, e := range order {
		if e.min <= free && r.take(e) {
			e.n = e.min
			free -= e.min
		}
	}
	for free > 0 {
		var best *elasticJob
		bestGain := 0.0
		for _, e := range jobs {
			if e.n == 0 || e.n >= e.max || r.full(e) {
				continue
			}
			// NaN (both infinite) never wins; +Inf (a job that cannot run
			// on n GPUs but can on n+1) always does.
			if g := e.remaining(e.n) - e.remaining(e.n+1); g > bestGain {
				best, bestGain = e, g
			}
		}
		if best == nil {
			return
		}
		r.grow(best)
		free--
	}
}
