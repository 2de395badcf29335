// Package present finds a round's jobs by their engine slot
// (engine.Status.Slot): whether a status a policy kept from an earlier
// round is still among the snapshot's jobs, and where, without a map by ID.
package present

import (
	"slices"

	"github.com/tide-sched/tide/engine"
)

// Set holds, by slot, where each job of the snapshot last marked is. Its
// memory is reused from round to round; it keeps pointers to the marked
// statuses until they are overwritten.
type Set struct {
	marks []mark
	gen   int
}

type mark struct {
	st  *engine.Status
	gen int // Set.gen when set
	at  int // index in the snapshot's Jobs
}

// Mark records the snapshot's jobs. It reports false, and the set then
// finds nothing, when two of them share a slot: statuses not handed out by
// one engine (a policy test's); the caller falls back on IDs.
func (p *Set) Mark(jobs []*engine.Status) bool {
	p.gen++
	for i, st := range jobs {
		slot := st.Slot
		if slot < 0 {
			p.gen++ // forget this round's marks
			return false
		}
		if slot >= len(p.marks) {
			p.marks = slices.Grow(p.marks, slot+1-len(p.marks))[:slot+1]
		}
		if m := p.marks[slot]; m.gen == p.gen && m.st != st {
			p.gen++
			return false
		}
		p.marks[slot] = mark{st: st, gen: p.gen, at: i}
	}
	return true
}

// Index returns st's index in the jobs last marked, and whether it is
// among them (false for nil).
func (p *Set) Index(st *engine.Status) (int, bool) {
	if st == nil || st.Slot < 0 || st.Slot >= len(p.marks) {
		return 0, false
	}
	m := p.marks[st.Slot]
	if m.st != st || m.gen != p.gen {
		return 0, false
	}
	return m.at, true
}

// Has reports whether st is among the jobs last marked.
func (p *Set) Has(st *engine.Status) bool {
	_, ok := p.Index(st)
	return ok
}
