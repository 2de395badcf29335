package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
)

const day = 86400.0

// wave builds a series sampled every 600 s for days days: value(t) plus
// Gaussian noise of standard deviation noise (seeded).
func wave(days float64, noise float64, value func(t float64) float64) Series {
	r := rand.New(rand.NewPCG(1, 2))
	var s Series
	for t := 0.0; t < days*day; t += 600 {
		s = append(s, Point{t, math.Max(0, math.Round(value(t)+noise*r.NormFloat64()))})
	}
	return s
}

func daily(t float64) float64 { return 9 + 7*math.Cos(2*math.Pi*t/day) }

// weekly is daily on weekdays (days 0-4 of each week) and flat at 14 on
// weekends.
func weekly(t float64) float64 {
	if int(t/day)%7 >= 5 {
		return 14
	}
	return daily(t)
}

func mean(sc []Score, f func(Score) float64) float64 {
	s := 0.0
	for _, x := range sc {
		s += f(x)
	}
	return s / float64(len(sc))
}

var qs = []float64{0.1, 0.5, 0.9}
var hs = []float64{3600, 3 * 3600, 6 * 3600}

// TestEvaluateAgainstBaselines: on seasonal series the forecaster's pinball
// loss beats "same as now" at hours ahead, and beats "same as a day ago" on
// average over the horizons (its quantiles carry the noise a point
// baseline cannot; on a weekly pattern a day ago is a weekday before a
// weekend).
func TestEvaluateAgainstBaselines(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Series
		days float64
	}{
		{"daily wave, noise 1", wave(8, 1, daily), 8},
		{"daily wave, noise 3", wave(8, 3, daily), 8},
		{"weekday/weekend", wave(21, 1, weekly), 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Evaluate(tc.s, Config{Max: 16}, tc.days*day, hs, qs)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range sc {
				if x.N == 0 {
					t.Fatalf("horizon %v: nothing scored", x.Horizon)
				}
				if x.Horizon >= 3*3600 && !(x.Forecaster < x.Now) {
					t.Errorf("horizon %vs: forecaster %.3f not below same-as-now %.3f", x.Horizon, x.Forecaster, x.Now)
				}
			}
			f := mean(sc, func(x Score) float64 { return x.Forecaster })
			a := mean(sc, func(x Score) float64 { return x.DayAgo })
			if !(f < a) {
				t.Errorf("forecaster %.3f not below a-day-ago %.3f", f, a)
			}
		})
	}
}

// TestWeekExpertLearned: after two weeks of a weekday/weekend pattern, the
// forecast for a weekend noon made on the Friday evening before is near the
// weekend level, not the weekday's.
func TestWeekExpertLearned(t *testing.T) {
	s := wave(14, 0, weekly)
	f, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	friday := 7*day + 4*day + 20*3600 // day 11 is a Friday (day 4 of week 2)
	for _, p := range s {
		if p.T > friday {
			break
		}
		if err := f.Observe(p.T, p.V); err != nil {
			t.Fatal(err)
		}
	}
	// Saturday 06:00 in day 12: the weekday wave would give daily(06:00) = 9.
	at := 7*day + 5*day + 6*3600
	fc := f.At(at)
	if math.Abs(fc.Median-14) > 1.5 {
		t.Errorf("weekend forecast %.2f (expert %s), want about 14", fc.Median, ExpertNames[fc.Expert])
	}
}

