package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tide-sched/tide/report"
)

const simHelp = `Usage: tide sim [flags]

Replays a trace on a simulated cluster under each policy given and prints
the policies side by side: JCT (average, median, p95, p99), the wait before
the first start and the total time waiting (pending or preempted), makespan, GPU utilisation, preemptions and restarts per job, deadlines met,
and each policy's distance to the no-contention lower bound.

Examples:
  tide sim                                   # workload-6, 64 T4 GPUs, fifo,srtf,tiresias
  tide sim --policy all --report out/        # every policy; CSV, JSON and HTML in out/
  tide sim --preset pollux-artifact --policy tiresias --json
  tide sim --trace philly.csv --sort --cluster 512x4:v100 --policy tiresias
  tide sim --scenario scenarios/elasticflow-128.yaml   # an experiment file (docs/deadlines.md)
  tide sim --scenario scenarios/edgeflow-diurnal.yaml --policy edgeflow,tidal   # its policies replaced
  tide sim --scenario scenarios/edgeflow-faults.yaml --points 86400   # one point of its sweep (MTBF 1 day)
  tide sim --scenario scenarios/harvest-deepboot.yaml --forecast   # score the capacity forecaster (docs/tidal.md)
  tide sim --scenario scenarios/edgeflow-faults.yaml --bound   # the most deadlines any schedule could meet, per point

Flags:
`

