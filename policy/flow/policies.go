// Package flow holds the deadline planners built on ElasticFlow's flow
// of shares: ElasticFlow (admission control and minimum satisfactory
// shares), EdgeFlow (the same across a cloud and edge servers) and tidal,
// tide's own policy, which plans deadline jobs with EdgeFlow and lends
// jobs without deadlines the GPUs inference leaves (policy/internal/loan,
// DeepBoot's restart factor).
package flow

import "github.com/tide-sched/tide/policy/contract"

// Policies registers the policies of this family (package policy's
// registry lists it).
func Policies(register func(contract.Info)) {
	elasticFlowPolicies(register)
	edgeFlowPolicies(register)
	tidalPolicies(register)
}
