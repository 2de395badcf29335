package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tide-sched/tide/trace"
)

const traceHelp = `Usage: tide trace tile [flags]

Builds a large trace from a published one by laying copies of it out in
time (docs/scale.md): copy k starts floor((k + u) x span/overlap) seconds
after the first, u drawn per copy from --seed, and its jobs are renamed
"k/ID". About --overlap copies run at once, so the load is about --overlap
times the original's; --copies x jobs is the size. The output is tide's CSV
format (docs/trace-formats.md), the same bytes for the same flags.

Example, a Helios-sized trace (3.29 million jobs) from Philly's 82,247:
  tide trace tile --trace ../shared/data/pollux/philly.csv --sort \
      --copies 40 --overlap 10 --seed 1 --out philly-x40.csv

Flags:
`

func cmdTrace(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "tile" && args[0] != "-h" && args[0] != "-help" && args[0] != "--help") {
		fmt.Fprint(stderr, traceHelp)
		if len(args) == 0 {
			return usageError{fmt.Errorf("missing subcommand: want tile")}
		}
		return usageError{fmt.Errorf("unknown subcommand %q: want tile", args[0])}
	}
	if args[0] == "tile" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("trace tile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("trace", "", "trace `FILE` to tile (required)")
	format := fs.String("format", "", "its format (default: detected)")
	sortRows := fs.Bool("sort", false, "sort the input by submit time instead of rejecting unsorted times")
	copies := fs.Int("copies", 40, "copies of the trace to lay out")
	overlap := fs.Int("overlap", 10, "copies running at once (the load multiplier)")
	seed := fs.Uint64("seed", 1, "seed of the copies' shifts")
	out := fs.String("out", "", "write the tiled trace to `FILE` (default: standard output)")
	fs.Usage = func() {
		fmt.Fprint(stderr, traceHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" {
		return usageError{fmt.Errorf("--trace: missing (the trace to tile)")}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (flags only; see tide help trace)", fs.Arg(0))}
	}
	tr, err := trace.ReadFile(*in, *format, trace.Options{Sort: *sortRows})
	if err != nil {
		return err
	}
	jobs, err := trace.Tile(tr.Jobs, trace.TileOptions{Copies: *copies, Overlap: *overlap, Seed: *seed})
	if err != nil {
		return usageError{err}
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		if err := trace.WriteCSV(bw, jobs); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %d jobs (%d copies of %s) to %s\n", len(jobs), *copies, tr.Name, *out)
		return nil
	}
	return trace.WriteCSV(w, jobs)
}
