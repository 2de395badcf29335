// Package gavel holds Gavel (OSDI'20), heterogeneity-aware policies as
// LPs over effective throughput (least attained service, finish-time
// fairness, makespan, throughput, FIFO), with space sharing of measured
// pairs, and its FIFO baselines (gavel-fifo, fifo-perf).
package gavel

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	gavelLPPolicies(register)
	fifoPerfPolicies(register)
}
