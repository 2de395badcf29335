package enginetest

import "github.com/tide-sched/tide/engine"

// NotOnDemand hides a policy's engine.JobsOnDemand and nothing else: it
// forwards the optional interfaces the engine asks a policy for
// (engine.IncrementalPolicy, ProgressFree, ProgressOnDemand) and unwraps
// to the policy for those found with engine.As (Stateful, ReclaimCoster).
// The engine then hands the policy Snapshot.Jobs every round and a job
// that ends leaves the active list at once: a policy's rounds with and
// without reading the jobs on demand can be compared (policytest's
// OnDemandMatches).
type NotOnDemand struct{ engine.Policy }

// Unwrap implements engine.Wrapper.
func (p NotOnDemand) Unwrap() engine.Policy { return p.Policy }

// Incremental implements engine.IncrementalPolicy as the policy does.
func (p NotOnDemand) Incremental() bool {
	ip, ok := p.Policy.(engine.IncrementalPolicy)
	return ok && ip.Incremental()
}

// ProgressFree implements engine.ProgressFree as the policy does.
func (p NotOnDemand) ProgressFree() bool {
	pf, ok := p.Policy.(engine.ProgressFree)
	return ok && pf.ProgressFree()
}

// ProgressOnDemand implements engine.ProgressOnDemand as the policy does.
func (p NotOnDemand) ProgressOnDemand() bool {
	pd, ok := p.Policy.(engine.ProgressOnDemand)
	return ok && pd.ProgressOnDemand()
}

// OnDemand reports whether the engine would hand p's rounds the active
// jobs on demand: p is an engine.IncrementalPolicy and an
// engine.JobsOnDemand that both say so.
func OnDemand(p engine.Policy) bool {
	ip, ok := p.(engine.IncrementalPolicy)
	jp, ok2 := p.(engine.JobsOnDemand)
	return ok && ok2 && ip.Incremental() && jp.JobsOnDemand()
}
