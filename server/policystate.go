package server

import (
	"bytes"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/store"
)

// policyStateKey is the store's metadata key under which the policy's
// state (engine.Engine.PolicyState: its round count, its jobs' memos and
// what a Stateful policy declares) survives a restart: Tiresias' queues,
// Gavel's allocation and deficits, DeepBoot's timers, tidal's forecasts.
const policyStateKey = "policy-state"

// Unwrap implements engine.Wrapper: the engine finds the policy's optional
// interfaces (engine.Stateful among them) through the tenants' quotas.
func (p *quotaPolicy) Unwrap() engine.Policy { return p.inner }

// notePolicyState takes the policy's state after a round; the next commit
// writes it when it changed. Under mu.
func (s *Server) notePolicyState() {
	b, err := s.eng.PolicyState()
	if err != nil {
		s.log.Error("saving the policy's state", "err", err)
		return
	}
	if !bytes.Equal(b, s.savedState) {
		s.polState, s.savedState = b, b
	}
}

// putPolicyState writes the state taken by notePolicyState, if any.
func putPolicyState(tx *store.Tx, b []byte) error {
	if b == nil {
		return nil
	}
	return tx.SetMeta(policyStateKey, b)
}

// restorePolicyState loads the state the last run saved into the engine,
// once the jobs are back. State saved under another policy (the server was
// restarted with a different --policy) is left alone, with a warning.
// Under mu.
func (s *Server) restorePolicyState() {
	var b []byte
	if err := s.db.View(func(tx *store.Tx) error { b = tx.Meta(policyStateKey); return nil }); err != nil || len(b) == 0 {
		return
	}
	if err := s.eng.RestorePolicyState(nil, b); err != nil {
		s.log.Warn("the policy's saved state was not restored; it starts afresh", "err", err)
		return
	}
	s.savedState = b
}
