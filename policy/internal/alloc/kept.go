package alloc

import "github.com/tide-sched/tide/engine"

// Greedy is GreedyInto with p as its pool, one the caller keeps from round
// to round (the zero Pool is ready), instead of one from GreedyInto's
// sync.Pool: a sync.Pool drops what it holds at garbage collections, so
// the first pass after one allocates a pool again, and a policy whose
// steady rounds must allocate nothing (issue 19) keeps its own. p keeps
// only its memory between calls.
func (p *Pool) Greedy(s *engine.Snapshot, order []*engine.Status, strict bool, run []engine.Assignment) engine.Plan {
	defer func() { *p = Pool{counts: p.counts, sites: p.sites} }()
	return p.greedy(s, order, strict, run)
}
