package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/engine"
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

// setup is what a simulation needs, resolved from the flags.
type setup struct {
	traceName string
	jobs      []*job.Job
	cluster   *cluster.Cluster
	model     perf.Model
	specs     []string
	placer    string
	whole     bool
	artifact  bool           // --preset pollux-artifact
	quotas    map[string]int // --quota; nil: none
	borrow    bool
}

// policy builds the policy spec names for one run over jobs, wrapped in
// the tenants' quotas when --quota is given.
func (s *setup) policy(spec string, jobs []*job.Job) (engine.Policy, error) {
	p, err := policy.Parse(spec, policy.Context{Jobs: jobs, Service: serviceEstimate(s)})
	if err != nil {
		return nil, usageError{fmt.Errorf("--policy: %w", err)}
	}
	if s.quotas != nil {
		p = &policy.Quota{Inner: p, Limits: s.quotas, Borrow: s.borrow}
	}
	return p, nil
}

func (c *common) resolve(fs *flag.FlagSet, stderr io.Writer) (*setup, error) {
	s := &setup{placer: c.placer, borrow: c.borrow}
	if c.quota != "" {
		q, err := policy.ParseQuotas(c.quota)
		if err != nil {
			return nil, usageError{fmt.Errorf("--quota: %w", err)}
		}
		s.quotas = q
	}
	switch c.preset {
	case "":
	case "pollux-artifact":
		if !flagSet(fs, "on-events") {
			c.onEvents = false
		}
		if s.placer == "" {
			s.placer = "most-free"
		}
		s.whole = true
		s.artifact = true
	case "gavel":
		if !flagSet(fs, "on-events") {
			c.onEvents = false
		}
		if !flagSet(fs, "round") {
			c.round = 360
		}
	default:
		return nil, usageError{fmt.Errorf("--preset %q: want pollux-artifact or gavel", c.preset)}
	}
	if c.round <= 0 || math.IsNaN(c.round) || math.IsInf(c.round, 0) {
		return nil, usageError{fmt.Errorf("--round %v: want a positive number of seconds", c.round)}
	}
	cl, err := cluster.Parse(c.clusterArg)
	if err != nil {
		return nil, usageError{fmt.Errorf("--cluster: %w", err)}
	}
	s.cluster = cl
	opts := trace.Options{Sort: c.sortRows, SkipBad: c.skipBad, Warn: func(m string) { fmt.Fprintln(stderr, "warning:", m) }}
	var tr *trace.Trace
	if c.trace == "" {
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
	s.traceName = tr.Name
	if s.jobs, err = dropUnfit(tr.Jobs, cl, c.skipBad, opts.Warn); err != nil {
		return nil, err
	}
	if len(s.jobs) == 0 {
		return nil, fmt.Errorf("trace %s has no jobs", tr.Name)
	}
	if s.jobs, err = scaleArrivals(s.jobs, c.arrivalScale); err != nil {
		return nil, usageError{err}
	}
	if c.arrivalScale != 1 {
		s.traceName += fmt.Sprintf(" (arrivals x%g)", c.arrivalScale)
	}
	if s.model, s.jobs, err = c.buildModel(s.jobs, stderr); err != nil {
		return nil, err
	}
	if d, ok := s.model.(perf.Duration); ok {
		// Duration is a value: override a copy and keep it.
		if err := applyCosts(&d, c.costs); err != nil {
			return nil, usageError{err}
		}
		s.model = d
	} else if err := applyCosts(s.model, c.costs); err != nil {
		return nil, usageError{err}
	}
	if c.speed != "" {
		sp, err := perf.ParseSpeedFactors(c.speed)
		if err != nil {
			return nil, usageError{fmt.Errorf("--speed: %w", err)}
		}
		if _, ok := s.model.(perf.Observer); ok {
			return nil, usageError{fmt.Errorf("--speed: the %s model already knows its GPU type; speed factors apply to duration and table models", s.model.Name())}
		}
		s.model = perf.SpeedFactors{Base: s.model, Speed: sp}
	}
	hasDeadlines := false
	for _, j := range s.jobs {
		hasDeadlines = hasDeadlines || j.Deadline > 0
	}
	for _, spec := range strings.Split(c.policies, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		if spec == "all" {
			s.specs = append(s.specs, allPolicies(hasDeadlines, solver.Available(), stderr)...)
			continue
		}
		s.specs = append(s.specs, spec)
	}
	if len(s.specs) == 0 {
		return nil, usageError{fmt.Errorf("--policy: no policy given")}
	}
	if c.preset == "pollux-artifact" {
		for i, spec := range s.specs {
			if (spec == "tiresias" || spec == "tiresias-gittins") && !strings.Contains(spec, "preset=") {
				s.specs[i] = spec + ":preset=pollux"
			}
			// The artifact's Optimus predicts with the measured step times.
			if spec == "optimus" {
				s.specs[i] = "optimus:oracle=true"
			}
			// The artifact's Pollux charges a job one restart per
			// allocation change, whatever its size (tide's own default
			// charges by GPU; docs/elastic.md).
			if (spec == "pollux" || strings.HasPrefix(spec, "pollux:")) && !strings.Contains(spec, "restart_cost=") {
				s.specs[i] = spec + ":restart_cost=job"
				if spec == "pollux" {
					s.specs[i] = "pollux:restart_cost=job"
				}
			}
		}
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
			return c.polluxModel("", jobs)
		case seconds == len(jobs):
			return perf.Duration{Cost: durationCosts}, jobs, nil
		}
		out, err := toDuration(jobs)
		if err != nil {
			return nil, nil, fmt.Errorf("%w; pass --model elasticflow=DIR or --model gavel=FILE to use measured throughputs", err)
		}
		fmt.Fprintln(stderr, "note: the trace counts work in iterations; replaying each job's recorded duration (--model duration). Use --model elasticflow=DIR or gavel=FILE for measured throughputs.")
		return perf.Duration{Cost: durationCosts}, out, nil
	case "pollux":
		return c.polluxModel(arg, jobs)
	case "duration":
		out, err := toDuration(jobs)
		return perf.Duration{Cost: durationCosts}, out, err
	case "elasticflow":
		if arg == "" {
			return nil, nil, usageError{fmt.Errorf("--model elasticflow=DIR[@TYPE]: directory of throughput CSVs missing")}
		}
		var tab *table.Table
		for _, part := range strings.Split(arg, ",") {
			dir, typ, _ := strings.Cut(part, "@")
			if typ == "" {
				typ = inferType(dir, c)
			}
			t, err := table.LoadElasticFlowDir(dir, typ)
			if err != nil {
				return nil, nil, err
			}
			if tab == nil {
				tab = t
			} else if err := tab.Add(t); err != nil {
				return nil, nil, err
			}
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

// durationCosts: a duration-only job starts for free and pays 30 s (the
// Pollux artifact's checkpoint-restore figure) when preempted or resized.
var durationCosts = perf.CostTable{Default: perf.Costs{Start: 0, Restart: 30, Resize: 30}}

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

func (c *common) polluxModel(dir string, jobs []*job.Job) (perf.Model, []*job.Job, error) {
	if dir == "" {
		m, err := pollux.Load(data.FS, data.ProfilesDir)
		return m, jobs, err
	}
	m, err := pollux.Load(os.DirFS(dir), ".")
	return m, jobs, err
}

// toDuration rewrites jobs to count their work as their recorded duration.
func toDuration(jobs []*job.Job) ([]*job.Job, error) {
	out := make([]*job.Job, len(jobs))
	for i, j := range jobs {
		if j.Unit == job.Seconds {
			out[i] = j
			continue
		}
		if !(j.Duration > 0) {
			return nil, fmt.Errorf("job %s counts work in %s and has no recorded duration", j.ID, j.Unit)
		}
		c := *j
		c.Work, c.Unit = j.Duration, job.Seconds
		out[i] = &c
	}
	return out, nil
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
func cmdPolicies(args []string, w io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("policies: want at most one policy name, got %q", args)
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
	if i.Knobs != "" {
		for _, k := range strings.Split(i.Knobs, "; ") {
			fmt.Fprintf(w, "  %s\n", k)
		}
	}
	_, err := fmt.Fprintln(w, "  priority=off: strict priority classes (strict, or preempt to take lower classes' GPUs)")
	return err
}

// runJobs returns the jobs a policy replays. Rigid policies get the trace's
// jobs. An elastic policy gets copies whose GPU count may range from 1 to
// all GPUs of their type; with a model that knows batch limits, a job with
// a fixed batch can use at most batch / smallest per-GPU batch GPUs (the
// Pollux artifact's Optimus rule), and under a policy that adapts batch
// sizes (Pollux) the job's batch is its agent's choice. Under the
// pollux-artifact preset ncf keeps a fixed 32,768-sample batch on one GPU,
// as the artifact does.
func (s *setup) runJobs(spec string) []*job.Job {
	info, ok := policy.Lookup(spec)
	if !ok || !info.Elastic {
		return s.jobs
	}
	obs, _ := s.model.(perf.Observer)
	out := make([]*job.Job, len(s.jobs))
	for i, j := range s.jobs {
		c := *j
		c.MinGPUs, c.MaxGPUs = 1, s.cluster.GPUsOfType(c.GPUType)
		c.AdaptBatch = info.AdaptBatch && obs != nil
		if s.artifact && c.Model == "ncf" && obs != nil {
			c.AdaptBatch, c.BatchSize, c.MaxGPUs = false, 32768, 1
		}
		if obs != nil && !c.AdaptBatch {
			l := obs.Limits(&c)
			batch := c.BatchSize
			if batch == 0 {
				batch = l.InitBatch
			}
			if l.MinLocal > 0 {
				c.MaxGPUs = max(1, min(c.MaxGPUs, batch/l.MinLocal))
			}
		}
		c.GPUs = min(max(c.GPUs, c.MinGPUs), c.MaxGPUs)
		out[i] = &c
	}
	return out
}
