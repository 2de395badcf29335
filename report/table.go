package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// metricRow is one line of the side-by-side table: a label with its unit and
// how to print one summary's value.
type metricRow struct {
	label string
	cell  func(s *Summary) string
}

// metricRows lists the table's rows, top to bottom. WriteTable and the HTML
// page share it.
var metricRows = []metricRow{
	{"jobs counted", func(s *Summary) string { return strconv.Itoa(s.Jobs) }},
	{"window (job indices)", func(s *Summary) string {
		if len(s.Window) != 2 {
			return "all"
		}
		return fmt.Sprintf("[%d, %d)", s.Window[0], s.Window[1])
	}},
	{"finished", func(s *Summary) string { return strconv.Itoa(s.Finished) }},
	{"unfinished", func(s *Summary) string { return strconv.Itoa(s.Unfinished) }},
	{"never started", func(s *Summary) string { return strconv.Itoa(s.NeverStarted) }},
	{"declined", func(s *Summary) string { return strconv.Itoa(s.Declined) }},
	{"avg JCT (s)", func(s *Summary) string { return secs(s.AvgJCT) }},
	{"median JCT (s)", func(s *Summary) string { return secs(s.MedianJCT) }},
	{"p95 JCT (s)", func(s *Summary) string { return secs(s.P95JCT) }},
	{"p99 JCT (s)", func(s *Summary) string { return secs(s.P99JCT) }},
	{"lower-bound avg JCT (s)", func(s *Summary) string { return optSecs(s.LowerBoundAvgJCT) }},
	{"avg JCT / lower bound (x)", func(s *Summary) string { return optFixed(s.JCTOverLowerBound, 1, 2, "") }},
	{"avg wait before first start (s)", func(s *Summary) string { return secs(s.AvgQueue) }},
	{"p99 wait before first start (s)", func(s *Summary) string { return secs(s.P99Queue) }},
	{"avg time waiting, total (s)", func(s *Summary) string { return secs(s.AvgWait) }},
	{"makespan (s)", func(s *Summary) string { return secs(s.Makespan) }},
	{"GPU utilisation, allocated (%)", func(s *Summary) string { return fixed(100*s.Utilization, 1) }},
	{"GPU utilisation, useful (%)", func(s *Summary) string { return fixed(100*s.UsefulUtilization, 1) }},
	{"preemptions per job", func(s *Summary) string { return fixed(s.PreemptionsPerJob, 2) }},
	{"restarts per job", func(s *Summary) string { return fixed(s.RestartsPerJob, 2) }},
	{"resizes per job", func(s *Summary) string { return fixed(s.ResizesPerJob, 2) }},
	{"restart overhead per job (s)", func(s *Summary) string { return secs(s.RestartSecondsPerJob) }},
	{"jobs with deadline", func(s *Summary) string { return strconv.Itoa(s.JobsWithDeadline) }},
	{"deadlines met (%)", func(s *Summary) string { return optFixed(s.DeadlineMetFrac, 100, 1, "") }},
	{"events", func(s *Summary) string { return strconv.Itoa(s.Events) }},
	{"rounds", func(s *Summary) string { return strconv.Itoa(s.Rounds) }},
}

// warningRows counts fallbacks, only when some run had one (tables of runs
// without stay as they were).
func warningRows(sums []Summary) []metricRow {
	for i := range sums {
		if sums[i].Fallbacks > 0 {
			return []metricRow{{"policy fallbacks (rounds)", func(s *Summary) string { return strconv.Itoa(s.Fallbacks) }}}
		}
	}
	return nil
}

// writeWarnings lists each run's policy warnings after a blank line, one
// line per reason with its count of rounds and the first time; nothing
// when there were none.
func writeWarnings(w io.Writer, sums []Summary) error {
	sep := "\n"
	for i := range sums {
		for _, c := range sums[i].Warnings {
			if _, err := fmt.Fprintf(w, "%s%s: %s in %d round(s) from t=%.0f s: %s\n", sep, sums[i].Name, c.Kind, c.Rounds, c.First, cellSpace.Replace(c.Reason)); err != nil {
				return err
			}
			sep = ""
		}
	}
	return nil
}

// tableCells returns the table as text: a header row ("metric" and the
// policy names) then one row per metric.
func tableCells(sums []Summary) [][]string {
	rows := make([][]string, 0, len(metricRows)+1)
	head := []string{"metric"}
	for i := range sums {
		head = append(head, sums[i].Name)
	}
	rows = append(rows, head)
	for _, m := range slices.Concat(metricRows, warningRows(sums), siteRows(sums), priorityRows(sums), fairnessRows(sums), sharingRows(sums)) {
		row := []string{m.label}
		for i := range sums {
			row = append(row, m.cell(&sums[i]))
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteTable writes sums side by side as an aligned text table: one row per
// metric (units in the labels), one column per policy, then, when a policy
// raised warnings (fallbacks), one line per warning. Durations are seconds
// with one decimal, followed by a humanised form from one minute up, e.g.
// "5400.0 (1h30m)". A "-" marks a value that is unknown (no deadline, no
// lower bound).
func WriteTable(w io.Writer, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range tableCells(sums) {
		for i, c := range row {
			// Cells must not break the table's own layout.
			row[i] = cellSpace.Replace(c)
		}
		if _, err := io.WriteString(tw, strings.Join(row, "\t")+"\n"); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeWarnings(w, sums)
}

// cellSpace replaces the characters that would break a text table's layout.
var cellSpace = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

// fixed formats x with prec decimals.
func fixed(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }

// secs formats a duration in seconds with one decimal, adding the humanised
// form for a minute or more.
func secs(x float64) string {
	s := fixed(x, 1)
	if math.Abs(x) >= 60 && !math.IsInf(x, 0) {
		s += " (" + humanDuration(x) + ")"
	}
	return s
}

func optSecs(x *float64) string {
	if x == nil {
		return "-"
	}
	return secs(*x)
}

func optFixed(x *float64, scale float64, prec int, suffix string) string {
	if x == nil {
		return "-"
	}
	return fixed(*x*scale, prec) + suffix
}

// humanDuration writes a duration in seconds compactly with at most two
// units: "45s", "1.5s", "20m35s", "3h25m", "2d3h". From a minute up the
// second unit is rounded, so the result is approximate.
func humanDuration(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 0):
		return "inf"
	case x < 0:
		return "-" + humanDuration(-x)
	case x < 60:
		s := strconv.FormatFloat(x, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + "s"
	}
	units := []struct {
		name string
		sec  float64
	}{{"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}}
	for i := 0; i < len(units)-1; i++ {
		big, small := units[i], units[i+1]
		n := math.Round(x / small.sec)
		if n*small.sec < big.sec {
			continue
		}
		per := big.sec / small.sec
		hi, lo := math.Floor(n/per), math.Mod(n, per)
		s := strconv.FormatFloat(hi, 'f', 0, 64) + big.name
		if lo != 0 {
			s += strconv.FormatFloat(lo, 'f', 0, 64) + small.name
		}
		return s
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + "s" // not reached
}
