package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file draws line charts as inline SVG: the one plotting routine behind
// every plot of the HTML page.

// Chart geometry, in SVG user units (pixels at 100% zoom).
const (
	chartWidth   = 960
	chartHeight  = 380 // at least; grows with the legend
	chartLeft    = 76  // room for y tick labels and the y axis label
	chartRight   = 220 // room for the legend
	chartTop     = 40  // room for the title
	chartBottom  = 56  // room for x tick labels and the x axis label
	legendRow    = 18
	legendMaxLen = 26 // runes of a series name shown in the legend

	// maxSeriesPoints caps the points of one plotted series; callers
	// downsample to it so that pages stay small.
	maxSeriesPoints = 2000
)

// palette holds distinguishable line colours (matplotlib's tab10); series
// beyond ten reuse them with a dash pattern, so that up to 40 series differ
// in colour or dash (a legend click hides one).
var palette = [...]string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

var dashes = [...]string{"", "7 3", "2 2", "9 3 2 3"}

// seriesStyle returns the stroke attributes of series i.
func seriesStyle(i int) string {
	s := `stroke="` + palette[i%len(palette)] + `"`
	if d := dashes[(i/len(palette))%len(dashes)]; d != "" {
		s += ` stroke-dasharray="` + d + `"`
	}
	return s
}

// axis is one axis of a chart: its range, scale and ticks.
type axis struct {
	label    string
	min, max float64
	log      bool                 // logarithmic scale; min must be > 0
	ticks    []float64            // tick positions, inside [min, max]
	format   func(float64) string // tick label
}

// frac maps v to [0, 1] along the axis, clamping values outside the range.
func (a *axis) frac(v float64) float64 {
	lo, hi := a.min, a.max
	if a.log {
		v = math.Log(math.Max(v, lo))
		lo, hi = math.Log(lo), math.Log(hi)
	}
	if !(hi > lo) {
		return 0
	}
	f := (v - lo) / (hi - lo)
	return math.Max(0, math.Min(1, f))
}

// series is one line: points (x[i], y[i]) joined in order.
type series struct {
	name string
	x, y []float64
}

// lineChart is a chart of one or more lines over shared axes.
type lineChart struct {
	title  string
	x, y   axis
	series []series
}

