// Package policy holds tide's scheduling policies. Each one turns a read-only
// engine.Snapshot into an engine.Plan and nothing else: policies never touch
// an executor, never read the clock other than Snapshot.Now, and give the
// same plan for the same snapshot.
//
// Policies are named by a spec string, "name" or "name:key=value:key=value"
// (for example "tiresias:preset=pollux" or "tiresias:limits=3600/7200:knob=2"),
// so several can be compared on one command line.
package policy

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
	build       func(ctx Context, opts Options) (engine.Policy, error)
}

// All lists the registered policies in a stable order.
func All() []Info {
	out := append([]Info(nil), registry...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Options are a spec's key=value pairs. Getters record which keys were read,
// so unknown keys are reported.
type Options struct {
	policy string
	kv     map[string]string
	used   map[string]bool
}

func (o Options) raw(key string) (string, bool) {
	o.used[key] = true
	v, ok := o.kv[key]
	return v, ok
}

// Float reads a number knob; NaN and infinities are refused.
func (o Options) Float(key string, def float64) (float64, error) {
	v, ok := o.raw(key)
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
	v, ok := o.raw(key)
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
	if v, ok := o.raw(key); ok {
		return v
	}
	return def
}

// Floats reads a list knob of finite numbers separated by "/".
func (o Options) Floats(key string, def []float64) ([]float64, error) {
	v, ok := o.raw(key)
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

// Lookup returns the registered policy a spec names.
func Lookup(spec string) (Info, bool) {
	name, _, _ := strings.Cut(strings.TrimSpace(spec), ":")
	for _, i := range registry {
		if i.Name == name {
			return i, true
		}
	}
	return Info{}, false
}

// Parse builds the policy named by spec. Besides its own knobs, every
// policy takes priority=strict or priority=preempt: strict priority
// classes (Priority), each class scheduled by its own instance of the
// policy; preempt lets a higher class take a lower class's GPUs.
func Parse(spec string, ctx Context) (engine.Policy, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	kv := map[string]string{}
	if rest != "" {
		for _, item := range strings.Split(rest, ":") {
			k, v, ok := strings.Cut(item, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("policy %q: option %q: want key=value", spec, item)
			}
			kv[k] = v
		}
	}
	classes, hasClasses := kv["priority"]
	delete(kv, "priority")
	for _, i := range registry {
		if i.Name != name {
			continue
		}
		build := func() (engine.Policy, error) { return i.buildWith(ctx, name, kv) }
		if !hasClasses {
			return build()
		}
		switch classes {
		case "strict", "preempt":
			return NewPriority(build, classes == "preempt")
		case "off", "":
			return build()
		}
		return nil, fmt.Errorf("policy %s: priority=%q: want strict, preempt or off", name, classes)
	}
	var names []string
	for _, i := range All() {
		names = append(names, i.Name)
	}
	return nil, fmt.Errorf("unknown policy %q: want one of %s", name, strings.Join(names, ", "))
}

// buildWith builds the policy from its knobs, refusing unknown ones.
func (i Info) buildWith(ctx Context, name string, kv map[string]string) (engine.Policy, error) {
	opts := Options{policy: name, kv: kv, used: map[string]bool{}}
	p, err := i.build(ctx, opts)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for k := range opts.kv {
		if !opts.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		takes := "no knobs of its own"
		if keys := i.knobDefaults(); len(keys) > 0 {
			takes = strings.Join(keys, ", ")
		}
		return nil, fmt.Errorf("policy %s: unknown option(s) %s: it takes %s, and priority=off|strict|preempt as every policy does ('tide policies %s' explains them)",
			name, strings.Join(unknown, ", "), takes, i.Name)
	}
	return p, nil
}
