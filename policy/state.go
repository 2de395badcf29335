package policy

import (
	"fmt"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/sorted"
)

// SaveState implements engine.Stateful: the inner policy's state (a quota
// keeps none of its own).
func (q *Quota) SaveState() ([]byte, error) { return engine.SaveState(q.Inner) }

// LoadState implements engine.Stateful.
func (q *Quota) LoadState(b []byte) error { return engine.LoadState(q.Inner, b) }

// priorityState is each class's instance's state, and which class holds
// the instance built first.
type priorityState struct {
	First   int
	HasAny  bool
	Classes []sorted.Pair[int, []byte]
}

// SaveState implements engine.Stateful.
func (p *Priority) SaveState() ([]byte, error) {
	var st priorityState
	for c, pol := range sorted.All(p.byClass) {
		b, err := engine.SaveState(pol)
		if err != nil {
			return nil, err
		}
		st.Classes = append(st.Classes, sorted.Pair[int, []byte]{Key: c, Val: b})
		if pol == p.first {
			st.First, st.HasAny = c, true
		}
	}
	return engine.EncodeState(st)
}

// LoadState implements engine.Stateful: the classes are built again, each
// with its state.
func (p *Priority) LoadState(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var st priorityState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	p.byClass = map[int]engine.Policy{}
	if st.HasAny {
		p.byClass[st.First] = p.first
	}
	for _, e := range st.Classes {
		c := e.Key
		if _, ok := p.byClass[c]; ok {
			continue
		}
		pol, err := p.New()
		if err != nil {
			return err
		}
		p.byClass[c] = pol
	}
	for _, e := range st.Classes {
		if err := engine.LoadState(p.byClass[e.Key], e.Val); err != nil {
			return fmt.Errorf("priority class %d: %w", e.Key, err)
		}
	}
	return nil
}
