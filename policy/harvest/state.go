package harvest

import (
	"github.com/tide-sched/tide/engine"
)

// deepBootState is DeepBoot's protect timers (engine.Stateful): for each
// GPU, whether inference held it at the last round, until when it is
// protected and how often inference came back to it while protected.
type deepBootState struct {
	Seen  bool
	Now   float64
	Down  []bool
	Until []float64
	Reuse []int
}

// SaveState implements engine.Stateful.
func (d *DeepBoot) SaveState() ([]byte, error) {
	p := d.timers
	return engine.EncodeState(deepBootState{Seen: p.seen, Now: p.now, Down: p.down, Until: p.until, Reuse: p.reuse})
}

// LoadState implements engine.Stateful.
func (d *DeepBoot) LoadState(b []byte) error {
	d.timers = &protectTimers{}
	if len(b) == 0 {
		return nil
	}
	var st deepBootState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	*d.timers = protectTimers{seen: st.Seen, now: st.Now, down: st.Down, until: st.Until, reuse: st.Reuse}
	return nil
}
