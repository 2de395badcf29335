package fair

import (
	"testing"

	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestThemisKeptMatchesFull drives Themis as is (planning the rounds in
// which every job is rigid and fits, with at most one waiting, from what
// changed) and made to plan every round in full through the same random
// loads, elastic jobs among them: every round's changes and reasons must
// be the same (policytest.Lockstep).
func TestThemisKeptMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, policytest.Load{Elastic: true, Faults: true}, "themis", "themis:lease=60", "themis:f=0")
}

// TestThemisLazyQueueMatchesFull: the same with bursts of up to 40 jobs,
// whose congested rounds Themis plans in full leaving the waiting jobs'
// reasons to be worked out when read (explain.Queue, Plan.Explain): read
// through the engine each round and as each job starts or ends, they
// must be those it writes for every job when wrapped (every reason
// written).
func TestThemisLazyQueueMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, policytest.Load{Seeds: 3, Burst: 40, Faults: true}, "themis", "themis:lease=60")
}

// TestThemisOnDemandMatchesPlain: Themis reads the active jobs on demand
// (engine.JobsOnDemand): its rounds, through the loads above (elastic
// jobs, faults, bursts of up to 40), must be the same job for job, reasons
// included, as the same policy's reading Snapshot.Jobs every round
// (policytest.OnDemandMatches).
func TestThemisOnDemandMatchesPlain(t *testing.T) {
	specs := []string{"themis", "themis:lease=60", "themis:f=0"}
	fam.OnDemandMatchesPlain(t, policytest.Load{Elastic: true, Faults: true}, specs...)
	t.Run("long-queues", func(t *testing.T) {
		fam.OnDemandMatchesPlain(t, policytest.Load{Seeds: 3, Burst: 40, Faults: true}, specs...)
	})
}
