package forecast

import (
	"bytes"
	"encoding/gob"
)

// forecasterState is what a Forecaster has learned: everything but its
// configuration.
type forecasterState struct {
	Start, T, Last, V, Acc, Lo, Hi float64
	Seen                           bool
	Bins                           []float64
	Errs                           [][nExperts]ringState
	Werrs                          [][nExperts]ringState
}

type ringState struct {
	V    []float64
	Next int
}

// MarshalBinary returns what the forecaster has learned, for a policy that
// persists it across restarts (engine.Stateful).
func (f *Forecaster) MarshalBinary() ([]byte, error) {
	st := forecasterState{Start: f.start, T: f.t, Last: f.last, V: f.v, Acc: f.acc, Lo: f.lo, Hi: f.hi, Seen: f.seen, Bins: f.bins,
		Errs: make([][nExperts]ringState, len(f.errs))}
	for h := range f.errs {
		for e := range f.errs[h] {
			st.Errs[h][e] = ringState{V: f.errs[h][e].v, Next: f.errs[h][e].next}
		}
	}
	if f.werrs != nil {
		st.Werrs = make([][nExperts]ringState, len(f.werrs))
		for h := range f.werrs {
			for e := range f.werrs[h] {
				st.Werrs[h][e] = ringState{V: f.werrs[h][e].v, Next: f.werrs[h][e].next}
			}
		}
	}
	var buf bytes.Buffer
	err := gob.NewEncoder(&buf).Encode(st)
	return buf.Bytes(), err
}

// UnmarshalBinary replaces what the forecaster has learned by what
// MarshalBinary returned; its configuration stays its own.
func (f *Forecaster) UnmarshalBinary(b []byte) error {
	var st forecasterState
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
		return err
	}
	f.start, f.t, f.last, f.v, f.acc, f.lo, f.hi, f.seen, f.bins = st.Start, st.T, st.Last, st.V, st.Acc, st.Lo, st.Hi, st.Seen, st.Bins
	f.errs = make([][nExperts]ring, len(st.Errs))
	for h := range st.Errs {
		for e := range st.Errs[h] {
			f.errs[h][e] = ring{v: st.Errs[h][e].V, next: st.Errs[h][e].Next}
		}
	}
	if f.cfg.Windows {
		// A state saved without window errors starts them empty.
		f.werrs = make([][nExperts]ring, len(horizons))
		for h := range st.Werrs {
			for e := range st.Werrs[h] {
				f.werrs[h][e] = ring{v: st.Werrs[h][e].V, next: st.Werrs[h][e].Next}
			}
		}
	}
	return nil
}
