// Package policy is tide's registry of scheduling policies and its
// wrappers (Quota, Priority). The policies themselves live in families,
// one subpackage each (classic, gavel, chronus, ...), and meet the
// contract of package contract; docs/policy-contract.md tells how to add
// one.
//
// Policies are named by a spec string, "name" or "name:key=value:key=value"
// (for example "tiresias:preset=pollux" or "tiresias:limits=3600/7200:knob=2"),
// so several can be compared on one command line.
package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
)

// Context is what a policy may learn before the run (contract.Context).
type Context = contract.Context

// Info describes one registered policy (contract.Info).
type Info = contract.Info

// All lists the registered policies in a stable order.
func All() []Info {
	out := append([]Info(nil), registry...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Specs lists every registered policy by name, each followed by its
// presets (Info.Presets): what a suite that must cover every policy runs.
func Specs() []string {
	var out []string
	for _, i := range All() {
		out = append(out, i.Name)
		out = append(out, i.Presets...)
	}
	return out
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
	name, kv, err := contract.Split(spec)
	if err != nil {
		return nil, err
	}
	classes, hasClasses := kv["priority"]
	delete(kv, "priority")
	i, ok := Lookup(name)
	if !ok {
		var names []string
		for _, i := range All() {
			names = append(names, i.Name)
		}
		return nil, fmt.Errorf("unknown policy %q: want one of %s", name, strings.Join(names, ", "))
	}
	build := func() (engine.Policy, error) { return i.New(ctx, kv) }
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
