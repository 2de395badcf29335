// Package assemble turns what a simulation is made of (a trace's jobs, a
// cluster, a performance model, a preset, and the shaping of the jobs for
// each policy) into sim configurations. `tide sim`, `tide sweep`,
// `tide bench` and `tide sim --scenario` build every run here, and
// `tide serve` builds its policy here, so the same inputs give the same
// run whichever way they are given.
//
// What a run is assembled from, in order:
//
//  1. the preset (LookupPreset) rewrites policy specs and sets the placer,
//     round length and time keeping of the simulator it imitates;
//  2. the jobs are shaped for the policy (Inputs.JobsFor): an elastic
//     policy's jobs may range from 1 GPU to all GPUs of their type, capped
//     by their batch limits unless the policy adapts batch sizes (a job
//     with part of each GPU, which is rigid, is refused for it);
//  3. the policy is built from its spec with the shaped jobs and an
//     estimate of each job's service (Policy), wrapped in tenant quotas
//     when there are any;
//  4. the sim.Config carries the rest unchanged.
package assemble

import (
	"fmt"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// Inputs are what every run of one comparison shares. Jobs are never
// modified: each run gets its own copies where it needs them.
type Inputs struct {
	Trace   string // the trace's name in reports
	Jobs    []*job.Job
	Cluster *cluster.Cluster
	Model   perf.Model
	Preset  Preset
	// Placer is a place.Lookup spec; "" is the preset's placer, else pack.
	Placer string
	// Round is the time between scheduling rounds, s; OnEvents also
	// schedules at every arrival and completion (sim.Config).
	Round    float64
	OnEvents bool
	Seed     int64
	// Quotas, when not nil, wraps every policy in policy.Quota with these
	// per-tenant GPU limits; Borrow lends what other tenants leave idle.
	Quotas map[string]int
	Borrow bool
	// Sites makes capacity vary over time (scenarios); nil: fixed.
	Sites *sim.Sites
	// Future is each varying site's realised capacity, for tidal's oracle
	// ablation only (policy.Context.Future).
	Future map[string]forecast.Series
	// CapToSite caps a job that asks for more GPUs than the cluster's
	// largest site holds to that site (scenario sweeps over small
	// clusters); off, such jobs are the caller's to refuse.
	CapToSite bool
}

// Run is one simulation, ready: sim.Run(r.Config, r.Jobs).
type Run struct {
	Spec   string // the policy spec after the preset's rewrite
	Jobs   []*job.Job
	Config sim.Config
}

// Simulate runs it.
func (r *Run) Simulate() (*report.Run, error) { return sim.Run(r.Config, r.Jobs) }

// Error says which input a run could not be assembled from: Field is
// "policy", "placer" or "quota".
type Error struct {
	Field string
	Err   error
}

func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Spec is the policy spec a run of spec uses under the inputs' preset.
func (in *Inputs) Spec(spec string) string { return in.Preset.Spec(spec) }

// Build assembles the run of one policy spec (before the preset's rewrite).
func (in *Inputs) Build(spec string) (*Run, error) {
	spec = in.Spec(spec)
	info, _ := policy.Lookup(spec)
	if info.Elastic {
		if err := wholeGPUs(info.Name, in.Jobs); err != nil {
			return nil, &Error{Field: "policy", Err: err}
		}
	}
	jobs := in.JobsFor(info)
	if in.Quotas != nil && !in.Borrow {
		if err := withinQuotas(jobs, in.Quotas); err != nil {
			return nil, &Error{Field: "quota", Err: err}
		}
	}
	p, err := Policy(spec, policy.Context{Jobs: jobs, Service: ServiceEstimate(in.Cluster, in.Model), Future: in.Future}, in.Quotas, in.Borrow)
	if err != nil {
		return nil, err
	}
	placer := in.Placer
	if placer == "" {
		placer = in.Preset.Placer
	}
	pl, err := place.Lookup(placer)
	if err != nil {
		return nil, &Error{Field: "placer", Err: err}
	}
	cfg := sim.Config{Cluster: in.Cluster, Model: in.Model, Policy: p, Placer: pl, Round: in.Round,
		OnEvents: in.OnEvents, Seed: in.Seed, Trace: in.Trace, WholeSeconds: in.Preset.WholeSeconds,
		Agents: info.Elastic, Sites: in.Sites}
	return &Run{Spec: spec, Jobs: jobs, Config: cfg}, nil
}

// wholeGPUs refuses jobs with part of each GPU (job.Job.Fractional) for an
// elastic policy: such a job is rigid (docs/sharing.md), the elastic
// policies choose counts and node shapes of whole GPUs only, and JobsFor
// would make it elastic, which the simulator refuses mid-way as a job
// error, or the policy would give it an exact node shape, which the
// engine refuses in the middle of the run.
func wholeGPUs(policyName string, jobs []*job.Job) error {
	if j, field := PartGPU(jobs); j != nil {
		return fmt.Errorf("%s is elastic: it runs jobs on whole GPUs, and job %s asks for part of each GPU (%s); run such jobs with a policy that is not elastic (tide policies lists them)", policyName, j.ID, field)
	}
	return nil
}

// PartGPU returns the first job that asks for part of each GPU
// (job.Job.Fractional), and the trace column that asks for it (gpu_share,
// gpu_mem_gib or mig); nil and "" when every job runs on whole GPUs.
// Elastic policies refuse such a trace (Build).
func PartGPU(jobs []*job.Job) (*job.Job, string) {
	for _, j := range jobs {
		if !j.Fractional() {
			continue
		}
		switch {
		case j.MIG != "":
			return j, "mig"
		case j.Share == 0:
			return j, "gpu_mem_gib"
		}
		return j, "gpu_share"
	}
	return nil, ""
}

// withinQuotas refuses, for quotas without borrowing, the first job that
// needs more GPUs than its tenant's quota: policy.Quota runs a tenant's
// jobs only within its quota then, so such a job would wait for ever (the
// simulator stopped the run, stuck, with no word of the quota).
func withinQuotas(jobs []*job.Job, quotas map[string]int) error {
	for _, j := range jobs {
		need := j.MinGPUs
		if need == 0 {
			need = j.GPUs
		}
		if have, ok := quotas[j.Tenant]; need > have {
			of := fmt.Sprintf("its quota of %d", have)
			if !ok {
				of = "no quota"
			}
			return fmt.Errorf("job %s of tenant %q needs %d GPUs and the tenant has %s: without borrowing a tenant's jobs run only within its quota, so it would never run; "+
				"give tenant %q a quota of at least %d, or lend idle GPUs (borrow)", j.ID, j.Tenant, need, of, j.Tenant, need)
		}
	}
	return nil
}

// Policy builds the policy a spec names, wrapped in tenant quotas when
// quotas is not nil. Errors are *Error with Field "policy".
func Policy(spec string, ctx policy.Context, quotas map[string]int, borrow bool) (engine.Policy, error) {
	p, err := policy.Parse(spec, ctx)
	if err != nil {
		return nil, &Error{Field: "policy", Err: err}
	}
	if quotas != nil {
		p = &policy.Quota{Inner: p, Limits: quotas, Borrow: borrow}
	}
	return p, nil
}

// JobsFor returns the jobs a policy replays. Rigid policies get the
// trace's jobs (capped to the largest site under CapToSite). An elastic
// policy gets copies whose GPU count may range from 1 to all GPUs of their
// type; with a model that knows batch limits (a perf.Observer), a job with
// a fixed batch can use at most batch / smallest per-GPU batch GPUs (the
// Pollux artifact's Optimus rule), and under a policy that adapts batch
// sizes (Pollux) the job's batch is its agent's choice. Under the
// pollux-artifact preset ncf keeps a fixed 32,768-sample batch on one GPU,
// as the artifact does.
func (in *Inputs) JobsFor(info policy.Info) []*job.Job {
	largest := 0
	if in.CapToSite {
		for _, s := range in.Cluster.Sites() {
			largest = max(largest, s.GPUs)
		}
	}
	if !info.Elastic && largest == 0 {
		return in.Jobs
	}
	obs, _ := in.Model.(perf.Observer)
	out := make([]*job.Job, len(in.Jobs))
	for i, j := range in.Jobs {
		c := *j
		if largest > 0 && c.GPUs > largest {
			c.GPUs = largest
			c.MinGPUs, c.MaxGPUs = min(c.MinGPUs, largest), min(c.MaxGPUs, largest)
		}
		out[i] = &c
		if !info.Elastic {
			continue
		}
		c.MinGPUs, c.MaxGPUs = 1, in.Cluster.GPUsOfType(c.GPUType)
		c.AdaptBatch = info.AdaptBatch && obs != nil
		if in.Preset.FixedNCF && c.Model == "ncf" && obs != nil {
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
	}
	return out
}

// ServiceEstimate gives each job's GPU-seconds on its requested GPUs, for
// distributions built from the trace (Tiresias' Gittins index): its
// recorded duration times its GPUs, else the model's time for its work on
// packed GPUs of its type.
func ServiceEstimate(c *cluster.Cluster, m perf.Model) func(j *job.Job) float64 {
	perNode := 0
	for _, n := range c.Nodes {
		perNode = max(perNode, n.GPUs)
	}
	return func(j *job.Job) float64 {
		if j.Duration > 0 {
			return j.Duration * float64(j.GPUs)
		}
		t := j.GPUType
		if t == "" {
			t = c.GPUTypes()[0]
		}
		return perf.Remaining(m, j, perf.Packed(t, j.GPUs, perNode), 0) * float64(j.GPUs)
	}
}

// Preset is the rules of a simulator tide imitates.
type Preset struct {
	Name string // "" for tide's own rules
	// Placer is the default placer spec ("" pack).
	Placer string
	// RoundsOnly schedules only at round boundaries unless the caller asks
	// for on-event rounds; Round, when > 0, is the default round length, s.
	RoundsOnly bool
	Round      float64
	// WholeSeconds is sim.Config.WholeSeconds.
	WholeSeconds bool
	// FixedNCF keeps ncf at batch 32,768 on one GPU under elastic
	// policies; Rewrite adapts policy specs (knobs the simulator fixes).
	FixedNCF bool
	Rewrite  func(spec string) string
}

// Presets lists the preset names LookupPreset knows.
var Presets = []string{"pollux-artifact", "gavel"}

// LookupPreset returns the named preset; "" is tide's own rules.
func LookupPreset(name string) (Preset, error) {
	switch name {
	case "":
		return Preset{}, nil
	case "pollux-artifact":
		return Preset{Name: name, Placer: "most-free", RoundsOnly: true, WholeSeconds: true, FixedNCF: true, Rewrite: polluxArtifactSpec}, nil
	case "gavel":
		return Preset{Name: name, RoundsOnly: true, Round: 360}, nil
	}
	return Preset{}, fmt.Errorf("preset %q: want %s", name, strings.Join(Presets, " or "))
}

// Spec rewrites a policy spec for the preset.
func (p Preset) Spec(spec string) string {
	if p.Rewrite == nil {
		return spec
	}
	return p.Rewrite(spec)
}

// polluxArtifactSpec: the Pollux artifact's Tiresias (preset=pollux), its
// Optimus predicting with the measured step times, and its Pollux charging
// a job one restart per allocation change whatever its size (tide's own
// default charges by GPU; docs/elastic.md).
func polluxArtifactSpec(spec string) string {
	switch {
	case (spec == "tiresias" || spec == "tiresias-gittins") && !strings.Contains(spec, "preset="):
		return spec + ":preset=pollux"
	case spec == "optimus":
		return "optimus:oracle=true"
	case (spec == "pollux" || strings.HasPrefix(spec, "pollux:")) && !strings.Contains(spec, "restart_cost="):
		return spec + ":restart_cost=job"
	}
	return spec
}
