package forecast

import (
	"fmt"
	"math"
	"sort"
)

// Point is a step of a capacity timeline: the value is V from T on.
type Point struct {
	T, V float64
}

// Series is a realised capacity timeline, points in time order.
type Series []Point

// Mean is the time-weighted mean of the series over [a, b) (a < b); before
// its first point the series holds its first value.
func (s Series) Mean(a, b float64) float64 {
	if len(s) == 0 || !(b > a) {
		return 0
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].T > a }) - 1
	sum, t := 0.0, a
	for {
		v := s[max(i, 0)].V
		end := b
		if i+1 < len(s) && s[i+1].T < b {
			end = s[i+1].T
		}
		sum += v * (end - t)
		t = end
		i++
		if t >= b || i >= len(s) {
			break
		}
	}
	return sum / (b - a)
}

// Score is the mean pinball loss, over the scored times and the quantiles,
// of the forecaster and of the two baselines at one horizon, in the
// capacity's unit (GPUs).
type Score struct {
	Horizon    float64 // seconds ahead: the forecast is of the bin ending then
	Forecaster float64
	Now        float64 // "same as now": every quantile the value at the time of the forecast
	DayAgo     float64 // "same as a period ago": every quantile the bin's value a day before
	N          int     // forecasts scored
}

// Evaluate replays s into a forecaster built from cfg, a bin at a time,
// and at every bin boundary from one day in (so that "a day ago" exists)
// forecasts each horizon (seconds, multiples of the bin) and scores the
// quantiles qs against the realised bin mean, until end. The forecaster
// only ever sees the series up to the boundary.
func Evaluate(s Series, cfg Config, end float64, horizons, qs []float64) ([]Score, error) {
	f, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cfg = f.Config()
	if len(s) == 0 {
		return nil, fmt.Errorf("forecast: evaluate: empty series")
	}
	out := make([]Score, len(horizons))
	for i, h := range horizons {
		if !(h >= cfg.Bin) || math.Abs(h/cfg.Bin-math.Round(h/cfg.Bin)) > 1e-9 {
			return nil, fmt.Errorf("forecast: evaluate: horizon %v: want a multiple of the bin %v", h, cfg.Bin)
		}
		out[i].Horizon = h
	}
	t0 := s[0].T
	next := 0
	for k := 1; ; k++ {
		t := t0 + float64(k)*cfg.Bin
		if t > end {
			break
		}
		for next < len(s) && s[next].T <= t {
			if err := f.Observe(s[next].T, s[next].V); err != nil {
				return nil, err
			}
			next++
		}
		if err := f.Observe(t, f.Now()); err != nil {
			return nil, err
		}
		if t-t0 < cfg.Day {
			continue
		}
		now := f.Now()
		for i, h := range horizons {
			a, b := t+h-cfg.Bin, t+h
			if b > end {
				continue
			}
			y := s.Mean(a, b)
			ago := s.Mean(a-cfg.Day, b-cfg.Day)
			fc := f.At(a)
			sc := &out[i]
			for _, q := range qs {
				sc.Forecaster += Pinball(q, fc.Quantile(q), y)
				sc.Now += Pinball(q, now, y)
				sc.DayAgo += Pinball(q, ago, y)
			}
			sc.N++
		}
	}
	for i := range out {
		if n := float64(out[i].N * len(qs)); n > 0 {
			out[i].Forecaster /= n
			out[i].Now /= n
			out[i].DayAgo /= n
		}
	}
	return out, nil
}

// Min is the least value of the series over [a, b) (a < b).
func (s Series) Min(a, b float64) float64 {
	if len(s) == 0 || !(b > a) {
		return 0
	}
	i := max(sort.Search(len(s), func(i int) bool { return s[i].T > a })-1, 0)
	m := s[i].V
	for i++; i < len(s) && s[i].T < b; i++ {
		m = math.Min(m, s[i].V)
	}
	return m
}