// svg renders the chart as an <svg> element. All text is escaped.
func (c *lineChart) svg() string {
	height := max(chartHeight, chartTop+len(c.series)*legendRow+chartBottom)
	plotW := float64(chartWidth - chartLeft - chartRight)
	plotH := float64(height - chartTop - chartBottom)
	px := func(v float64) float64 { return chartLeft + c.x.frac(v)*plotW }
	py := func(v float64) float64 { return chartTop + (1-c.y.frac(v))*plotH }
	esc := html.EscapeString

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" font-family="sans-serif" font-size="12">`,
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", chartLeft, esc(c.title))

	// Grid, ticks and tick labels.
	b.WriteString(`<g stroke="#e3e3e3" stroke-width="1">`)
	for _, t := range c.x.ticks {
		x := round1(px(t))
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%s"/>`, num(x), chartTop, num(x), num(chartTop+plotH))
	}
	for _, t := range c.y.ticks {
		y := round1(py(t))
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%s" y2="%s"/>`, chartLeft, num(y), num(chartLeft+plotW), num(y))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g fill="#333" text-anchor="middle">`)
	for _, t := range c.x.ticks {
		fmt.Fprintf(&b, `<text x="%s" y="%s">%s</text>`, num(round1(px(t))), num(chartTop+plotH+17), esc(c.x.format(t)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g fill="#333" text-anchor="end">`)
	for _, t := range c.y.ticks {
		fmt.Fprintf(&b, `<text x="%d" y="%s">%s</text>`, chartLeft-6, num(round1(py(t))+4), esc(c.y.format(t)))
	}
	b.WriteString("</g>\n")

	// Frame and axis labels.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%s" height="%s" fill="none" stroke="#888"/>`+"\n", chartLeft, chartTop, num(plotW), num(plotH))
	fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" fill="#222">%s</text>`+"\n",
		num(chartLeft+plotW/2), height-14, esc(c.x.label))
	cy := chartTop + plotH/2
	fmt.Fprintf(&b, `<text x="16" y="%s" text-anchor="middle" fill="#222" transform="rotate(-90 16 %s)">%s</text>`+"\n",
		num(cy), num(cy), esc(c.y.label))

	// Lines.
	b.WriteString(`<g fill="none" stroke-width="1.6" stroke-linejoin="round">` + "\n")
	for i, s := range c.series {
		pts := make([]point, 0, len(s.x))
		for k := range s.x {
			if math.IsNaN(s.x[k]) || math.IsNaN(s.y[k]) {
				continue
			}
			pts = append(pts, point{round1(px(s.x[k])), round1(py(s.y[k]))})
		}
		pts = thin(pts)
		if len(pts) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline data-series="%d" %s points="`, i, seriesStyle(i))
		for k, p := range pts {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(num(p.x))
			b.WriteByte(',')
			b.WriteString(num(p.y))
		}
		fmt.Fprintf(&b, `"><title>%s</title></polyline>`+"\n", esc(s.name))
	}
	b.WriteString("</g>\n")

	// Legend.
	lx := chartWidth - chartRight + 16
	for i, s := range c.series {
		y := chartTop + 8 + i*legendRow
		fmt.Fprintf(&b, `<g class="legend" data-series="%d"><title>%s (click: hide or show)</title><line x1="%d" y1="%d" x2="%d" y2="%d" stroke-width="3" %s/><text x="%d" y="%d" fill="#222">%s</text></g>`+"\n",
			i, esc(s.name), lx, y, lx+26, y, seriesStyle(i), lx+32, y+4, esc(shorten(s.name, legendMaxLen)))
	}
	b.WriteString("</svg>")
	return b.String()
}

type point struct{ x, y float64 }

// thin drops points that lie between their neighbours on a horizontal or
// vertical line, which step functions produce in long runs. The drawing is
// unchanged.
func thin(pts []point) []point {
	if len(pts) < 3 {
		return pts
	}
	out := []point{pts[0]}
	for i := 1; i < len(pts)-1; i++ {
		prev, cur, next := out[len(out)-1], pts[i], pts[i+1]
		if cur == prev {
			continue
		}
		if prev.y == cur.y && cur.y == next.y && between(prev.x, cur.x, next.x) ||
			prev.x == cur.x && cur.x == next.x && between(prev.y, cur.y, next.y) {
			continue
		}
		out = append(out, cur)
	}
	return append(out, pts[len(pts)-1])
}

// between reports whether b lies in the closed interval spanned by a and c.
func between(a, b, c float64) bool { return math.Min(a, c) <= b && b <= math.Max(a, c) }

// round1 rounds to one decimal: a tenth of a pixel is plenty.
func round1(x float64) float64 { return math.Round(x*10) / 10 }

// num formats a coordinate compactly.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// shorten cuts s to n runes, marking the cut with an ellipsis.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// niceTicks returns about n evenly spaced round ticks (steps of 1, 2 or 5
// times a power of ten) covering [lo, hi]: the first is <= lo, the last >= hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return stepTicks(lo, hi, step)
}

// timeSteps are the round durations, in seconds, that time axes step by.
var timeSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
	3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 3 * 86400,
	5 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 56 * 86400, 91 * 86400,
	182 * 86400, 364 * 86400}

// timeTicks returns ticks at the smallest round duration step (1 min, 6 h,
// 1 d, ...) that gives at most about n intervals, covering [lo, hi] like
// niceTicks.
func timeTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	for _, st := range timeSteps {
		if (hi-lo)/st <= float64(n) {
			return stepTicks(lo, hi, st)
		}
	}
	return niceTicks(lo, hi, n)
}

// stepTicks returns the multiples of step from the last one <= lo to the
// first one >= hi.
func stepTicks(lo, hi, step float64) []float64 {
	first := math.Floor(lo/step+1e-9) * step
	var ticks []float64
	for k := 0; ; k++ {
		t := first + float64(k)*step
		if math.Abs(t) < step*1e-9 {
			t = 0
		}
		ticks = append(ticks, t)
		if t >= hi-step*1e-9 || k > 1000 {
			return ticks
		}
	}
}

// logTimeMarks are the durations, in seconds, labelled on logarithmic time
// axes: powers of ten below a minute, then round human units.
var logTimeMarks = []float64{0.001, 0.01, 0.1, 1, 10, 60, 600, 3600, 36000,
	86400, 7 * 86400, 30 * 86400, 365 * 86400}

// logTimeRange widens [lo, hi] (lo > 0) to the nearest marks around it and
// returns the marks inside.
func logTimeRange(lo, hi float64) (min, max float64, ticks []float64) {
	min, max = lo, hi
	for _, m := range logTimeMarks {
		if m <= lo {
			min = m
		}
	}
	for i := len(logTimeMarks) - 1; i >= 0; i-- {
		if logTimeMarks[i] >= hi {
			max = logTimeMarks[i]
		}
	}
	if !(max > min) {
		max = min * 10
	}
	for _, m := range logTimeMarks {
		if m >= min && m <= max {
			ticks = append(ticks, m)
		}
	}
	return min, max, ticks
}

// durationTick labels a time tick: "0", "500ms", "30s", "10m", "1d12h".
func durationTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) < 1:
		return strconv.FormatFloat(v*1000, 'g', 10, 64) + "ms"
	}
	return humanDuration(v)
}

// numberTick labels a plain number tick.
func numberTick(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
