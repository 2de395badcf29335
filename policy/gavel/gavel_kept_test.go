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

// TestFIFOPerfOnDemandMatchesPlain: fifo-perf reads the active jobs on
// demand (engine.JobsOnDemand): driven through random loads against the
// same policy made to read Snapshot.Jobs every round, every round's
// changes and reasons must be the same (policytest.OnDemandMatches).
func TestFIFOPerfOnDemandMatchesPlain(t *testing.T) {
	fam.OnDemandMatchesPlain(t, policytest.Load{Elastic: true, Faults: true}, "fifo-perf", "fifo-perf:round=120", "fifo-perf:reset=0:round=60")
	t.Run("long-queues", func(t *testing.T) {
		fam.OnDemandMatchesPlain(t, policytest.Load{Seeds: 3, Burst: 40, Faults: true}, "fifo-perf", "fifo-perf:round=120")
	})
}
