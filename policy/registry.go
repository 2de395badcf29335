package policy

import (
	"github.com/tide-sched/tide/policy/chronus"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/elastic"
	"github.com/tide-sched/tide/policy/fair"
	"github.com/tide-sched/tide/policy/flow"
	"github.com/tide-sched/tide/policy/gavel"
	"github.com/tide-sched/tide/policy/harvest"
)

// families is the one list of the policy families tide knows, one
// subpackage each: a policy exists when its family's Policies is listed
// here and registers it, and only then. Each passes its Info values to
// register; the order here
// is the order Lookup searches (names are unique, so it only matters to
// readers), and All sorts by name.
var families = []func(register func(Info)){
	chronus.Policies,
	classic.Policies,
	elastic.Policies,
	fair.Policies,
	flow.Policies,
	gavel.Policies,
	harvest.Policies,
}

// registry holds every registered policy, filled from families once
// (TestRegistryNamesUnique checks that no name is registered twice).
var registry = collect(families)

// collect registers each family's policies in the order given.
func collect(fams []func(register func(Info))) []Info {
	var out []Info
	for _, f := range fams {
		f(func(i Info) { out = append(out, i) })
	}
	return out
}
