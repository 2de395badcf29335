package gavel

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestFIFOPerfKeptMatchesFull drives fifo-perf as is (planning the rounds
// between its re-plans from what changed) and made to plan every round in
// full through the same random loads: every round's changes and reasons
// must be the same (policytest.Lockstep).
func TestFIFOPerfKeptMatchesFull(t *testing.T) {
	for _, spec := range []string{"fifo-perf", "fifo-perf:round=120", "fifo-perf:reset=0:round=60"} {
		t.Run(spec, func(t *testing.T) {
			policytest.Lockstep(t, func(int) engine.Policy { return fam.Parse(t, spec, contract.Context{}) },
				func(p engine.Policy) int { return p.(*Gavel).KeptRounds() }, policytest.Load{Elastic: true, Faults: true})
		})
	}
}
