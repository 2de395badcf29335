package flow

import (
	"math"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/policy/internal/sorted"
)

// tidalState is what tidal keeps between rounds (engine.Stateful): for
// each varying site, what its forecaster has learned and what tidal last
// saw of it. The planned path is recomputed at the next round.
type tidalState struct {
	Views []sorted.Pair[string, tideViewState]
}

type tideViewState struct {
	Kind             string
	GPUs             int
	PerSrv, Cur, Bin float64
	Seen, Varies     bool
	Forecaster       []byte
	// Low is the least capacity seen (the floor under admit_cloud=path).
	// LowKept is false in a state saved before it was kept, where Cur
	// stands in (gob omits zero values, so a nil pointer could not tell
	// a Low of 0 from none).
	Low     float64
	LowKept bool
	// Lost, Down, Obs and LastAt are what the rounds have seen of the site
	// below its GPUs: GPUs lost in drops, GPU-seconds, seconds observed, and the last
	// round's time (hold_busy's share, admit_cloud=mean, the rollout's
	// faults). RateKept is false in a state saved before they were
	// kept: the share then starts again from the next round.
	Lost, Down, Obs, LastAt float64
	RateKept                bool
}

// SaveState implements engine.Stateful.
func (t *Tidal) SaveState() ([]byte, error) {
	var st tidalState
	for name, v := range sorted.All(t.views) {
		f, err := v.f.MarshalBinary()
		if err != nil {
			return nil, err
		}
		st.Views = append(st.Views, sorted.Pair[string, tideViewState]{Key: name, Val: tideViewState{Kind: v.kind, GPUs: v.gpus, PerSrv: v.perSrv, Cur: v.cur, Bin: v.bin, Seen: v.seen, Varies: v.varies, Forecaster: f, Low: v.low, LowKept: true, RateKept: true,
			Lost: v.lost, Down: v.down, Obs: v.obs, LastAt: v.lastAt}})
	}
	return engine.EncodeState(st)
}

// LoadState implements engine.Stateful.
func (t *Tidal) LoadState(b []byte) error {
	t.views = map[string]*tideView{}
	if len(b) == 0 {
		return nil
	}
	var st tidalState
	if err := engine.DecodeState(b, &st); err != nil {
		return err
	}
	for _, e := range st.Views {
		name, s := e.Key, e.Val
		f, err := forecast.New(t.forecastConfig(s.Kind, s.GPUs))
		if err != nil {
			return err
		}
		if err := f.UnmarshalBinary(s.Forecaster); err != nil {
			return err
		}
		t.views[name] = &tideView{name: name, kind: s.Kind, gpus: s.GPUs, perSrv: s.PerSrv, f: f, seen: s.Seen, varies: s.Varies,
			cur: s.Cur, bin: s.Bin, low: s.Cur, pathAt: math.NaN(), lost: s.Lost, down: s.Down, obs: s.Obs, lastAt: s.LastAt}
		if s.LowKept {
			t.views[name].low = s.Low
		}
		if !s.RateKept {
			t.views[name].lastAt = math.NaN() // no interval is counted until the next round
		}
	}
	return nil
}

// Forecaster is what tidal has learned of site's capacity, nil when it has
// never observed the site: for tools and tests that read a saved state.
func (t *Tidal) Forecaster(site string) *forecast.Forecaster {
	if v := t.views[site]; v != nil {
		return v.f
	}
	return nil
}
