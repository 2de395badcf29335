package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/trace"
)

// common holds the flags sim and bench share: what to replay, on what, how.
type common struct {
	trace, format, clusterArg, policies, placer, model, costs, preset string
	speed, quota                                                      string
	round, arrivalScale                                               float64
	onEvents, sortRows, skipBad, borrow                               bool
	seed                                                              int64
}

func (c *common) register(fs *flag.FlagSet, defPolicies string) {
	fs.StringVar(&c.trace, "trace", "", "trace `FILE` to replay (default: the embedded Pollux workload-6)")
	fs.StringVar(&c.format, "format", "", "trace format, one of "+strings.Join(trace.Formats, ", ")+" (default: detected from the file)")
	fs.StringVar(&c.clusterArg, "cluster", "16x4:t4", "cluster: a shorthand such as 16x4:t4 or 8x1:v100,8x1:p100, or a YAML/JSON spec `FILE`")
	fs.StringVar(&c.policies, "policy", defPolicies, "comma-separated policy specs, name[:key=value...], or 'all' (see 'tide policies')")
	fs.StringVar(&c.placer, "placer", "", "GPU placer: pack (consolidating, topology-aware), most-free, or hived[:vc=TENANT@GPUS[@TYPE]/...] (HiveD buddy cells and virtual clusters, docs/fairness.md) (default pack; most-free under --preset pollux-artifact)")
	fs.StringVar(&c.model, "model", "auto", "performance model: auto, pollux[=DIR], duration, elasticflow=DIR[@TYPE][,DIR@TYPE], gavel=FILE")
	fs.StringVar(&c.costs, "restart-cost", "", "start/restart/resize cost in seconds: N for all models, 'measured' for per-model measured full restarts, 'measured-fast' for those plus fast elastic resizes, or model=N,... overrides (default: the model's own, 30 s for Pollux profiles)")
	fs.StringVar(&c.preset, "preset", "", "pollux-artifact: the Pollux artifact simulator's rules (rounds only, most-free placer, whole-second epochs, Tiresias preset=pollux, Optimus oracle=true, ncf fixed at batch 32768 on one GPU under elastic policies); gavel: Gavel's simulator's rounds (360 s, rounds only; see docs/heterogeneity.md)")
	fs.StringVar(&c.speed, "speed", "", "per-GPU-type speed factors over the model, e.g. v100=1,p100=0.6,k80=0.25: a job runs at the model's rate times its type's factor (types not listed: 1); gives duration traces a heterogeneous cluster")
	fs.StringVar(&c.quota, "quota", "", "GPU quotas per tenant, `TENANT=GPUS,...`, wrapping every policy as tide kube does: a tenant's jobs within its quota go first, the rest only on GPUs no quota claims (default: none)")
	fs.BoolVar(&c.borrow, "borrow", true, "with --quota: lend GPUs other tenants leave idle beyond quota, reclaimed by preemption when their owner needs them")
	fs.Float64Var(&c.round, "round", 60, "seconds between scheduling rounds")
	fs.Float64Var(&c.arrivalScale, "arrival-scale", 1, "multiply every submission time by `F` (0.25: arrivals four times denser, same jobs, same order); deadlines move with their jobs")
	fs.BoolVar(&c.onEvents, "on-events", true, "also schedule at every arrival and completion")
	fs.BoolVar(&c.sortRows, "sort", false, "sort the trace by submit time instead of rejecting unsorted times")
	fs.BoolVar(&c.skipBad, "skip-bad", false, "skip invalid trace rows, and jobs larger than the cluster, with a warning instead of failing")
	fs.Int64Var(&c.seed, "seed", 1, "random seed (every policy is deterministic given it)")
}

// setup is what a simulation needs, resolved from the flags: the shared
// inputs (package assemble builds each run from them) and the policy specs.
type setup struct {
	assemble.Inputs
	specs []string
}

// run assembles the run of one policy spec, naming the flag at fault.
func (s *setup) run(spec string) (*assemble.Run, error) {
	r, err := s.Build(spec)
	var ae *assemble.Error
	if errors.As(err, &ae) {
		return nil, usageError{fmt.Errorf("--%s: %w", ae.Field, ae.Err)}
	}
	return r, err
}

