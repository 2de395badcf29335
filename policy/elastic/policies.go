// Package elastic holds the policies that choose each job's GPU count
// from the goodput its job agent reports: Pollux (goodput-driven
// allocation, with batch sizes adapted), Optimus (marginal gain of a GPU)
// and AFS (apathetic future share).
package elastic

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	polluxPolicies(register)
	optimusPolicies(register)
	afsPolicies(register)
}
