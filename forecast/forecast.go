// Package forecast predicts a site's capacity (the GPUs available to
// training) over the next hours, with its uncertainty, from what has been
// observed of it so far. It learns online: Observe feeds the value seen at
// a time, Quantile predicts the value at a later time. Nothing of the
// future is ever handed to it.
//
// The capacity is cut into bins (Config.Bin seconds, default 600, on
// multiples of Bin from time 0); a bin's value is the time-weighted mean of
// the capacity over it. Three experts
// predict the mean of a future bin from the bins completed so far:
//
//   - now: the current value (persistence);
//   - day: the mean of the same bin of the day over the last Days days
//     (daily seasonality), shifted by how far the recent bins sit above or
//     below their own seasonal means, a shift that fades with the horizon;
//   - week: the same bin a week ago, shifted the same way (weekly
//     seasonality; it exists once a week has been observed).
//
// For each horizon the forecaster keeps each expert's recent errors,
// measured online as bins complete (the forecast made from the bins before,
// against the bin realised), and predicts with the expert of least recent
// mean absolute error; its quantiles are the empirical quantiles of that
// expert's recent errors at that horizon added to its prediction. Before a
// day has been observed (the fallback), only the now expert exists, and
// before it has made enough errors to measure, the quantiles widen it by
// the range of the values seen so far.
package forecast

import (
	"fmt"
	"math"
	"slices"
)

// Config shapes a forecaster. Zero fields take the defaults.
type Config struct {
	Bin  float64 // seconds per bin, default 600
	Day  float64 // daily period, s, default 86400
	Week float64 // weekly period, s, default 7 x Day; < 0 disables the week expert
	Days int     // days averaged by the day expert, default 3
	// Fade is the time constant, s, of the shift of the seasonal experts
	// toward the recent level: at horizon h it weighs exp(-h/Fade).
	// Default 7200.
	Fade float64
	// Window is how many recent errors per horizon and expert are kept
	// for the quantiles and the choice of expert, default 288 (two days of
	// 600 s bins).
	Window int
	// Min and Max clamp predictions (the site's size); Max 0: no upper
	// clamp.
	Min, Max float64
	// Windows makes the forecaster also learn the errors of window means
	// (the mean over the next H bins, for H at each horizon), which
	// WindowPath needs. It costs about the sum of the horizons (474)
	// predictions per expert at each completed bin.
	Windows bool
}

func (c *Config) fill() error {
	if c.Bin == 0 {
		c.Bin = 600
	}
	if c.Day == 0 {
		c.Day = 86400
	}
	if c.Week == 0 {
		c.Week = 7 * c.Day
	}
	if c.Days == 0 {
		c.Days = 3
	}
	if c.Fade == 0 {
		c.Fade = 7200
	}
	if c.Window == 0 {
		c.Window = 288
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"bin", c.Bin}, {"day", c.Day}, {"fade", c.Fade}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("forecast: %s: want a finite number of seconds > 0, got %v", f.name, f.v)
		}
	}
	if c.Day < 2*c.Bin || math.Abs(c.Day/c.Bin-math.Round(c.Day/c.Bin)) > 1e-9 {
		return fmt.Errorf("forecast: day %v: want a multiple (>= 2) of the bin %v", c.Day, c.Bin)
	}
	if c.Week > 0 && math.Abs(c.Week/c.Bin-math.Round(c.Week/c.Bin)) > 1e-9 {
		return fmt.Errorf("forecast: week %v: want a multiple of the bin %v", c.Week, c.Bin)
	}
	if c.Days < 1 || c.Window < 2 {
		return fmt.Errorf("forecast: days %d and window %d: want >= 1 and >= 2", c.Days, c.Window)
	}
	if c.Max > 0 && c.Max < c.Min {
		return fmt.Errorf("forecast: max %v below min %v", c.Max, c.Min)
	}
	return nil
}

// Expert names, in the order Forecaster.Expert reports them.
const (
	ExpertNow = iota
	ExpertDay
	ExpertWeek
	nExperts
)

// ExpertNames name the experts.
var ExpertNames = [nExperts]string{"now", "day", "week"}

// horizons are the horizons, in bins, at which errors are measured; a
// forecast at another horizon uses the nearest at or above it.
var horizons = []int{1, 2, 3, 6, 12, 18, 24, 36, 48, 72, 108, 144}

// Forecaster is one site's online forecaster. It is not safe for
// concurrent use.
type Forecaster struct {
	cfg   Config
	start float64 // time of the first observation
	seen  bool
	t     float64 // time integrated up to
	last  float64 // time of the last observation
	v     float64 // value since t
	acc   float64 // integral of the value over the current bin so far
	bins  []float64
	lo    float64 // range of the values seen
	hi    float64
	// errs[h][e] are expert e's recent errors (realised - predicted) at
	// horizons[h], newest last.
	errs [][nExperts]ring
	// werrs[h][e] (Config.Windows) are expert e's recent errors on the
	// mean of horizons[h] bins, forecast from the bins before the first.
	werrs [][nExperts]ring
}

