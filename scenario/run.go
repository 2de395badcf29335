package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// Result is the runs of one sweep point (or of the whole scenario when it
// has no sweep), one per policy, in the scenario's order.
type Result struct {
	Param   string  // sweep parameter, "" without a sweep
	Value   float64 // its value
	Cluster string
	Jobs    int
	Runs    []*report.Run
}

// inputs are what every point shares, read once.
type inputs struct {
	jobs    []*job.Job
	name    string
	model   perf.Model
	changes []capacity.Change
}

func (sc *Scenario) read() (*inputs, error) {
	in := &inputs{}
	tr, err := trace.ReadFile(sc.path(sc.Trace.File), sc.Trace.Format, trace.Options{Sort: sc.Trace.Sort, SkipBad: sc.Trace.SkipBad})
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) { // the file: named by its line
			return nil, sc.errAt("trace.file", []string{"trace", "file"}, "%v", pe)
		}
		return nil, fmt.Errorf("scenario %s: %w", sc.File, err) // "trace FILE line N field F: ..."
	}
	jobs := tr.Jobs
	if sc.Trace.First >= len(jobs) {
		return nil, sc.errAt("trace.first", []string{"trace", "first"}, "%d, the trace has %d jobs", sc.Trace.First, len(jobs))
	}
	jobs = jobs[sc.Trace.First:]
	if sc.Trace.Limit > 0 && sc.Trace.Limit < len(jobs) {
		jobs = jobs[:sc.Trace.Limit]
	}
	in.jobs, in.name = jobs, tr.Name
	switch sc.Model.Kind {
	case "duration":
		d := assemble.DurationModel()
		if sc.Model.Costs != "" {
			v, err := strconv.ParseFloat(sc.Model.Costs, 64)
			if err != nil || v < 0 || bad(v) {
				return nil, sc.errAt("model.costs", []string{"model", "costs"}, "%q: want seconds >= 0", sc.Model.Costs)
			}
			d.Cost.Default = perf.Costs{Start: v, Restart: v, Resize: v}
		}
		in.model = d
		if in.jobs, err = assemble.ToDuration(in.jobs); err != nil {
			return nil, fmt.Errorf("scenario %s: the duration model needs durations: %w", sc.File, err)
		}
	case "pollux":
		dir := sc.Model.Dir
		if dir != "" {
			dir = sc.path(dir)
		}
		if in.model, err = assemble.PolluxModel(dir); err != nil {
			return nil, fmt.Errorf("scenario %s: model.dir: %w", sc.File, err)
		}
	default:
		parts := make([]string, len(sc.Model.Tables))
		for i, t := range sc.Model.Tables {
			dir, typ, _ := strings.Cut(t, "@")
			parts[i] = sc.path(dir) + "@" + typ
		}
		tab, err := assemble.TablesModel(parts, nil)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: model.tables: %w", sc.File, err)
		}
		switch sc.Model.Costs {
		case "", "elasticflow":
			tab.CostsByGPUs = table.ElasticFlowCosts
		default:
			v, err := strconv.ParseFloat(sc.Model.Costs, 64)
			if err != nil || v < 0 || bad(v) {
				return nil, sc.errAt("model.costs", []string{"model", "costs"}, "%q: want elasticflow or seconds >= 0", sc.Model.Costs)
			}
			tab.Cost.Default = perf.Costs{Start: v, Restart: v, Resize: v}
		}
		in.model = tab
	}
	if f := sc.Availability.File; f != "" {
		if in.changes, err = capacity.ReadFile(sc.path(f)); err != nil {
			return nil, fmt.Errorf("scenario %s: availability.file: %w", sc.File, err)
		}
	}
	return in, nil
}

// point is one configuration to run.
type point struct {
	c     *cluster.Cluster
	jobs  []*job.Job
	model perf.Model
	sites *sim.Sites
	param string
	value float64
}

