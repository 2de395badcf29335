package enginetest

import (
	"bytes"
	"testing"

	"github.com/tide-sched/tide/engine"
)

// StableState wraps a policy to check, at each save (engine.SaveState, as
// a handover or a live executor saves), that its state is a function of
// the state alone: saving again gives the same bytes, and so does saving
// from a fresh instance (Fresh) that loaded them. Executors compare and
// persist these bytes; a gob of a Go map fails this most of the time, the
// map's order being random. Saves counts the saves that held state.
type StableState struct {
	engine.Policy
	T     testing.TB
	Fresh func() (engine.Policy, error)
	Saves *int
}

// Unwrap returns the policy checked.
func (s *StableState) Unwrap() engine.Policy { return s.Policy }

// SaveState saves the policy's state, checking it as StableState says.
func (s *StableState) SaveState() ([]byte, error) {
	b, err := engine.SaveState(s.Policy)
	if err != nil || len(b) == 0 {
		return b, err
	}
	if s.Saves != nil {
		*s.Saves++
	}
	for range 3 {
		if again, err := engine.SaveState(s.Policy); err != nil || !bytes.Equal(again, b) {
			s.T.Errorf("%s: saving the same state again gave other bytes (%v)", s.Name(), err)
			break
		}
	}
	p, err := s.Fresh()
	if err != nil {
		return nil, err
	}
	if err := engine.LoadState(p, b); err != nil {
		return nil, err
	}
	if again, err := engine.SaveState(p); err != nil || !bytes.Equal(again, b) {
		s.T.Errorf("%s: state loaded into a fresh instance and saved again gave other bytes (%v)", s.Name(), err)
	}
	return b, nil
}

// LoadState loads b into the policy checked.
func (s *StableState) LoadState(b []byte) error { return engine.LoadState(s.Policy, b) }
