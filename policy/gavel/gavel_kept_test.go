package gavel

import (
	"testing"

	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestFIFOPerfKeptMatchesFull drives fifo-perf as is (planning the rounds
// between its re-plans from what changed) and made to plan every round in
// full through the same random loads: every round's changes and reasons
// must be the same (policytest.Lockstep).
func TestFIFOPerfKeptMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, policytest.Load{Elastic: true, Faults: true}, "fifo-perf", "fifo-perf:round=120", "fifo-perf:reset=0:round=60")
}