func (sc *Scenario) build(in *inputs, param string, v float64) (*point, error) {
	p := &point{param: param, value: v}
	spec := sc.Cluster.Spec
	if sc.Cluster.Shorthand != "" {
		s, err := cluster.ParseShorthand(sc.Cluster.Shorthand)
		if err != nil {
			return nil, sc.errAt("cluster", []string{"cluster"}, "%v", err)
		}
		spec = *s
	}
	spec = copySpec(spec)
	if err := spec.CheckGPUTypes(); err != nil {
		return nil, &Error{File: sc.File, Line: sc.lineOf("cluster"), Field: "cluster", Err: err}
	}
	lambda := 0.0
	if sc.Model.Edge != nil {
		lambda = sc.Model.Edge.Lambda
	}
	scale, dscale := sc.Trace.ArrivalScale, sc.Trace.DeadlineScale
	faults := sc.Availability.Faults
	switch param {
	case "cloud_gpus", "edge_servers", "edge_gpus":
		if err := sc.sweepCluster(&spec, param, int(math.Round(v))); err != nil {
			return nil, err
		}
	case "lambda":
		lambda = v
		if !(v > 0 && v <= 1) {
			return nil, sc.errAt("sweep.values", []string{"sweep", "values"}, "lambda %v: want (0, 1]", v)
		}
	case "arrival_scale":
		if !(v > 0) {
			return nil, sc.errAt("sweep.values", []string{"sweep", "values"}, "arrival_scale %v: want > 0", v)
		}
		scale = v
	case "deadline_scale":
		if !(v > 0) {
			return nil, sc.errAt("sweep.values", []string{"sweep", "values"}, "deadline_scale %v: want > 0", v)
		}
		dscale = v
	case "mtbf":
		if v > 0 && v < capacity.MinInterval {
			return nil, sc.errAt("sweep.values", []string{"sweep", "values"}, "mtbf %v: want 0 (no faults) or seconds >= %g", v, float64(capacity.MinInterval))
		}
		faults = nil
		if v > 0 {
			for _, f := range sc.Availability.Faults {
				f.MTBF = v
				faults = append(faults, f)
			}
		}
	}
	c, err := spec.Build()
	if err != nil {
		return nil, &Error{File: sc.File, Line: sc.lineOf("cluster"), Field: "cluster", Err: err}
	}
	p.c = c
	// A wave or faults on a site the cluster lacks: named by its line and
	// field here, not by the simulator without either.
	for _, l := range []struct {
		name  string
		sites []string
	}{{"diurnal", diurnalSites(sc.Availability.Diurnal)}, {"faults", faultSites(sc.Availability.Faults)}} {
		for i, site := range l.sites {
			if c.SiteOf(site) == nil {
				var names []string
				for _, st := range c.Sites() {
					names = append(names, st.Name)
				}
				return nil, sc.errAt(fmt.Sprintf("availability.%s[%d].site", l.name, i), []string{"availability", l.name, fmt.Sprintf("[%d]", i), "site"},
					"no site %q in the cluster (its sites: %s)", site, strings.Join(names, ", "))
			}
		}
	}
	p.model = in.model
	if e := sc.Model.Edge; e != nil {
		p.model = perf.Scaled{Model: in.model, Type: e.Type, Ref: e.Ref, Lambda: lambda}
	}
	p.jobs = sc.jobs(in.jobs, scale, dscale)
	// A scale that moves a job past job.MaxTime would be refused by the
	// simulator naming only the job; name the field that moved it.
	for _, j := range p.jobs {
		field, t := "arrival_scale", j.Submit
		if t <= job.MaxTime {
			field, t = "deadline_scale", j.Deadline // the window moved it
		}
		if t <= job.MaxTime {
			continue
		}
		if param == field {
			return nil, sc.errAt("sweep.values", []string{"sweep", "values"}, "%s %v: job %s would arrive or be due at %.3g s, past %g s", field, v, j.ID, t, float64(job.MaxTime))
		}
		return nil, sc.errAt("trace."+field, []string{"trace", field}, "job %s would arrive or be due at %.3g s, past %g s", j.ID, t, float64(job.MaxTime))
	}
	has := func(site string) bool { return c.SiteOf(site) != nil }
	st := &sim.Sites{Migration: sim.Migration{RemoteGiBps: sc.Migration.RemoteGiBps, MemoryGiBps: sc.Migration.MemoryGiBps,
		LocalGiBps: sc.Migration.LocalGiBps}, CheckpointInterval: sc.Migration.CheckpointInterval}
	if sc.Migration.Free {
		st.Migration.Size = func(*job.Job) float64 { return 0 }
	}
	for _, ch := range in.changes {
		if has(ch.Site) || !strings.HasPrefix(param, "edge") {
			st.Changes = append(st.Changes, ch)
		}
	}
	for _, d := range sc.Availability.Diurnal {
		if has(d.Site) || !strings.HasPrefix(param, "edge") {
			st.Diurnal = append(st.Diurnal, capacity.Diurnal(d))
		}
	}
	for _, f := range faults {
		st.Faults = append(st.Faults, capacity.Faults(f))
	}
	p.sites = st
	return p, nil
}

