package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
)

// Packing (docs/sharing.md): with Config.PairThroughputs the engine may
// pack two whole-GPU jobs on the same GPUs (Assignment.PackWith), as the
// simulator does for Gandiva (pack=true) and Gavel (space_sharing=true).
// Both processes then run on those GPUs at once, each with half of each
// GPU's threads where MPS runs (the machinery of fractional jobs,
// share.go). Forming or leaving a pair is a start, resize or preemption
// of the job that moves, from its checkpoint; the job that keeps its GPUs
// keeps running, as in the simulator. The step times jobs report alone
// and packed refine the pair's speeds (perf.Pairs.Observe), which
// Gandiva reads to split pairs that do not help.

// packedShare is the part of each GPU's threads a member of a packed pair
// gets: the pair splits each GPU evenly (the policies decide who shares,
// not how).
const packedShare = 0.5

// loadPairs is the pair model of a throughputs file for a server with GPU
// types types; nil for "". A file that measures none of those types could
// never pack a pair here: refused, naming what each side has.
func loadPairs(path string, types []string) (*perf.Pairs, error) {
	if path == "" {
		return nil, nil
	}
	g, err := table.LoadGavel(path)
	if err != nil {
		return nil, err
	}
	have := g.GPUTypes()
	for _, t := range types {
		if slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, t) }) {
			return &perf.Pairs{Base: perf.Duration{}, Table: g}, nil
		}
	}
	return nil, fmt.Errorf("%s measures GPU types %s; this server's GPUs are %s: no pair could be packed (the file's types must be named as the server's)",
		path, strings.Join(have, ", "), strings.Join(types, ", "))
}

// model is the engine's performance model: durations, rating pairs when
// the server packs.
func (s *Server) model() perf.Model {
	if s.pairs != nil {
		return s.pairs
	}
	return perf.Duration{}
}

// checkJobType refuses a job_type the pair table does not know (a typo
// would silently keep the job from ever being packed).
func (s *Server) checkJobType(j *job.Job) []api.FieldError {
	if j.Model == "" || s.pairs == nil {
		return nil
	}
	g := s.pairs.Table
	probe := *j
	probe.Unit = job.Iterations
	if err := g.Check(&probe); errors.Is(err, perf.ErrUnknownModel) {
		return []api.FieldError{{Field: "job_type", Message: fmt.Sprintf("%q is not a job type of %s (--pair-throughputs): it could never be packed", j.Model, s.cfg.PairThroughputs)}}
	}
	return nil
}

// packed reports whether attempt a shares its GPUs with a partner.
func (a *attempt) packed() bool { return a.partner != "" }

// observePair hands the pair model the step time lj reported, alone or
// beside the job it shares its GPUs with now, and returns that job ("" when
// it runs alone). Under mu.
func (s *Server) observePair(lj *liveJob, stepTime float64) (partner string) {
	if stepTime <= 0 {
		return ""
	}
	st := s.eng.Job(lj.rec.ID)
	if st == nil || len(st.GPUs) == 0 {
		return ""
	}
	if s.pairs != nil && !st.Job.Fractional() {
		s.pairs.Observe(lj.rec.ID, st.PackedWith, st.Alloc.GPUType, stepTime)
	}
	return st.PackedWith
}

// forgetEnded drops what the server keeps about a job only while it is
// active: what it reported to the pair model, and the last reason its
// assignment was dropped (notePolicyWarnings).
func (s *Server) forgetEnded(id string) {
	if s.pairs != nil {
		s.pairs.Forget(id)
	}
	delete(s.dropped, id)
}
