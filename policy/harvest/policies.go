// Package harvest holds the policies that lend training jobs the GPUs
// inference leaves idle: DeepBoot (speedup knapsacks, protect timers) and
// Aryl (base workers, then extra workers on loaned GPUs). What they share
// with tidal is in policy/internal/loan.
package harvest

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	deepBootPolicies(register)
	arylPolicies(register)
}
