package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tide-sched/tide/report"
)

const sweepHelp = `Usage: tide sweep --traces GLOB[,GLOB...] [flags]

Replays every trace the patterns match (in name order) under each policy and
prints one row per trace with each policy's average JCT, then the mean over
traces: how policies compare across workloads and load levels. All the
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
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
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
		specs = s.specs
		fmt.Fprintf(stderr, "[%d/%d] %s\n", i+1, len(files), f)
		runs, err := simulate(s, &c, newBar(stderr, false, 0))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, sweepOut{Trace: f, Policies: report.SummarizeAll(runs)})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"cluster": c.clusterArg, "traces": out})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "avg JCT (s)\t%s\t\n", strings.Join(specs, "\t"))
	mean := make([]float64, len(specs))
	for _, o := range out {
		row := []string{o.Trace}
		for k, p := range o.Policies {
			row = append(row, fmt.Sprintf("%.1f", p.AvgJCT))
			mean[k] += p.AvgJCT / float64(len(out))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	row := []string{"mean"}
	for _, m := range mean {
		row = append(row, fmt.Sprintf("%.1f", m))
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	return tw.Flush()
}
