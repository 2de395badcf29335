// Package chronus holds Chronus (SoCC'21), the deadline-aware lease
// scheduler: SLO jobs admitted only if every admitted job still packs
// before its deadline, each lease solved as a MILP with GLPK.
package chronus

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	chronusPolicies(register)
}