// TestNoFuture: what the forecaster says at time t does not depend on the
// series after t.
func TestNoFuture(t *testing.T) {
	a := wave(5, 1, daily)
	b := append(Series(nil), a...)
	cut := 3.5 * day
	for i := range b {
		if b[i].T > cut {
			b[i].V = 0
		}
	}
	fa, _ := New(Config{})
	fb, _ := New(Config{})
	for i := range a {
		if a[i].T > cut {
			break
		}
		if err := fa.Observe(a[i].T, a[i].V); err != nil {
			t.Fatal(err)
		}
		if err := fb.Observe(b[i].T, b[i].V); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []float64{600, 3600, 6 * 3600, 20 * 3600} {
		x, y := fa.At(cut+h), fb.At(cut+h)
		for _, q := range qs {
			if x.Quantile(q) != y.Quantile(q) {
				t.Fatalf("h=%v q=%v: %v != %v", h, q, x.Quantile(q), y.Quantile(q))
			}
		}
	}
}

// TestFallback: before a day, only the now expert predicts, with the range
// seen as its band; quantiles grow with q and stay clamped.
func TestFallback(t *testing.T) {
	f, err := New(Config{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if fc := f.At(100); !fc.Fallback {
		t.Error("a forecast from nothing is not a fallback")
	}
	for i, v := range []float64{4, 8, 2, 6} {
		if err := f.Observe(float64(i)*60, v); err != nil {
			t.Fatal(err)
		}
	}
	fc := f.At(3600)
	if !fc.Fallback || fc.Expert != ExpertNow || fc.Median != 6 {
		t.Fatalf("got %+v, want the now expert's fallback at 6", fc)
	}
	if lo, hi := fc.Quantile(0.0001), fc.Quantile(0.9999); math.Abs(lo-2) > 0.01 || math.Abs(hi-8) > 0.01 {
		t.Errorf("band [%v, %v], want the range seen [2, 8]", lo, hi)
	}
	prev := math.Inf(-1)
	for q := 0.05; q < 1; q += 0.1 {
		v := fc.Quantile(q)
		if v < prev || v < 0 || v > 10 {
			t.Errorf("quantile %.2f = %v: not monotone or outside [0, 10]", q, v)
		}
		prev = v
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []Config{{Bin: -1}, {Day: 1000, Bin: 600}, {Days: -1}, {Min: 5, Max: 2}, {Fade: math.Inf(1)}} {
		if _, err := New(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	f, _ := New(Config{})
	if err := f.Observe(100, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Observe(50, 1); err == nil {
		t.Error("an observation back in time was accepted")
	}
	if err := f.Observe(200, math.NaN()); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := Evaluate(Series{{0, 1}}, Config{}, day, []float64{100}, qs); err == nil {
		t.Error("a horizon that is not a multiple of the bin was accepted")
	}
}

func TestSeriesMean(t *testing.T) {
	s := Series{{0, 2}, {10, 4}, {20, 0}}
	for _, tc := range []struct{ a, b, want float64 }{
		{0, 10, 2}, {0, 20, 3}, {5, 15, 3}, {-10, 0, 2}, {20, 40, 0}, {15, 25, 2},
	} {
		if got := s.Mean(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Mean(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct{ a, b, want float64 }{
		{0, 10, 2}, {0, 20, 2}, {5, 25, 0}, {10, 20, 4}, {-10, 0, 2}, {25, 30, 0},
	} {
		if got := s.Min(tc.a, tc.b); got != tc.want {
			t.Errorf("Min(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestPinball(t *testing.T) {
	for _, tc := range []struct{ q, p, y, want float64 }{
		{0.5, 1, 3, 1}, {0.5, 3, 1, 1}, {0.9, 0, 10, 9}, {0.9, 10, 0, 1}, {0.1, 2, 2, 0},
	} {
		if got := Pinball(tc.q, tc.p, tc.y); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Pinball(%v, %v, %v) = %v, want %v", tc.q, tc.p, tc.y, got, tc.want)
		}
	}
}

// TestPathMatchesAt: Path is At's quantile for every bin ahead, at every
// stage of history (fallback, day expert, week expert).
func TestPathMatchesAt(t *testing.T) {
	s := wave(9, 1, weekly)
	f, _ := New(Config{Max: 16})
	checked := 0
	for i, p := range s {
		if err := f.Observe(p.T+30, p.V); err != nil {
			t.Fatal(err)
		}
		if i%97 != 0 {
			continue
		}
		for _, q := range []float64{0.1, 0.5, 0.9} {
			start, path := f.Path(200, q)
			for k, v := range path {
				want := f.At(start + (float64(k)+0.5)*600).Quantile(q)
				if math.Abs(v-want) > 1e-9 {
					t.Fatalf("t=%v q=%v bin %d: path %v, At %v", p.T, q, k, v, want)
				}
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatal("too few checks")
	}
}
