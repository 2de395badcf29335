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
	"slices"
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

var registry []Info

func register(i Info) { registry = append(registry, i) }

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

// greedy runs jobs in the given order while their GPU counts fit, each on
// its requested count (Job.GPUs) and type. With strict, it stops at the first
// job that does not fit (no job overtakes it); otherwise smaller jobs behind
// it may start.
//
// A job that accepts any type is given a concrete one here, so that what the
// plan counts is what the placer can honour on a mixed cluster: the type it
// runs on now if it still fits there, else the type with the fewest GPUs
// left that still holds it (best fit, the first in the cluster's order on a
// tie), which keeps the larger pools for the jobs that need them. On a one-type cluster the
// assignment keeps the job's own (possibly empty) type.
func greedy(s *engine.Snapshot, order []*engine.Status, strict bool) engine.Plan {
	return greedyInto(s, order, strict, nil)
}

// greedyInto is greedy appending the plan's assignments to run[:0], so a
// policy may reuse the memory of its last plan (each assignment takes a GPU
// at least, so one allocation of the GPUs left suffices when run is short).
func greedyInto(s *engine.Snapshot, order []*engine.Status, strict bool, run []engine.Assignment) engine.Plan {
	free := newPool(s)
	plan := engine.Plan{Run: slices.Grow(run[:0], min(len(order), free.room()))}
	for _, st := range order {
		a, ok := free.take(st, st.Job.GPUs)
		if !ok {
			if strict {
				break
			}
			continue
		}
		plan.Run = append(plan.Run, a)
	}
	return plan
}

// pool counts the GPUs of each type a plan has left to give: those
// available to training (GPUs taken by inference or faults do not count).
// Types are held by their index in the cluster's GPUTypes, so a round's
// greedy pass does no map work.
type pool struct {
	types []string
	left  []int // GPUs left per type index
	// largest is the most GPUs of a type one job can hold: on a multi-site
	// cluster a job never spans sites, so a type counts only where one
	// site (or one edge server) can hold the job.
	largest []int
}

func newPool(s *engine.Snapshot) *pool {
	types := s.Cluster.GPUTypes()
	p := &pool{types: types, left: make([]int, 2*len(types))}
	p.left, p.largest = p.left[:len(types)], p.left[len(types):]
	multiSite := len(s.Cluster.Sites()) > 1
	for k, t := range types {
		p.left[k] = s.Available("", t)
		p.largest[k] = p.left[k]
		if multiSite {
			p.largest[k] = s.Largest(t)
		}
	}
	return p
}

// index is t's index in p.types, -1 when the cluster has no such type.
func (p *pool) index(t string) int {
	for k, u := range p.types {
		if u == t {
			return k
		}
	}
	return -1
}

// free returns the GPUs of type t left (0 for a type the cluster lacks).
func (p *pool) free(t string) int {
	if k := p.index(t); k >= 0 {
		return p.left[k]
	}
	return 0
}

// use takes n GPUs of type t (which the cluster has) from the pool.
func (p *pool) use(t string, n int) { p.left[p.index(t)] -= n }

// room is the GPUs left of every type.
func (p *pool) room() int {
	n := 0
	for _, l := range p.left {
		n += l
	}
	return n
}

// fit returns the type index greedy gives st for n GPUs (-1 when none has
// room): its own type; else the type it runs on now if that still has
// room; else the type with the fewest GPUs left that holds n (first in the
// cluster's order on a tie).
func (p *pool) fit(st *engine.Status, n int) int {
	k := -1
	if t := st.Job.GPUType; t != "" {
		k = p.index(t)
	} else if len(p.types) == 1 {
		if p.largest[0] >= n {
			k = 0
		}
	} else {
		if c := p.index(st.Alloc.GPUType); c >= 0 && p.left[c] >= n && p.largest[c] >= n {
			k = c
		} else {
			for c := range p.types {
				if p.left[c] >= n && p.largest[c] >= n && (k < 0 || p.left[c] < p.left[k]) {
					k = c
				}
			}
		}
	}
	if k < 0 || p.left[k] < n {
		return -1
	}
	return k
}

// take gives st n GPUs of the type fit picks, when one has room. On a
// one-type cluster the assignment keeps the job's own (possibly empty)
// type: there is nothing to choose, so the plan says what the job asked.
func (p *pool) take(st *engine.Status, n int) (engine.Assignment, bool) {
	k := p.fit(st, n)
	if k < 0 {
		return engine.Assignment{}, false
	}
	p.left[k] -= n
	t := p.types[k]
	if len(p.types) == 1 {
		t = st.Job.GPUType
	}
	return engine.Assignment{Job: st.Job.ID, GPUs: n, GPUType: t}, true
}

// sortJobs orders a copy of jobs by less, falling back to (submit, ID).
func sortJobs(jobs []*engine.Status, less func(a, b *engine.Status) int) []*engine.Status {
	out := append([]*engine.Status(nil), jobs...)
	sort.SliceStable(out, func(a, b int) bool {
		if c := less(out[a], out[b]); c != 0 {
			return c < 0
		}
		ja, jb := out[a].Job, out[b].Job
		if ja.Submit != jb.Submit {
			return ja.Submit < jb.Submit
		}
		return ja.ID < jb.ID
	})
	return out
}