type ring struct {
	v    []float64
	next int
}

func (r *ring) add(x float64, n int) {
	if len(r.v) < n {
		r.v = append(r.v, x)
		return
	}
	r.v[r.next] = x
	r.next = (r.next + 1) % n
}

// New returns a forecaster that has observed nothing.
func New(cfg Config) (*Forecaster, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	f := &Forecaster{cfg: cfg, errs: make([][nExperts]ring, len(horizons))}
	if cfg.Windows {
		f.werrs = make([][nExperts]ring, len(horizons))
	}
	return f, nil
}

// Config returns the forecaster's configuration, defaults filled.
func (f *Forecaster) Config() Config { return f.cfg }

// Observe records that the capacity is v from time t on. Times must not go
// backwards; a value observed twice at one time keeps the last.
func (f *Forecaster) Observe(t, v float64) error {
	if math.IsNaN(t) || math.IsInf(t, 0) || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("forecast: observe (%v, %v): want finite numbers", t, v)
	}
	if !f.seen {
		// Bins fall on multiples of Bin from time 0 (capacity tends to
		// change on the clock's marks); the first value counts from the
		// start of its bin.
		start := math.Floor(t/f.cfg.Bin) * f.cfg.Bin
		f.seen, f.start, f.t, f.last, f.v, f.lo, f.hi = true, start, start, t, v, v, v
		return nil
	}
	if t < f.last {
		return fmt.Errorf("forecast: observe at %v, before the last observation at %v", t, f.last)
	}
	f.last = t
	f.advance(t)
	f.v = v
	f.lo, f.hi = math.Min(f.lo, v), math.Max(f.hi, v)
	return nil
}

// advance integrates the current value up to t, completing bins.
func (f *Forecaster) advance(t float64) {
	for {
		end := f.start + float64(len(f.bins)+1)*f.cfg.Bin
		if t < end {
			f.acc += f.v * (t - f.t)
			f.t = t
			return
		}
		f.acc += f.v * (end - f.t)
		f.t = end
		f.bins = append(f.bins, f.acc/f.cfg.Bin)
		f.acc = 0
		f.learn()
	}
}

// learn measures each expert's error on the bin just completed, at every
// horizon: the forecast made from the bins before it, horizon bins ahead.
func (f *Forecaster) learn() {
	b := len(f.bins) - 1
	real := f.bins[b]
	for hi, h := range horizons {
		n := b - h + 1 // bins known when the forecast was made
		if n < 1 {
			break
		}
		for e := 0; e < nExperts; e++ {
			if p, ok := f.predict(e, n, b, f.bins[n-1]); ok {
				f.errs[hi][e].add(real-p, f.cfg.Window)
			}
		}
	}
	if f.werrs == nil {
		return
	}
	for hi, h := range horizons {
		n := b - h + 1
		if n < 1 {
			break
		}
		mean := 0.0
		for k := n; k <= b; k++ {
			mean += f.bins[k]
		}
		mean /= float64(h)
	experts:
		for e := 0; e < nExperts; e++ {
			sum := 0.0
			for k := n; k <= b; k++ {
				p, ok := f.predict(e, n, k, f.bins[n-1])
				if !ok {
					continue experts
				}
				sum += p
			}
			f.werrs[hi][e].add(mean-sum/float64(h), f.cfg.Window)
		}
	}
}

func (f *Forecaster) perDay() int  { return int(math.Round(f.cfg.Day / f.cfg.Bin)) }
func (f *Forecaster) perWeek() int { return int(math.Round(f.cfg.Week / f.cfg.Bin)) }

// predict is expert e's forecast of bin target from the first n bins,
// the value now being cur; ok is false when e cannot predict yet.
func (f *Forecaster) predict(e, n, target int, cur float64) (float64, bool) {
	switch e {
	case ExpertNow:
		return cur, true
	case ExpertDay:
		if f.seasonal(e, n, n-1) == nil {
			return 0, false
		}
		return f.shifted(e, n, target, cur)
	case ExpertWeek:
		if f.cfg.Week <= 0 {
			return 0, false
		}
		return f.shifted(e, n, target, cur)
	}
	return 0, false
}

