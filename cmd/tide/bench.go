package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"
)

const benchHelp = `Usage: tide bench [flags]

Times the simulator: replays a trace under each policy --repeat times and
reports wall time, simulated events per second and simulated seconds per
wall second (best of the repeats). The default is the embedded workload-6
under the Pollux artifact's Tiresias, the run the Pollux artifact's Python
simulator needs about 6.7 s for on a 2-core machine.

Example, the 82,247-job Philly trace on 2,048 GPUs:
  tide bench --trace ../shared/data/pollux/philly.csv --sort --cluster 512x4:v100 --policy tiresias

Flags:
`

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, "tiresias")
	repeat := fs.Int("repeat", 3, "runs per policy; the best is reported")
	cpuprofile := fs.String("cpuprofile", "", cpuprofileUsage)
	progress := fs.String("progress", "auto", "progress bar on stderr: auto (only on a terminal), on or off")
	fs.Usage = func() {
		fmt.Fprint(stderr, benchHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if c.trace == "" && c.preset == "" {
		c.preset = "pollux-artifact"
	}
	if *progress != "on" && *progress != "off" && *progress != "auto" {
		return usageError{fmt.Errorf("--progress %q: want auto, on or off", *progress)}
	}
	if *repeat < 1 {
		return usageError{fmt.Errorf("--repeat %d: want >= 1", *repeat)}
	}
	s, err := c.resolve(fs, stderr)
	if err != nil {
		return err
	}
	stop, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(stdout, "trace %s: %d jobs; cluster %s\n", s.Trace, len(s.Jobs), s.Cluster)
	fmt.Fprintln(tw, "policy\tjobs\tevents\trounds\twall s\tevents/s\tsim s/wall s\t")
	for _, spec := range s.specs {
		var best time.Duration
		var events, rounds int
		var span float64
		for i := 0; i < *repeat; i++ {
			r, err := s.run(spec)
			if err != nil {
				return err
			}
			b := newBar(stderr, *progress == "on" || (*progress == "auto" && isTerminal(os.Stderr)), len(r.Jobs))
			last := 0
			r.Config.Progress = func(_ float64, done, _ int) { b.add(done - last); last = done }
			start := time.Now()
			run, err := r.Simulate()
			b.finish()
			if err != nil {
				return err
			}
			d := time.Since(start)
			if i == 0 || d < best {
				best = d
			}
			events, rounds = run.Events, run.Rounds
			span = 0
			for _, j := range run.Jobs {
				span = max(span, j.Finish)
			}
		}
		sec := best.Seconds()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%.0f\t%.0f\t\n", spec, len(s.Jobs), events, rounds, sec, float64(events)/sec, span/sec)
	}
	return tw.Flush()
}

const cpuprofileUsage = "write a CPU profile of the runs to `FILE` (read it with go tool pprof)"

// writeHeapProfile writes a heap profile to path ("" = none) after a
// garbage collection, so that its in-use figures are what is live now.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}

// startCPUProfile starts a CPU profile written to path ("" = none) and
// returns what stops it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
