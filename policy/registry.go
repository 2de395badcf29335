package policy

import (
	"github.com/tide-sched/tide/policy/chronus"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/gavel"
)

// families is the one list of the policy families tide knows: a policy
// exists when the function that registers it is listed here, and only
// then. Each function passes its Info values to register; the order here
// is the order Lookup searches (names are unique, so it only matters to
// readers), and All sorts by name.
var families = []func(register func(Info)){
	afsPolicies,
	alloxPolicies,
	arylPolicies,
	classic.Policies,
	chronus.Policies,
	deepBootPolicies,
	drfPolicies,
	edgeFlowPolicies,
	elasticFlowPolicies,
	gandivaFairPolicies,
	gavel.Policies,
	optimusPolicies,
	polluxPolicies,
	themisPolicies,
	tidalPolicies,
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
