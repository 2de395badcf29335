package classic

import (
	"fmt"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/sorted"
)

// fifoState is FIFO's cache of predicted ends (engine.Stateful): it
// changes no decision, but the predicted starts it explains with depend
// on when each end was computed.
type fifoState struct {
	Ends []sorted.Pair[string, fifoEndState]
}

type fifoEndState struct {
	// Type is the GPU type the end was priced on ("" the job's own, as
	// on a cluster of one type; gob leaves it out then).
	Type         string
	GPUs, Starts int
	Running      bool
	Progress, At float64
	// Due is when a running job's end is priced again (refreshAt); state
	// saved without it prices every end again at the next round.
	Due float64
}

// SaveState implements engine.Stateful.
func (f *FIFO) SaveState() ([]byte, error) {
	var st fifoState
	for id, e := range sorted.All(f.ends) {
		st.Ends = append(st.Ends, sorted.Pair[string, fifoEndState]{Key: id, Val: fifoEndState{Type: e.typ, GPUs: e.gpus, Starts: e.starts, Running: e.running, Progress: e.progress, At: e.at, Due: e.due}})
	}
	return engine.EncodeState(st)
}

// LoadState implements engine.Stateful.
func (f *FIFO) LoadState(b []byte) error {
	f.ends = nil
	if len(b) == 0 {
		return nil
	}
	var st fifoState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	f.ends = make(map[string]fifoEnd, len(st.Ends))
	for _, p := range st.Ends {
		id, e := p.Key, p.Val
		f.ends[id] = fifoEnd{typ: e.Type, gpus: e.GPUs, starts: e.Starts, running: e.Running, progress: e.Progress, at: e.At, due: e.Due}
	}
	return nil
}

// gandivaState is Gandiva's packing state (engine.Stateful; only with
// pack=true): the pairs packed now, the pairs measured not to help, and
// the random source that picks pairs to try.
type gandivaState struct {
	Partner []sorted.Pair[string, string]
	Bad     []sorted.Pair[string, bool]
	RNG     []byte
}

// SaveState implements engine.Stateful.
func (g *Gandiva) SaveState() ([]byte, error) {
	if g.pk == nil {
		return nil, nil
	}
	rng, err := g.pk.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return engine.EncodeState(gandivaState{Partner: sorted.Pairs(g.pk.partner), Bad: sorted.Pairs(g.pk.bad), RNG: rng})
}

// LoadState implements engine.Stateful.
func (g *Gandiva) LoadState(b []byte) error {
	if len(b) == 0 || g.pk == nil {
		if len(b) > 0 {
			return fmt.Errorf("policy %s keeps no packing state, got %d bytes", g.name, len(b))
		}
		return nil
	}
	var st gandivaState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	if err := g.pk.pcg.UnmarshalBinary(st.RNG); err != nil {
		return err
	}
	g.pk.partner, g.pk.bad = sorted.Map(st.Partner), sorted.Map(st.Bad)
	return nil
}