// sweepCluster sets the cloud's GPU count, the edge's server count or the
// GPUs per edge server. An edge site swept to 0 servers is removed.
func (sc *Scenario) sweepCluster(spec *cluster.Spec, param string, v int) error {
	kind := cluster.SiteEdge
	if param == "cloud_gpus" {
		kind = cluster.SiteCloud
	}
	for i := range spec.Sites {
		s := &spec.Sites[i]
		k := s.Kind
		if k == "" {
			k = cluster.SiteCloud
		}
		if k != kind || len(s.Nodes) != 1 || len(s.Racks) != 0 {
			continue
		}
		n := &s.Nodes[0]
		switch param {
		case "cloud_gpus":
			if n.GPUs <= 0 || v%n.GPUs != 0 || v == 0 {
				return sc.errAt("sweep.values", []string{"sweep", "values"}, "cloud_gpus %d is not a positive multiple of %d GPUs per node", v, n.GPUs)
			}
			n.Count = v / n.GPUs
		case "edge_servers":
			if v == 0 {
				spec.Sites = append(spec.Sites[:i], spec.Sites[i+1:]...)
				return nil
			}
			n.Count = v
		case "edge_gpus":
			if v == 0 {
				return sc.errAt("sweep.values", []string{"sweep", "values"}, "edge_gpus must be >= 1")
			}
			n.GPUs = v
		}
		return nil
	}
	return sc.errAt("sweep.param", []string{"sweep", "param"}, "%s: the cluster needs one %s site with a single nodes entry to sweep", param, kind)
}

func copySpec(s cluster.Spec) cluster.Spec {
	out := cluster.Spec{Nodes: append([]cluster.NodeSpec(nil), s.Nodes...)}
	for _, site := range s.Sites {
		site.Nodes = append([]cluster.NodeSpec(nil), site.Nodes...)
		site.Racks = append([]cluster.RackSpec(nil), site.Racks...)
		out.Sites = append(out.Sites, site)
	}
	return out
}