// seasonal is expert e's seasonal mean of bin b from the first n bins:
// the mean of the same bin over up to Days past days (day), or the bin a
// week before (week); nil when none is known.
func (f *Forecaster) seasonal(e, n, b int) *float64 {
	if e == ExpertWeek {
		k := b - f.perWeek()
		if k < 0 || k >= n {
			return nil
		}
		v := f.bins[k]
		return &v
	}
	sum, cnt := 0.0, 0
	for d := 1; d <= f.cfg.Days; d++ {
		k := b - d*f.perDay()
		if k < 0 {
			break
		}
		if k < n {
			sum += f.bins[k]
			cnt++
		}
	}
	if cnt == 0 {
		return nil
	}
	v := sum / float64(cnt)
	return &v
}

// shifted is the seasonal mean of target plus the recent level shift (the
// last bins' mean distance from their own seasonal means, the current value
// counting as one), faded with the horizon.
func (f *Forecaster) shifted(e, n, target int, cur float64) (float64, bool) {
	s := f.seasonal(e, n, target)
	if s == nil {
		return 0, false
	}
	shift, cnt := 0.0, 0
	for b := max(n-3, 0); b < n; b++ {
		if m := f.seasonal(e, n, b); m != nil {
			shift += f.bins[b] - *m
			cnt++
		}
	}
	if m := f.seasonal(e, n, n); m != nil {
		shift += cur - *m
		cnt++
	}
	if cnt > 0 {
		shift /= float64(cnt)
	}
	h := float64(target-n+1) * f.cfg.Bin
	return *s + shift*math.Exp(-h/f.cfg.Fade), true
}

// minErrs is how many errors an expert needs at a horizon before its
// quantiles and its mean error are trusted.
const minErrs = 12

// Forecast is a prediction of the capacity at one time.
type Forecast struct {
	Expert int     // the expert that made it (ExpertNow, ExpertDay, ExpertWeek)
	Median float64 // its point prediction
	// Fallback is true when the forecaster had too little history to
	// measure its errors: the quantiles are the prediction widened by the
	// range of the values seen.
	Fallback bool
	errs     []float64 // sorted errors at this horizon
	lo, hi   float64   // range fallback
	min, max float64
}

// At forecasts the capacity at time at (>= the last observation) from what
// has been observed. With nothing observed it returns the zero Forecast,
// Fallback set.
func (f *Forecaster) At(at float64) Forecast {
	fc := Forecast{Fallback: true, min: f.cfg.Min, max: f.cfg.Max}
	if !f.seen {
		return fc
	}
	n := len(f.bins)
	// Bin of the target, counted from the first observation; the bin in
	// progress (n) is predicted too.
	target := max(int(math.Floor((at-f.start)/f.cfg.Bin)), n)
	h := target - n + 1
	hi := len(horizons) - 1
	for i, x := range horizons {
		if x >= h {
			hi = i
			break
		}
	}
	best, errs := f.choose(hi, n, target)
	fc.Expert, fc.Median = best, f.must(best, n, target)
	if len(errs) >= minErrs {
		fc.Fallback = false
		fc.errs = slices.Clone(errs)
		slices.Sort(fc.errs)
	} else {
		fc.lo, fc.hi = f.lo-f.v, f.hi-f.v
	}
	return fc
}

// choose is the expert of least recent mean absolute error at horizon
// index hi among those that can predict target from n bins (the now
// expert until another has enough errors), and its errors.
func (f *Forecaster) choose(hi, n, target int) (int, []float64) {
	best, bestErr := ExpertNow, math.Inf(1)
	for e := 0; e < nExperts; e++ {
		errs := f.errs[hi][e].v
		if len(errs) < minErrs {
			continue
		}
		if _, ok := f.predict(e, n, target, f.v); !ok {
			continue
		}
		mae := 0.0
		for _, x := range errs {
			mae += math.Abs(x)
		}
		if mae /= float64(len(errs)); mae < bestErr {
			best, bestErr = e, mae
		}
	}
	return best, f.errs[hi][best].v
}

// must is expert e's prediction, which choose has checked exists (the now
// expert always does).
func (f *Forecaster) must(e, n, target int) float64 {
	p, _ := f.predict(e, n, target, f.v)
	return p
}

// Path forecasts the q-quantile of the mean of each of the next bins: out[0]
// is the bin in progress, out[k] the k-th after it; start is the time the
// bin in progress began (bin k spans [start + k Bin, start + (k+1) Bin)).
// It is At(...).Quantile(q) for every bin, computed once per horizon.
// With nothing observed it returns nil.
func (f *Forecaster) Path(bins int, q float64) (start float64, out []float64) {
	if !f.seen || bins <= 0 {
		return 0, nil
	}
	n := len(f.bins)
	start = f.start + float64(n)*f.cfg.Bin
	out = make([]float64, bins)
	hi, expert := -1, ExpertNow
	var off float64
	var fb Forecast
	for k := 0; k < bins; k++ {
		h := k + 1
		for hi < len(horizons)-1 && (hi < 0 || horizons[hi] < h) {
			hi++
			var errs []float64
			expert, errs = f.choose(hi, n, n+k)
			fb = Forecast{Fallback: true, lo: f.lo - f.v, hi: f.hi - f.v, min: f.cfg.Min, max: f.cfg.Max}
			if len(errs) >= minErrs {
				sorted := slices.Clone(errs)
				slices.Sort(sorted)
				off, fb.Fallback = quantile(sorted, q), false
			}
		}
		p, ok := f.predict(expert, n, n+k, f.v)
		if !ok {
			p = f.v
		}
		if fb.Fallback {
			fc := fb
			fc.Median = p
			out[k] = fc.Quantile(q)
			continue
		}
		out[k] = Forecast{Median: p + off, min: f.cfg.Min, max: f.cfg.Max}.Quantile(q)
	}
	return start, out
}

