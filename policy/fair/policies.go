// Package fair holds the policies that share GPUs fairly between jobs or
// tenants: DRF (dominant resource fairness), Themis (finish-time fairness
// auctions), Gandiva-fair (tickets and trades of fast GPUs) and AlloX
// (min-cost matching of jobs to GPU types).
package fair

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	drfPolicies(register)
	themisPolicies(register)
	gandivaFairPolicies(register)
	alloxPolicies(register)
}
