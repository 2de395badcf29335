// Package classic holds the classic schedulers: FIFO (with backfill),
// SRTF, EDF, Tiresias (discretized LAS and Gittins index) and Gandiva
// (time-slicing, migration to faster GPUs, packing).
package classic

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	basicPolicies(register)
	tiresiasPolicies(register)
	gandivaPolicies(register)
}
