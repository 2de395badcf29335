// Package contract is what every tide scheduling policy meets and what
// the registry (package policy) knows of one: the Info a family registers,
// the Context a policy may learn before the run, and the Options, its
// spec's knobs. It imports no policy, so the families (subpackages of
// policy) and the registry can all import it.
//
// A policy turns a read-only engine.Snapshot into an engine.Plan and
// nothing else: it never touches an executor, never reads the clock other
// than Snapshot.Now, and gives the same plan for the same snapshot and the
// same state (engine.Stateful).
//
// Policies are named by a spec string, "name" or "name:key=value:key=value"
// (for example "tiresias:preset=pollux" or "tiresias:limits=3600/7200:knob=2").
package contract

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
)

// Context is what a policy may learn before the run: the trace's jobs (for
// distributions such as Tiresias' Gittins index) and a place to resolve
// relative file names.
type Context struct {
	Jobs []*job.Job
	// Service estimates a job's total GPU-seconds, for distributions built
	// from the trace; nil means use Job.Duration x GPUs.
	Service func(j *job.Job) float64
	// Future is the realised capacity of each varying site over the run
	// (GPUs available to training, by site name). Only the simulator can
	// give it, and only tidal's upper-bound ablation (forecast=oracle)
	// reads it; every other policy sees only the present.
	Future map[string]forecast.Series
}

// Info describes one registered policy.
type Info struct {
	Name    string
	Summary string
	Knobs   string // "key=default: meaning; ..."
	// NeedsDeadlines marks policies that only make sense when jobs have deadlines.
	NeedsDeadlines bool
	// Elastic marks policies that choose each job's GPU count and read the
	// hints jobs report (engine.Status.Hints): executors run job agents for
	// them, and a trace's rigid jobs are replayed as elastic ones.
	Elastic bool
	// AdaptBatch marks policies whose jobs also choose their batch size for
	// each allocation (Pollux).
	AdaptBatch bool
	// NeedsSolver marks policies that solve LPs or MILPs with GLPK (package
	// solver): they cannot be built where GLPK is missing.
	NeedsSolver bool
	// Presets are specs of the policy that test suites run as policies of
	// their own: a paper's or a simulator's preset, the specs tide sim's
	// --preset rewrites the policy to, and the baselines the docs compare
	// with (sim's conformance and state tests run each one).
	Presets []string
	// Defaults, when set, are the policy's knobs as the Go struct its
	// constructor takes (fields tagged `knob:"key"`, decoded by
	// Options.Decode; Build is then Typed(Defaults, ...)), holding their
	// defaults: TestKnobsDocumented holds the defaults Knobs declares to
	// these values.
	Defaults any
	// Build builds the policy from its knobs, read through opts (each
	// read is recorded: a knob given and not read is refused as unknown).
	Build func(ctx Context, opts Options) (engine.Policy, error)
}

// Options are a spec's key=value pairs. Getters record which keys were read,
// so unknown keys are reported.
type Options struct {
	policy string
	kv     map[string]string
	used   map[string]bool
}

// NewOptions holds the knobs kv given to the policy named policy.
func NewOptions(policy string, kv map[string]string) Options {
	return Options{policy: policy, kv: kv, used: map[string]bool{}}
}

// Policy is the name of the policy the options are for, for errors.
func (o Options) Policy() string { return o.policy }

// Lookup reads a knob's text as given, recording the read.
func (o Options) Lookup(key string) (string, bool) {
	o.used[key] = true
	v, ok := o.kv[key]
	return v, ok
}

// Read lists the knobs read so far, sorted.
func (o Options) Read() []string {
	var out []string
	for k := range o.used {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Unread lists the knobs given and never read, sorted: unknown ones once
// the policy is built.
func (o Options) Unread() []string {
	var out []string
	for k := range o.kv {
		if !o.used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Float reads a number knob; NaN and infinities are refused.
func (o Options) Float(key string, def float64) (float64, error) {
	v, ok := o.Lookup(key)
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("policy %s: %s=%q: want a number", o.policy, key, v)
	}
	return f, nil
}

// Bool reads a true/false knob.
func (o Options) Bool(key string, def bool) (bool, error) {
	v, ok := o.Lookup(key)
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("policy %s: %s=%q: want true or false", o.policy, key, v)
	}
	return b, nil
}

// String reads a text knob.
func (o Options) String(key, def string) string {
	if v, ok := o.Lookup(key); ok {
		return v
	}
	return def
}

// Floats reads a list knob of finite numbers separated by "/".
func (o Options) Floats(key string, def []float64) ([]float64, error) {
	v, ok := o.Lookup(key)
	if !ok {
		return def, nil
	}
	var out []float64
	for _, part := range strings.Split(v, "/") {
		f, err := strconv.ParseFloat(part, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("policy %s: %s=%q: want numbers separated by /", o.policy, key, v)
		}
		out = append(out, f)
	}
	return out, nil
}

// Split cuts a spec into its policy's name and its knobs.
func Split(spec string) (name string, kv map[string]string, err error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	kv = map[string]string{}
	if rest != "" {
		for _, item := range strings.Split(rest, ":") {
			k, v, ok := strings.Cut(item, "=")
			if !ok || k == "" {
				return "", nil, fmt.Errorf("policy %q: option %q: want key=value", spec, item)
			}
			kv[k] = v
		}
	}
	return name, kv, nil
}

// New builds the policy from its knobs kv, refusing unknown ones.
func (i Info) New(ctx Context, kv map[string]string) (engine.Policy, error) {
	opts := NewOptions(i.Name, kv)
	p, err := i.Build(ctx, opts)
	if err != nil {
		return nil, err
	}
	if unknown := opts.Unread(); len(unknown) > 0 {
		takes := "no knobs of its own"
		if keys := i.knobDefaults(); len(keys) > 0 {
			takes = strings.Join(keys, ", ")
		}
		return nil, fmt.Errorf("policy %s: unknown option(s) %s: it takes %s, and priority=off|strict|preempt as every policy does ('tide policies %s' explains them)",
			i.Name, strings.Join(unknown, ", "), takes, i.Name)
	}
	return p, nil
}