// jobs copies the trace's jobs with arrivals compressed by scale, windows
// (deadline - submission) stretched by dscale, and priority classes drawn.
func (sc *Scenario) jobs(src []*job.Job, scale, dscale float64) []*job.Job {
	out := make([]*job.Job, len(src))
	t0 := 0.0
	if len(src) > 0 {
		t0 = src[0].Submit
	}
	var rng *rand.Rand
	var cum []float64
	if p := sc.Priorities; p != nil {
		rng = rand.New(rand.NewPCG(p.Seed, 11))
		total := 0.0
		for i := range p.Classes {
			w := 1.0
			if len(p.Weights) > 0 {
				w = p.Weights[i]
			}
			total += w
			cum = append(cum, total)
		}
		for i := range cum {
			cum[i] /= total
		}
	}
	for i, j := range src {
		c := *j
		c.Submit = (j.Submit - t0) / scale
		if j.Deadline > 0 {
			move := func(d float64) float64 { return c.Submit + (d-j.Submit)*dscale }
			c.Deadline = move(j.Deadline)
			c.Utility = j.Utility.Moved(move) // a soft job's later deadlines move with it
		}
		if rng != nil {
			u := rng.Float64()
			k := 0
			for k < len(cum)-1 && u >= cum[k] {
				k++
			}
			c.Priority = sc.Priorities.Classes[k]
		}
		out[i] = &c
	}
	return out
}

// points lists the configurations: one per sweep value, or one.
func (sc *Scenario) points(in *inputs) ([]*point, error) {
	if sc.Sweep == nil {
		p, err := sc.build(in, "", 0)
		if err != nil {
			return nil, err
		}
		return []*point{p}, nil
	}
	var out []*point
	for _, v := range sc.Sweep.Values {
		p, err := sc.build(in, sc.Sweep.Param, v)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// readPoints reads the scenario's inputs and builds its points.
func (sc *Scenario) readPoints() (*inputs, []*point, error) {
	in, err := sc.read()
	if err != nil {
		return nil, nil, err
	}
	pts, err := sc.points(in)
	if err != nil {
		return nil, nil, err
	}
	return in, pts, nil
}

// Run runs every policy at every point, in parallel; results come in the
// scenario's order. done, when set, is called after each run, one call at
// a time (the runs end on several goroutines; done need not lock).
func (sc *Scenario) Run(done func()) ([]Result, error) {
	in, pts, err := sc.readPoints()
	if err != nil {
		return nil, err
	}
	res := make([]Result, len(pts))
	inputs := make([]*assemble.Inputs, len(pts))
	for i, pt := range pts {
		if inputs[i], err = sc.inputs(in, pt); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(pts)*len(sc.Policies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var doneMu sync.Mutex
	for i, pt := range pts {
		res[i] = Result{Param: pt.param, Value: pt.value, Cluster: pt.c.String(), Jobs: len(pt.jobs), Runs: make([]*report.Run, len(sc.Policies))}
		ins := inputs[i]
		for k, spec := range sc.Policies {
			r, err := ins.Build(spec)
			if err != nil {
				return nil, sc.errAt(fmt.Sprintf("policies[%d]", k), []string{"policies", fmt.Sprintf("[%d]", k)}, "%v", errors.Unwrap(err))
			}
			wg.Add(1)
			go func(i, k int, spec string) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out, err := r.Simulate()
				if out != nil {
					out.Policy = spec // the column shows the knobs too
				}
				res[i].Runs[k], errs[i*len(sc.Policies)+k] = out, err
				if done != nil {
					doneMu.Lock()
					done()
					doneMu.Unlock()
				}
			}(i, k, spec)
		}
	}
	wg.Wait()
	for n, err := range errs {
		if err != nil {
			if pt := pts[n/len(sc.Policies)]; pt.param != "" {
				return nil, fmt.Errorf("scenario %s: %s %v: %w", sc.File, pt.param, pt.value, err)
			}
			return nil, fmt.Errorf("scenario %s: %w", sc.File, err)
		}
	}
	return res, nil
}

// Runs is how many simulations Run performs.
func (sc *Scenario) Runs() int {
	return sc.Points() * len(sc.Policies)
}

// Points is how many points the scenario has: its sweep's values, or 1.
func (sc *Scenario) Points() int {
	if sc.Sweep != nil {
		return len(sc.Sweep.Values)
	}
	return 1
}

func diurnalSites(ds []Diurnal) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Site)
	}
	return out
}

func faultSites(fs []Faults) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Site)
	}
	return out
}