func (c *common) resolve(fs *flag.FlagSet, stderr io.Writer) (*setup, error) {
	s := &setup{Inputs: assemble.Inputs{Placer: c.placer, Borrow: c.borrow, Seed: c.seed}}
	if c.quota != "" {
		q, err := policy.ParseQuotas(c.quota)
		if err != nil {
			return nil, usageError{fmt.Errorf("--quota: %w", err)}
		}
		s.Quotas = q
	}
	preset, err := assemble.LookupPreset(c.preset)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%w", err)}
	}
	s.Preset = preset
	if preset.RoundsOnly && !flagSet(fs, "on-events") {
		c.onEvents = false
	}
	if preset.Round > 0 && !flagSet(fs, "round") {
		c.round = preset.Round
	}
	if c.round <= 0 || math.IsNaN(c.round) || math.IsInf(c.round, 0) {
		return nil, usageError{fmt.Errorf("--round %v: want a positive number of seconds", c.round)}
	}
	s.Round, s.OnEvents = c.round, c.onEvents
	cl, err := cluster.Parse(c.clusterArg)
	if err != nil {
		return nil, usageError{fmt.Errorf("--cluster: %w", err)}
	}
	s.Cluster = cl
	opts := trace.Options{Sort: c.sortRows, SkipBad: c.skipBad, Warn: func(m string) { fmt.Fprintln(stderr, "warning:", m) }}
	var tr *trace.Trace
	if c.trace == "" {
		if c.format != "" { // it would be ignored: the embedded trace is Pollux's
			return nil, usageError{fmt.Errorf("--format %q is the format of a --trace file; no --trace given (the embedded workload-6 is a pollux trace)", c.format)}
		}
		f, err := data.FS.Open(data.DefaultTrace)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		tr, err = trace.Read(f, "workload-6.csv (embedded)", "pollux", opts)
		if err != nil {
			return nil, err
		}
	} else if tr, err = trace.ReadFile(c.trace, c.format, opts); err != nil {
		return nil, err
	}
	s.Trace = tr.Name
	partJob, _ := assemble.PartGPU(tr.Jobs)
	if s.Jobs, err = dropUnfit(tr.Jobs, cl, anyElastic(c.policies, partJob != nil), c.skipBad, opts.Warn); err != nil {
		return nil, err
	}
	if len(s.Jobs) == 0 {
		return nil, fmt.Errorf("trace %s has no jobs", tr.Name)
	}
	if s.Jobs, err = scaleArrivals(s.Jobs, c.arrivalScale); err != nil {
		return nil, usageError{err}
	}
	if c.arrivalScale != 1 {
		s.Trace += fmt.Sprintf(" (arrivals x%g)", c.arrivalScale)
	}
	if s.Model, s.Jobs, err = c.buildModel(s.Jobs, stderr); err != nil {
		return nil, err
	}
	if d, ok := s.Model.(perf.Duration); ok {
		// Duration is a value: override a copy and keep it.
		if err := applyCosts(&d, c.costs); err != nil {
			return nil, usageError{err}
		}
		s.Model = d
	} else if err := applyCosts(s.Model, c.costs); err != nil {
		return nil, usageError{err}
	}
	if c.speed != "" {
		sp, err := perf.ParseSpeedFactors(c.speed)
		if err != nil {
			return nil, usageError{fmt.Errorf("--speed: %w", err)}
		}
		if _, ok := s.Model.(perf.Observer); ok {
			return nil, usageError{fmt.Errorf("--speed: the %s model already knows its GPU type; speed factors apply to duration and table models", s.Model.Name())}
		}
		s.Model = perf.SpeedFactors{Base: s.Model, Speed: sp}
	}
	hasDeadlines := false
	for _, j := range s.Jobs {
		hasDeadlines = hasDeadlines || j.Deadline > 0
	}
	for _, spec := range strings.Split(c.policies, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		if spec == "all" {
			partJob, partColumn := assemble.PartGPU(s.Jobs)
			s.specs = append(s.specs, allPolicies(hasDeadlines, partJob, partColumn, solver.Available(), stderr)...)
			continue
		}
		s.specs = append(s.specs, spec)
	}
	if len(s.specs) == 0 {
		return nil, usageError{fmt.Errorf("--policy: no policy given")}
	}
	for i, spec := range s.specs {
		s.specs[i] = s.Spec(spec)
	}
	return s, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// buildModel picks the performance model. "auto" chooses the Pollux
