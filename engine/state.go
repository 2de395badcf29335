package engine

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"sort"
)

// Stateful is a policy that keeps state between rounds beyond its jobs'
// memos (Status.Memo): queues it remembers, timers, learned priorities,
// forecasts, cached solutions that change its later plans.
//
// The contract, which makes a policy's plans reproducible across a restart:
// a policy's plan is a function of the snapshot it is given and its state
// before the round (its memos and SaveState's bytes). The same sequence of
// snapshots, started from the same state, gives the same plans and leaves
// the same state. So a live executor that saves the state after a round
// and, after a restart, loads it into a fresh instance built from the same
// spec and context gets the plans the old instance would have made.
//
// SaveState returns the state as bytes, to be kept by the executor; it must
// not change the policy. LoadState, on a fresh instance of the same spec
// and context, replaces its state with bytes SaveState returned; nil or
// empty bytes leave it fresh. A policy whose
// state is only a cache of what it can recompute need not be Stateful, as
// long as its plans do not depend on whether the cache is warm.
//
// Wrappers (Quota, Priority) are Stateful when they hold state themselves
// or wrap a Stateful policy; they save their inner policies' state with
// their own.
type Stateful interface {
	SaveState() ([]byte, error)
	LoadState(b []byte) error
}

// SaveState returns the state of p, or of the first Stateful policy p
// wraps (a wrapper that keeps no state of its own need not be Stateful),
// nil when there is none.
func SaveState(p Policy) ([]byte, error) {
	if s, ok := As[Stateful](p); ok {
		return s.SaveState()
	}
	return nil, nil
}

// LoadState loads b into the policy SaveState saved it from; it refuses
// state for a policy that keeps none.
func LoadState(p Policy, b []byte) error {
	if s, ok := As[Stateful](p); ok {
		return s.LoadState(b)
	}
	if len(b) > 0 {
		return fmt.Errorf("policy %s keeps no state, got %d bytes", p.Name(), len(b))
	}
	return nil
}

// engineState is what Engine.PolicyState saves: the rounds run (the
// policy sees them as Snapshot.Round), the memos of the active jobs, and
// the policy's own state.
type engineState struct {
	Policy string
	Rounds int
	Memos  []jobMemo // by job ID
	State  []byte
}

type jobMemo struct {
	Job  string
	Memo Memo
}

// PolicyState returns everything the policy's future plans depend on
// besides the jobs themselves: the round count, the memos of the active
// jobs and the policy's state (Stateful). A live executor saves it after
// each round and hands it to RestorePolicyState after a restart, once it
// has submitted (and adopted or carried) the jobs again.
func (e *Engine) PolicyState() ([]byte, error) {
	st := engineState{Policy: e.cfg.Policy.Name(), Rounds: e.rounds}
	for _, s := range e.list() {
		if s.Memo != (Memo{}) && !s.State.Terminal() {
			st.Memos = append(st.Memos, jobMemo{s.Job.ID, s.Memo})
		}
	}
	sort.Slice(st.Memos, func(a, b int) bool { return st.Memos[a].Job < st.Memos[b].Job })
	b, err := SaveState(e.cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("engine: saving policy %s's state: %w", e.cfg.Policy.Name(), err)
	}
	st.State = b
	return EncodeState(st)
}

// RestorePolicyState loads what PolicyState saved: the round count, the
// memos of jobs the engine knows (others are ignored: they ended while the
// executor was down) and the policy's state. It refuses state saved under
// another policy. The engine's policy is replaced by p when p is not nil
// (a fresh instance, as after a restart).
func (e *Engine) RestorePolicyState(p Policy, b []byte) error {
	e.materialize() // the old policy's Explainer goes with it
	if p != nil {
		e.cfg.Policy = p
		e.setPolicyMode(p)
	}
	e.incr = false
	if len(b) == 0 {
		return nil
	}
	var st engineState
	if err := DecodeState(b, &st); err != nil {
		return fmt.Errorf("engine: policy state: %w", err)
	}
	if st.Policy != e.cfg.Policy.Name() {
		return fmt.Errorf("engine: policy state saved under %q, the policy is %q", st.Policy, e.cfg.Policy.Name())
	}
	if err := LoadState(e.cfg.Policy, st.State); err != nil {
		return fmt.Errorf("engine: loading policy %s's state: %w", st.Policy, err)
	}
	e.rounds = st.Rounds
	e.incr = false // the memos change under the policy
	for _, s := range e.list() {
		s.Memo = Memo{}
	}
	for _, m := range st.Memos {
		if s := e.jobs[m.Job]; s != nil {
			s.Memo = m.Memo
		}
	}
	return nil
}

// EncodeState encodes a policy's state value (exported fields, maps,
// slices; NaN and infinities kept) for SaveState.
func EncodeState(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeState decodes what EncodeState encoded into v, a pointer.
func DecodeState(b []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(b)).Decode(v)
}
