package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/scenario"
)

// scenarioPolicies is --policy when given with --scenario: the specs that
// replace the file's policies (nil when --policy was not given). Each spec
// is checked here, so a typo names the flag rather than the file.
func scenarioPolicies(fs *flag.FlagSet, list string) ([]string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "policy" })
	if !given {
		return nil, nil
	}
	var out []string
	for _, spec := range strings.Split(list, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		if spec == "all" {
			return nil, usageError{fmt.Errorf("--policy all: with --scenario, name the policies (see 'tide policies')")}
		}
		// The scenario gives the realised capacity (for tidal's oracle).
		if _, err := policy.Parse(spec, policy.Context{Future: map[string]forecast.Series{}}); err != nil {
			return nil, usageError{fmt.Errorf("--policy %q: %w", spec, err)}
		}
		out = append(out, spec)
	}
	if len(out) == 0 {
		return nil, usageError{fmt.Errorf("--policy: no policy given")}
	}
	return out, nil
}

// runForecast is `tide sim --scenario FILE --forecast`: the forecaster's
// pinball loss against the two baselines on each varying site.
func runForecast(path string, asJSON bool, stdout io.Writer) error {
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	res, err := sc.Forecast()
	if err != nil {
		return err
	}
	if asJSON {
		type row struct {
			Site       string  `json:"site"`
			Kind       string  `json:"kind"`
			HorizonS   float64 `json:"horizon_s"`
			Forecaster float64 `json:"forecaster"`
			Now        float64 `json:"same_as_now"`
			DayAgo     float64 `json:"same_as_a_day_ago"`
			N          int     `json:"forecasts"`
		}
		out := struct {
			Scenario  string    `json:"scenario"`
			Days      float64   `json:"days"`
			Quantiles []float64 `json:"quantiles"`
			Rows      []row     `json:"rows"`
		}{Scenario: sc.Name, Days: scenario.ForecastDays, Quantiles: scenario.ForecastQuantiles}
		for _, s := range res {
			for _, x := range s.Scores {
				out.Rows = append(out.Rows, row{s.Site, s.Kind, x.Horizon, x.Forecaster, x.Now, x.DayAgo, x.N})
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "scenario %s: mean pinball loss (GPUs) over quantiles %v, forecasts every 10 min from day 1 to day %d\n\n",
		sc.Name, scenario.ForecastQuantiles, scenario.ForecastDays)
	if len(res) == 0 {
		fmt.Fprintln(stdout, "no site's capacity varies: nothing to forecast")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "site\tkind\thorizon\tforecaster\tsame as now\tsame as a day ago\tforecasts")
	for _, s := range res {
		for _, x := range s.Scores {
			fmt.Fprintf(tw, "%s\t%s\t%gh\t%.3f\t%.3f\t%.3f\t%d\n", s.Site, s.Kind, x.Horizon/3600, x.Forecaster, x.Now, x.DayAgo, x.N)
		}
	}
	return tw.Flush()
}

// runBound is `tide sim --scenario FILE --bound`: at each sweep point (or
// those of --points), the most deadlines any schedule could meet.
func runBound(path string, points []float64, asJSON bool, stdout, stderr io.Writer, showBar bool) error {
	sc, err := loadScenario(path, points, stderr)
	if err != nil {
		return err
	}
	b := newBar(stderr, showBar, sc.Points())
	b.unit = "points"
	res, err := sc.Bounds(func() { b.add(1) })
	b.finish()
	if err != nil {
		return err
	}
	if asJSON {
		out := struct {
			Scenario string                `json:"scenario"`
			Points   []scenario.PointBound `json:"points"`
		}{Scenario: sc.Name, Points: res}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "scenario %s: the most deadlines any schedule could meet (fluid upper bound; no policy can meet more)\n\n", sc.Name)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	param := "point"
	if len(res) > 0 && res[0].Param != "" {
		param = res[0].Param
	}
	fmt.Fprintf(tw, "%s\tjobs with deadlines\tat most met\t(%%)\tno pool could end alone\twindows\n", param)
	for _, r := range res {
		v := "-"
		if r.Param != "" {
			v = strconv.FormatFloat(r.Value, 'g', -1, 64)
		}
		pct := 0.0
		if r.Jobs > 0 {
			pct = 100 * float64(r.Bound) / float64(r.Jobs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%d\t%d\n", v, r.Jobs, r.Bound, pct, r.Alone, r.Windows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range res {
		if !r.Exact {
			fmt.Fprintln(stdout, "\nsome jobs' rates change with their progress: those count only their least GPU-seconds and time (a looser bound)")
			break
		}
	}
	return nil
}