// profiles for jobs counted in epochs and the duration model otherwise,
// converting jobs that carry a recorded duration.
func (c *common) buildModel(jobs []*job.Job, stderr io.Writer) (perf.Model, []*job.Job, error) {
	name, arg, _ := strings.Cut(c.model, "=")
	switch name {
	case "auto":
		epochs, seconds := 0, 0
		for _, j := range jobs {
			switch j.Unit {
			case job.Epochs:
				epochs++
			case job.Seconds:
				seconds++
			}
		}
		switch {
		case epochs == len(jobs):
			m, err := assemble.PolluxModel("")
			return m, jobs, err
		case seconds == len(jobs):
			return assemble.DurationModel(), jobs, nil
		}
		out, err := assemble.ToDuration(jobs)
		if err != nil {
			return nil, nil, fmt.Errorf("%w; pass --model elasticflow=DIR or --model gavel=FILE to use measured throughputs", err)
		}
		fmt.Fprintln(stderr, "note: the trace counts work in iterations; replaying each job's recorded duration (--model duration). Use --model elasticflow=DIR or gavel=FILE for measured throughputs.")
		return assemble.DurationModel(), out, nil
	case "pollux":
		m, err := assemble.PolluxModel(arg)
		return m, jobs, err
	case "duration":
		out, err := assemble.ToDuration(jobs)
		return assemble.DurationModel(), out, err
	case "elasticflow":
		if arg == "" {
			return nil, nil, usageError{fmt.Errorf("--model elasticflow=DIR[@TYPE]: directory of throughput CSVs missing")}
		}
		tab, err := assemble.TablesModel(strings.Split(arg, ","), func(dir string) string { return inferType(dir, c) })
		if err != nil {
			return nil, nil, err
		}
		return tab, jobs, nil
	case "gavel":
		if arg == "" {
			return nil, nil, usageError{fmt.Errorf("--model gavel=FILE: throughputs JSON missing")}
		}
		g, err := table.LoadGavel(arg)
		return g, jobs, err
	}
	return nil, nil, usageError{fmt.Errorf("--model %q: want auto, pollux[=DIR], duration, elasticflow=DIR or gavel=FILE", c.model)}
}

// inferType guesses the GPU type of an ElasticFlow table directory from its
// name (throughputs_A100 -> a100), else the cluster's only type.
func inferType(dir string, c *common) string {
	low := strings.ToLower(dir)
	if i := strings.LastIndex(low, "throughputs_"); i >= 0 {
		return strings.Trim(low[i+len("throughputs_"):], "/")
	}
	if cl, err := cluster.Parse(c.clusterArg); err == nil && len(cl.GPUTypes()) == 1 {
		return cl.GPUTypes()[0]
	}
	return ""
}

// applyCosts overrides a model's restart costs from --restart-cost.
func applyCosts(m perf.Model, spec string) error {
	if spec == "" {
		return nil
	}
	var ct *perf.CostTable
	switch mm := m.(type) {
	case *pollux.Model:
		ct = &mm.Cost
	case *table.Table:
		ct = &mm.Cost
	case *table.Gavel:
		ct = &mm.Cost
	case *perf.Duration:
		ct = &mm.Cost
	default:
		return fmt.Errorf("--restart-cost: the %s model takes no cost overrides", m.Name())
	}
	switch spec {
	case "measured":
		ct.PerKey = perf.MeasuredRestartCosts
		return nil
	case "measured-fast":
		ct.PerKey = perf.FastRescaleCosts
		return nil
	}
	if v, err := strconv.ParseFloat(spec, 64); err == nil {
		if v < 0 {
			return fmt.Errorf("--restart-cost %v: want >= 0 seconds", v)
		}
		ct.Default, ct.PerKey = perf.Costs{Start: v, Restart: v, Resize: v}, nil
		return nil
	}
	per := map[string]perf.Costs{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || f < 0 {
			return fmt.Errorf("--restart-cost %q: want N, 'measured', 'measured-fast', or model=N,... with N >= 0 seconds", spec)
		}
		per[k] = perf.Costs{Start: f, Restart: f, Resize: f}
	}
	ct.PerKey = per
	return nil
}