func cmdSim(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, "fifo,srtf,tiresias")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	reportDir := fs.String("report", "", "also write per-job CSV, summary.json and report.html to `DIR`")
	window := fs.String("jobs-window", "", "count only jobs LO..HI-1 (0-based, trace order) in the metrics, as `LO:HI`")
	progress := fs.String("progress", "auto", "progress bar on stderr: auto (only on a terminal), on or off")
	cpuprofile := fs.String("cpuprofile", "", cpuprofileUsage+"; the report's writing included")
	memprofile := fs.String("memprofile", "", "write a heap profile to `FILE` when the simulation ends, before the report is written (what is live then, and what was allocated; read it with go tool pprof)")
	scenarioFile := fs.String("scenario", "", "run the experiment in a scenario `FILE` (YAML: cluster with sites, availability, trace, model, policies, sweep; see docs/deadlines.md); other input flags are ignored, except --policy, which replaces the file's policies")
	points := fs.String("points", "", "with --scenario: run only these `VALUES` (comma-separated) of the file's sweep parameter instead of its list, e.g. --points 86400 for one MTBF point of a faults sweep")
	forecastOnly := fs.Bool("forecast", false, "with --scenario: instead of running, score tide's capacity forecaster (pinball loss) against 'same as now' and 'same as a day ago' on each site whose capacity varies (docs/tidal.md)")
	boundOnly := fs.Bool("bound", false, "with --scenario: instead of running, compute at each sweep point the most deadlines any schedule could meet on its jobs, model and realised capacity (a fluid upper bound solved with GLPK: no policy can meet more; docs/tidal.md)")
	fs.Usage = func() {
		fmt.Fprint(stderr, simHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (flags only; see tide help sim)", fs.Arg(0))}
	}
	if *scenarioFile != "" {
		if *progress != "on" && *progress != "off" && *progress != "auto" {
			return usageError{fmt.Errorf("--progress %q: want auto, on or off", *progress)}
		}
		policies, err := scenarioPolicies(fs, c.policies)
		if err != nil {
			return err
		}
		pts, err := parsePoints(*points)
		if err != nil {
			return usageError{err}
		}
		if *forecastOnly || *boundOnly {
			// They run no policy and write no report: a flag that
			// would be ignored is refused instead.
			what := "--forecast"
			if *boundOnly {
				what = "--bound"
			}
			switch {
			case *forecastOnly && *boundOnly:
				return usageError{fmt.Errorf("--forecast and --bound: give one")}
			case policies != nil:
				return usageError{fmt.Errorf("--policy: %s runs no policy", what)}
			case *reportDir != "":
				return usageError{fmt.Errorf("--report: %s writes no report (--json prints its figures)", what)}
			}
		}
		if *forecastOnly && pts != nil {
			return usageError{fmt.Errorf("--points: the forecast is scored once per site, not per sweep point")}
		}
		// The profiles cover the whole command, as without --scenario:
		// they were accepted here and never written.
		stop, err := startCPUProfile(*cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
		showBar := *progress == "on" || (*progress == "auto" && isTerminal(os.Stderr))
		switch {
		case *forecastOnly:
			err = runForecast(*scenarioFile, *asJSON, stdout)
		case *boundOnly:
			err = runBound(*scenarioFile, pts, *asJSON, stdout, stderr, showBar)
		default:
			err = runScenario(*scenarioFile, policies, pts, *asJSON, *reportDir, stdout, stderr, showBar)
		}
		if err != nil {
			return err
		}
		return writeHeapProfile(*memprofile)
	}
	if *points != "" {
		return usageError{fmt.Errorf("--points picks sweep values of a --scenario file; no --scenario given")}
	}
	if *boundOnly || *forecastOnly {
		return usageError{fmt.Errorf("--bound and --forecast read a --scenario file (its sites and capacity); no --scenario given")}
	}
	win, err := parseWindow(*window)
	if err != nil {
		return usageError{err}
	}
	s, err := c.resolve(fs, stderr)
	if err != nil {
		return err
	}
	if win[1] > len(s.Jobs) {
		return usageError{fmt.Errorf("--jobs-window %s: the trace has %d jobs", *window, len(s.Jobs))}
	}
	showBar := *progress == "on" || (*progress == "auto" && isTerminal(os.Stderr))
	if *progress != "on" && *progress != "off" && *progress != "auto" {
		return usageError{fmt.Errorf("--progress %q: want auto, on or off", *progress)}
	}
	stop, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	bar := newBar(stderr, showBar, len(s.Jobs)*len(s.specs))
	runs, err := simulate(s, bar)
	bar.finish()
	if err != nil {
		return err
	}
	if err := writeHeapProfile(*memprofile); err != nil {
		return err
	}
	sums := make([]report.Summary, len(runs))
	for i, r := range runs {
		r.Window = win
		sums[i] = report.Summarize(r)
	}
	meta := report.Meta{Trace: s.Trace, Cluster: s.Cluster.String(), TotalGPUs: s.Cluster.TotalGPUs(), Seed: c.seed, Jobs: len(s.Jobs)}
	if *reportDir != "" {
		if err := report.WriteDir(*reportDir, meta, runs); err != nil {
			return err
		}
	}
	if *asJSON {
		return report.WriteJSON(stdout, meta, sums)
	}
	fmt.Fprintf(stdout, "trace %s: %d jobs; cluster %s\n\n", s.Trace, len(s.Jobs), s.Cluster)
	report.WriteTable(stdout, sums)
	if *reportDir != "" {
		fmt.Fprintf(stdout, "\nreport written to %s (report.html, summary.json, jobs-<policy>.csv)\n", *reportDir)
	}
	return nil
}

func parseWindow(s string) ([2]int, error) {
	if s == "" {
		return [2]int{}, nil
	}
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi <= lo {
		return [2]int{}, fmt.Errorf("--jobs-window %q: want LO:HI with 0 <= LO < HI", s)
	}
	return [2]int{lo, hi}, nil
}

// simulate runs every policy on the same inputs, in parallel; the results
// come back in the order the policies were given, with distinct names.
func simulate(s *setup, bar *bar) ([]*report.Run, error) {
	runs := make([]*report.Run, len(s.specs))
	errs := make([]error, len(s.specs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, spec := range s.specs {
		r, err := s.run(spec)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			last := 0
			r.Config.Progress = func(_ float64, done, _ int) {
				bar.add(done - last)
				last = done
			}
			runs[i], errs[i] = r.Simulate()
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	report.DistinctNames(runs, s.specs)
	return runs, nil
}

// bar is a progress bar on a terminal; it prints nothing when disabled.
type bar struct {
	mu      sync.Mutex
	w       io.Writer
	on      bool
	total   int
	done    int
	start   time.Time
	lastPct int
	unit    string // what total counts: jobs, runs, points
}

func newBar(w io.Writer, on bool, total int) *bar {
	return &bar{w: w, on: on, total: total, start: time.Now(), lastPct: -1, unit: "jobs"}
}

func (b *bar) add(n int) {
	if !b.on || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	pct := 100 * b.done / max(b.total, 1)
	if pct == b.lastPct {
		return
	}
	b.lastPct = pct
	width := 40
	fill := width * pct / 100
	fmt.Fprintf(b.w, "\r[%s%s] %3d%%  %d/%d %s  %.1fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		pct, b.done, b.total, b.unit, time.Since(b.start).Seconds())
}

func (b *bar) finish() {
	if b.on && b.lastPct >= 0 {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
