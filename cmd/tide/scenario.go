package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/scenario"
)

// loadScenario reads a scenario file with its sweep cut to points (--points)
// when given.
func loadScenario(path string, points []float64, stderr io.Writer) (*scenario.Scenario, error) {
	sc, err := scenario.Load(path)
	if err != nil {
		return nil, err
	}
	if points != nil {
		var file []float64
		if sc.Sweep != nil {
			file = slices.Clone(sc.Sweep.Values)
		}
		if err := sc.SetSweepValues(points); err != nil {
			return nil, usageError{fmt.Errorf("--points: %w", err)}
		}
		// A value the file does not list is run as given, but say so:
		// --points takes values, not indexes, and "--points 1" on a faults
		// sweep is an MTBF of one second.
		listed := make([]string, len(file))
		for i, v := range file {
			listed[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		for _, v := range points {
			if !slices.Contains(file, v) {
				fmt.Fprintf(stderr, "tide sim: note: --points %v is not one of the file's %s values (%s); it runs as given\n",
					v, sc.Sweep.Param, strings.Join(listed, ", "))
			}
		}
	}
	return sc, nil
}

// runScenario is `tide sim --scenario FILE`: the experiment the file
// describes, as a table (one per point, and a deadline summary across a
// sweep), JSON, or a report directory with a plot of the sweep.
func runScenario(path string, policies []string, points []float64, asJSON bool, reportDir string, stdout, stderr io.Writer, showBar bool) error {
	sc, err := loadScenario(path, points, stderr)
	if err != nil {
		return err
	}
	if len(policies) > 0 {
		sc.Policies = policies
	}
	b := newBar(stderr, showBar, sc.Runs())
	b.unit = "runs"
	res, err := sc.Run(func() { b.add(1) })
	b.finish()
	if err != nil {
		return err
	}
	if reportDir != "" {
		if err := writeScenarioDir(reportDir, sc, res); err != nil {
			return err
		}
	}
	if asJSON {
		return scenario.WriteJSON(stdout, sc, res)
	}
	fmt.Fprintf(stdout, "scenario %s", sc.Name)
	if sc.Description != "" {
		fmt.Fprintf(stdout, ": %s", sc.Description)
	}
	fmt.Fprintln(stdout)
	for _, r := range res {
		fmt.Fprintln(stdout)
		if r.Param != "" {
			fmt.Fprintf(stdout, "%s = %s: ", r.Param, num(r.Value))
		}
		fmt.Fprintf(stdout, "%d jobs; cluster %s\n\n", r.Jobs, r.Cluster)
		if err := report.WriteTable(stdout, report.SummarizeAll(r.Runs)); err != nil {
			return err
		}
	}
	if sc.Sweep != nil {
		fmt.Fprintf(stdout, "\ndeadlines met (%%) by %s:\n\n", sc.Sweep.Param)
		writeSweepTable(stdout, sc, res)
	}
	if reportDir != "" {
		fmt.Fprintf(stdout, "\nreport written to %s\n", reportDir)
	}
	return nil
}

// parsePoints reads --points: comma-separated sweep values (nil when the
// flag is empty).
func parsePoints(list string) ([]float64, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("--points %q: %q is not a number", list, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// metPct is a run's deadline-met percentage (0 when no job has a deadline).
func metPct(r *report.Run) float64 {
	s := report.Summarize(r)
	if s.DeadlineMetFrac == nil {
		return 0
	}
	return 100 * *s.DeadlineMetFrac
}

func writeSweepTable(w io.Writer, sc *scenario.Scenario, res []scenario.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t%s\t\n", sc.Sweep.Param, strings.Join(sc.Policies, "\t"))
	for _, r := range res {
		cells := []string{num(r.Value)}
		for _, run := range r.Runs {
			cells = append(cells, fmt.Sprintf("%.1f", metPct(run)))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// writeScenarioDir writes each point's report (a sub-directory per sweep
// value) and, for a sweep, deadlines.svg (deadline-met % per policy) and
// jct.svg (average JCT per policy).
func writeScenarioDir(dir string, sc *scenario.Scenario, res []scenario.Result) error {
	for _, r := range res {
		d := dir
		if r.Param != "" {
			d = filepath.Join(dir, fmt.Sprintf("%s-%s", r.Param, num(r.Value)))
		}
		meta := report.Meta{Trace: r.Runs[0].Trace, Cluster: r.Cluster, TotalGPUs: r.Runs[0].TotalGPUs, Seed: sc.Seed, Jobs: r.Jobs}
		if err := report.WriteDir(d, meta, r.Runs); err != nil {
			return err
		}
	}
	if sc.Sweep == nil {
		return nil
	}
	xs := make([]float64, len(res))
	ys := make([][]float64, len(sc.Policies))
	for i, r := range res {
		xs[i] = r.Value
		for k, run := range r.Runs {
			ys[k] = append(ys[k], metPct(run))
		}
	}
	svg := report.SweepSVG(fmt.Sprintf("%s: deadlines met", sc.Name), sc.Sweep.Param, "deadlines met (%)", xs, sc.Policies, ys)
	if err := os.WriteFile(filepath.Join(dir, "deadlines.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	// jct.svg: average JCT in hours per policy (the harvest experiments').
	for k := range ys {
		ys[k] = ys[k][:0]
		for _, r := range res {
			ys[k] = append(ys[k], report.Summarize(r.Runs[k]).AvgJCT/3600)
		}
	}
	svg = report.SweepSVG(fmt.Sprintf("%s: average JCT", sc.Name), sc.Sweep.Param, "average JCT (h)", xs, sc.Policies, ys)
	return os.WriteFile(filepath.Join(dir, "jct.svg"), []byte(svg), 0o644)
}