// cmdPolicies lists the policies, one a line, or shows one with its knobs.
const policiesUsage = `Usage: tide policies [NAME]

Lists the scheduling policies, one a line, with what each needs ([E]
elastic, [D] needs deadlines, [S] needs GLPK, [B] adapts batch sizes).
With a NAME, shows that policy's summary and its knobs, which a policy
spec sets as NAME:key=value:key=value (tide sim --policy, tide serve
--policy).
`

func cmdPolicies(args []string, w io.Writer) error {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprint(w, policiesUsage)
		return nil
	}
	if len(args) > 1 {
		return usageError{fmt.Errorf("want at most one policy name, got %q", args)}
	}
	if len(args) == 1 {
		i, ok := policy.Lookup(args[0])
		if !ok {
			_, err := policy.Parse(args[0], policy.Context{}) // names the policies there are
			return err
		}
		return writePolicy(w, i)
	}
	for _, i := range policy.All() {
		fmt.Fprintln(w, policyLine(i, 100))
	}
	fmt.Fprintln(w, "\n[E] elastic, [D] needs deadlines, [S] needs GLPK, [B] adapts batch sizes.")
	fmt.Fprintln(w, "tide policies NAME shows a policy's knobs; every policy takes priority=off|strict|preempt.")
	return nil
}

// policyLine is one policy on one line of at most width columns: its name,
// its capabilities and the start of its summary.
func policyLine(i policy.Info, width int) string {
	line := fmt.Sprintf("%-17s %-9s %s", i.Name, policyFlags(i), i.Summary)
	if r := []rune(line); len(r) > width {
		line = string(r[:width-3]) + "..."
	}
	return line
}

// policyFlags abbreviates what a policy needs or does: E elastic, D needs
// deadlines, S needs the GLPK solver, B adapts batch sizes.
func policyFlags(i policy.Info) string {
	f := ""
	for _, c := range []struct {
		on bool
		s  string
	}{{i.Elastic, "E"}, {i.NeedsDeadlines, "D"}, {i.NeedsSolver, "S"}, {i.AdaptBatch, "B"}} {
		if c.on {
			f += c.s
		}
	}
	if f == "" {
		return "-"
	}
	return "[" + f + "]"
}

// writePolicy shows one policy: its summary, what it needs and its knobs,
// one a line.
func writePolicy(w io.Writer, i policy.Info) error {
	fmt.Fprintf(w, "%s: %s\n", i.Name, i.Summary)
	var needs []string
	if i.Elastic {
		needs = append(needs, "elastic: chooses each job's GPU count (a trace's rigid jobs are replayed as elastic)")
	}
	if i.AdaptBatch {
		needs = append(needs, "adapts each job's batch size")
	}
	if i.NeedsDeadlines {
		needs = append(needs, "needs jobs with deadlines")
	}
	if i.NeedsSolver {
		needs = append(needs, "needs the GLPK solver (libglpk40)")
	}
	if len(needs) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range needs {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w, "\nknobs (NAME:key=value:key=value):")
	for _, k := range i.KnobList() {
		sep := ": "
		if strings.HasPrefix(k.Doc, "(") {
			sep = " " // preset=paper (paper: ...; pollux: ...), not "preset=paper: (paper: ..."
		}
		fmt.Fprintf(w, "  %s=%s%s%s\n", k.Key, k.Default, sep, k.Doc)
	}
	_, err := fmt.Fprintln(w, "  priority=off: strict priority classes (strict, or preempt to take lower classes' GPUs)")
	return err
}
