package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tide-sched/tide/report"
)

const sweepHelp = `Usage: tide sweep --traces GLOB[,GLOB...] [flags]

Replays every trace the patterns match (in name order) under each policy and
prints one row per trace with each policy's average JCT, then the mean over
the traces of each directory (when they come from several, as the Pollux
workloads do, one load level per directory) and over all traces: how
policies compare across workloads and load levels. All the
flags of 'tide sim' that choose the cluster, model, placer and rules apply
to every trace.

Example, the Pollux workloads at four load levels:
  tide sweep --traces '../shared/data/pollux/workloads*/workload-*.csv' \
    --policy pollux,optimus,afs,tiresias,fifo

Flags:
`

// sweepOut is one trace's results in --json output.
type sweepOut struct {
	Trace    string           `json:"trace"`
	Policies []report.Summary `json:"policies"`
}

func cmdSweep(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, "fifo,srtf,tiresias")
	patterns := fs.String("traces", "", "comma-separated trace `GLOB`s (quote them from the shell)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	fs.Usage = func() {
		fmt.Fprint(stderr, sweepHelp)
		// sim's --trace, which sweep refuses (--traces), is left out.
		shown := flag.NewFlagSet("sweep", flag.ContinueOnError)
		shown.SetOutput(stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "trace" {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue // not a value parsed before -h
			}
		})
		shown.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (quote the --traces pattern)", fs.Arg(0))}
	}
	if c.trace != "" {
		return usageError{fmt.Errorf("--trace: use --traces with sweep")}
	}
	var files []string
	for _, p := range strings.Split(*patterns, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return usageError{fmt.Errorf("--traces %q: %w", p, err)}
		}
		if len(m) == 0 {
			return usageError{fmt.Errorf("--traces %q: no file matches", p)}
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return usageError{fmt.Errorf("--traces: no pattern given")}
	}
	sort.Strings(files)
	var out []sweepOut
	var specs []string
	for i, f := range files {
		c.trace = f
		s, err := c.resolve(fs, stderr)
		if err != nil {
			return err
		}
		if i > 0 && !slices.Equal(s.specs, specs) {
			// --policy all runs what each trace allows (deadline policies
			// need deadlines, elastic ones whole GPUs): the columns of the
			// table and the means are by position, so every trace must run
			// the same list.
			return usageError{fmt.Errorf("--policy all runs other policies on %s than on %s (only on %s: %s; only on %s: %s; see the notes above): name the policies that suit every trace with --policy",
				f, files[0], f, orNone(missing(s.specs, specs)), files[0], orNone(missing(specs, s.specs)))}
		}
		specs = s.specs
		fmt.Fprintf(stderr, "[%d/%d] %s\n", i+1, len(files), f)
		runs, err := simulate(s, newBar(stderr, false, 0))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, sweepOut{Trace: f, Policies: report.SummarizeAll(runs)})
	}
	means := sweepMeans(out, len(specs))
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"cluster": c.clusterArg, "traces": out, "policies": specs, "mean_avg_jct_s": means})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "avg JCT (s)\t%s\t\n", strings.Join(specs, "\t"))
	for _, o := range out {
		row := []string{o.Trace}
		for _, p := range o.Policies {
			row = append(row, fmt.Sprintf("%.1f", p.AvgJCT))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	for _, m := range means {
		row := []string{m.Name}
		for _, v := range m.AvgJCT {
			row = append(row, fmt.Sprintf("%.1f", v))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// missing lists, comma-separated, the specs of a that b lacks.
func missing(a, b []string) string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return strings.Join(out, ",")
}

// orNone is s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// sweepMean is the mean over a group of traces of each policy's average
// JCT, s.
type sweepMean struct {
	Name   string    `json:"name"`
	AvgJCT []float64 `json:"avg_jct_s"` // in policy order
}

// sweepMeans are the means per directory, when the traces come from more
// than one (the Pollux workloads keep one load level per directory), then
// the mean over all traces, named "mean".
func sweepMeans(out []sweepOut, policies int) []sweepMean {
	var dirs []string
	byDir := map[string][]sweepOut{}
	for _, o := range out {
		d := filepath.Dir(o.Trace)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], o)
	}
	mean := func(name string, os []sweepOut) sweepMean {
		m := sweepMean{Name: name, AvgJCT: make([]float64, policies)}
		for _, o := range os {
			for k, p := range o.Policies {
				m.AvgJCT[k] += p.AvgJCT / float64(len(os))
			}
		}
		return m
	}
	var ms []sweepMean
	if len(dirs) > 1 {
		for _, d := range dirs {
			ms = append(ms, mean("mean "+d+string(filepath.Separator), byDir[d]))
		}
	}
	return append(ms, mean("mean", out))
}
