package gavel

import (
	"fmt"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/sorted"
)

// gavelState is what Gavel keeps between rounds (engine.Stateful): the
// plan it keeps between its own rounds, each job's allocation, deficits
// and received time, the pairs', the time on each type, when it last
// recomputed, and its random order of types.
type gavelState struct {
	RNG       []byte
	Last      []engine.Assignment
	LastPlan  float64
	Planned   bool
	Jobs      []sorted.Pair[string, gavelJobState]
	Pairs     []sorted.Pair[string, gavelPairSaved]
	Types     []string
	Cap       []float64 // the capacity at the last re-plan (Gavel.capSeen)
	TypeTime  []float64
	LastReset float64
	Stale     bool
	Solves    int
	Failures  int
	Alloc     []byte // the allocator's own state, when it keeps one
}

type gavelJobState struct {
	X, Deficit, Received, Seen []float64
	Present                    bool
}

type gavelPairSaved struct{ X, Deficit, Received []float64 }

// SaveState implements engine.Stateful.
func (g *Gavel) SaveState() ([]byte, error) {
	rng, err := g.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	st := gavelState{RNG: rng, Last: g.last.Run, LastPlan: g.lastPlan, Planned: g.planned, Types: g.types, Cap: g.capSeen, TypeTime: g.typeTime,
		LastReset: g.lastReset, Stale: g.stale, Solves: g.Solves, Failures: g.Failures}
	for id, j := range sorted.All(g.jobs) {
		st.Jobs = append(st.Jobs, sorted.Pair[string, gavelJobState]{Key: id, Val: gavelJobState{X: j.x, Deficit: j.deficit, Received: j.received, Seen: j.seen, Present: j.present}})
	}
	for k, p := range sorted.All(g.pairState) {
		st.Pairs = append(st.Pairs, sorted.Pair[string, gavelPairSaved]{Key: k, Val: gavelPairSaved{X: p.x, Deficit: p.deficit, Received: p.received}})
	}
	if a, ok := g.Alloc.(engine.Stateful); ok {
		if st.Alloc, err = a.SaveState(); err != nil {
			return nil, err
		}
	}
	return engine.EncodeState(st)
}

// LoadState implements engine.Stateful.
func (g *Gavel) LoadState(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var st gavelState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	if err := g.pcg.UnmarshalBinary(st.RNG); err != nil {
		return err
	}
	g.last, g.lastSt = engine.Plan{Run: st.Last}, nil
	g.lastPlan, g.planned, g.types, g.capSeen, g.typeTime = st.LastPlan, st.Planned, st.Types, st.Cap, st.TypeTime
	g.lastReset, g.stale, g.Solves, g.Failures = st.LastReset, st.Stale, st.Solves, st.Failures
	g.jobs = make(map[string]*gavelJob, len(st.Jobs))
	for _, e := range st.Jobs {
		id, j := e.Key, e.Val
		g.jobs[id] = &gavelJob{x: j.X, deficit: j.Deficit, received: j.Received, seen: j.Seen, present: j.Present}
	}
	g.pairState = make(map[string]*gavelPairState, len(st.Pairs))
	for _, e := range st.Pairs {
		k, p := e.Key, e.Val
		g.pairState[k] = &gavelPairState{x: p.X, deficit: p.Deficit, received: p.Received}
	}
	if a, ok := g.Alloc.(engine.Stateful); ok {
		return a.LoadState(st.Alloc)
	}
	return nil
}

// gavelFIFOState is Gavel's FIFO allocator's state: the type each job was
// given, which it keeps until it finishes, its random sources, and under
// pick=gavel each job's place in arrival order.
type gavelFIFOState struct {
	Types []sorted.Pair[string, int]
	RNG   []byte
	PyMT  []uint32
	PyIdx int
	Seq   []sorted.Pair[string, int]
	NextQ int
}

// SaveState implements engine.Stateful.
func (f *gavelFIFO) SaveState() ([]byte, error) {
	rng, err := f.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return engine.EncodeState(gavelFIFOState{Types: sorted.Pairs(f.types), RNG: rng, PyMT: f.py.mt[:], PyIdx: f.py.idx, Seq: sorted.Pairs(f.seq), NextQ: f.nextQ})
}

// LoadState implements engine.Stateful.
func (f *gavelFIFO) LoadState(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var st gavelFIFOState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	if len(st.PyMT) != len(f.py.mt) {
		return fmt.Errorf("gavel-fifo state: %d words of generator state, want %d", len(st.PyMT), len(f.py.mt))
	}
	f.types, f.seq, f.nextQ = sorted.Map(st.Types), sorted.Map(st.Seq), st.NextQ
	copy(f.py.mt[:], st.PyMT)
	f.py.idx = st.PyIdx
	return f.pcg.UnmarshalBinary(st.RNG)
}