// WindowPath is Path calibrated for the mean over a window that starts
// with the bin in progress: for every L, the mean of out[0..L-1] is the
// median forecast's mean over those L bins plus the q-quantile of the
// chosen expert's recent errors on window means of L bins (interpolated
// linearly between the horizons where they are measured), so that a plan
// that needs GPU-time by some time gets it with probability about 1-q,
// where Path's quantile bin by bin compounds (docs/tidal.md, ninth pass).
// Each bin is then clamped to [Min, Max]. Without Config.Windows, or
// before an expert has enough window errors at a horizon, the bins there
// are Path's.
func (f *Forecaster) WindowPath(bins int, q float64) (start float64, out []float64) {
	start, out = f.Path(bins, q)
	if out == nil || f.werrs == nil {
		return start, out
	}
	n := len(f.bins)
	// off[i]: the q-quantile of the window errors at horizons[i], of the
	// expert of least recent error there (choose, for the window's last
	// bin); NaN where too few are known. Path's bins stay where off is
	// NaN, so it is computed first.
	off := make([]float64, len(horizons))
	experts := make([]int, len(horizons))
	for i, h := range horizons {
		e, _ := f.choose(i, n, n+h-1)
		experts[i] = e
		off[i] = math.NaN()
		if errs := f.werrs[i][e].v; len(errs) >= minErrs {
			sorted := slices.Clone(errs)
			slices.Sort(sorted)
			off[i] = quantile(sorted, q)
		}
	}
	sum, prev := 0.0, 0.0 // median path's running sum; the planned sum up to the last bin
	i := 0
	for k := range out {
		L := k + 1
		for i < len(horizons)-1 && horizons[i] < L {
			i++
		}
		p, ok := f.predict(experts[i], n, n+k, f.v)
		if !ok {
			p = f.v
		}
		sum += p
		o := off[i]
		if i > 0 && L < horizons[i] && !math.IsNaN(off[i-1]) {
			lo, hi := float64(horizons[i-1]), float64(horizons[i])
			o = off[i-1] + (off[i]-off[i-1])*(float64(L)-lo)/(hi-lo)
		}
		if math.IsNaN(o) || L > horizons[len(horizons)-1] {
			prev += out[k]
			continue
		}
		planned := sum + float64(L)*o
		v := planned - prev
		v = math.Max(v, f.cfg.Min)
		if f.cfg.Max > 0 {
			v = math.Min(v, f.cfg.Max)
		}
		out[k] = v
		prev += v
	}
	return start, out
}

// Quantile is the q-quantile (0 < q < 1) of the forecast: the prediction
// plus the q-quantile of its expert's recent errors, clamped to the
// configured range.
func (fc Forecast) Quantile(q float64) float64 {
	v := fc.Median
	switch {
	case len(fc.errs) > 0:
		v += quantile(fc.errs, q)
	case fc.Fallback:
		// Widen by the range seen, linearly in q around the median.
		if q < 0.5 {
			v += fc.lo * (0.5 - q) * 2
		} else {
			v += fc.hi * (q - 0.5) * 2
		}
	}
	v = math.Max(v, fc.min)
	if fc.max > 0 {
		v = math.Min(v, fc.max)
	}
	return v
}

// quantile is the q-quantile of sorted xs, interpolated linearly.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	p := q * float64(len(xs)-1)
	i := int(math.Floor(p))
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	if i < 0 {
		return xs[0]
	}
	return xs[i] + (p-float64(i))*(xs[i+1]-xs[i])
}

// Now is the last value observed.
func (f *Forecaster) Now() float64 { return f.v }

// Observed is the time of the last observation and whether any was made.
func (f *Forecaster) Observed() (float64, bool) { return f.last, f.seen }

// Pinball is the pinball (quantile) loss of predicting p for quantile q
// when y was realised: q(y-p) when y >= p, (1-q)(p-y) otherwise.
func Pinball(q, p, y float64) float64 {
	if y >= p {
		return q * (y - p)
	}
	return (1 - q) * (p - y)
}
