package classic

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// load is the random load the policies of this package are driven
// through: elastic jobs, nodes that go down and come back, adopted jobs.
var load = policytest.Load{Elastic: true, Faults: true}

// TestFIFOKeptMatchesFull: FIFO (with and without backfill) plans the
// rounds in which every job fits from what changed, and every round's
// changes, reasons and predicted starts are those of the full pass
// (policytest.Lockstep).
func TestFIFOKeptMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, load, "fifo", "fifo:backfill=true")
}

// TestFIFOLongQueueMatchesFull: the same with bursts of up to 40 jobs at
// once, so that more jobs wait than explain.PredictAhead past those a
// round starts and FIFO leaves their reasons to be worked out when read
// (Plan.Explain, fifo_reasons.go): read through the engine each round, and
// as each job starts (Status.WaitReason), they must be the full pass's.
func TestFIFOLongQueueMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, policytest.Load{Burst: 40, Faults: true}, "fifo")
}

// TestSRTFKeptMatchesFull: the same for SRTF, whose waiting jobs start by
// remaining time.
func TestSRTFKeptMatchesFull(t *testing.T) { fam.KeptMatchesFull(t, load, "srtf") }

// TestEDFKeptMatchesFull: the same for EDF, whose waiting jobs start by
// deadline.
func TestEDFKeptMatchesFull(t *testing.T) { fam.KeptMatchesFull(t, load, "edf") }

// TestGandivaKeptMatchesFull: the same for Gandiva (with and without
// migration, short quanta so that jobs take turns), whose waiting jobs
// start longest suspended first.
func TestGandivaKeptMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, load, "gandiva", "gandiva:migrate=false", "gandiva:quantum=20")
}

// TestLazyQueueMatchesFull: with bursts of up to 40 jobs, SRTF, EDF,
// Gandiva and FIFO with backfill leave long queues whose reasons they
// work out when read from a copy of the round's order (explain.Queue,
// Plan.Explain), in rounds planned in full and, for Gandiva and FIFO, in
// rounds planned from what changed: read through the engine each round,
// and as each job starts or ends (Status.WaitReason), they must be those
// the policy writes for every job when it plans every round in full.
func TestLazyQueueMatchesFull(t *testing.T) {
	fam.KeptMatchesFull(t, policytest.Load{Seeds: 3, Burst: 40, Faults: true}, "fifo:backfill=true", "srtf", "edf", "gandiva", "gandiva:quantum=600")
}

// TestOnDemandMatchesPlain: FIFO (with and without backfill), SRTF, EDF
// and Gandiva read the active jobs on demand (engine.JobsOnDemand): their
// rounds, driven through the loads above (long queues too), must be the
// same job for job, reasons included, as the same policy's reading
// Snapshot.Jobs every round (policytest.OnDemandMatches).
func TestOnDemandMatchesPlain(t *testing.T) {
	specs := []string{"fifo", "fifo:backfill=true", "srtf", "edf", "gandiva", "gandiva:migrate=false", "gandiva:quantum=20"}
	fam.OnDemandMatchesPlain(t, load, specs...)
	t.Run("long-queues", func(t *testing.T) {
		fam.OnDemandMatchesPlain(t, policytest.Load{Seeds: 3, Burst: 40, Faults: true}, specs...)
	})
}

// TestCongestedKeepStopsMatchesFull: SRTF's and EDF's rounds in which
// some job does not fit, and Gandiva's that preempt and migrate no job, go
// to the engine as "keep the running jobs, stop
// these, start those" (Plan.Keep, Plan.Stop; keep_stops.go): driven
// through the loads above against the same policies planning every round
// in full, every round's changes, GPUs and reasons must be the same, and
// such rounds must have been run.
func TestCongestedKeepStopsMatchesFull(t *testing.T) {
	for _, spec := range []string{"srtf", "edf", "gandiva", "gandiva:migrate=false", "gandiva:quantum=20"} {
		t.Run(spec, func(t *testing.T) {
			var built []engine.Policy
			for _, l := range []policytest.Load{load, {Seeds: 3, Burst: 40, Faults: true}} {
				policytest.Lockstep(t, func(int) engine.Policy {
					p := fam.Parse(t, spec, contract.Context{})
					built = append(built, p)
					return p
				}, func(p engine.Policy) int { return p.(interface{ KeptRounds() int }).KeptRounds() }, l)
			}
			n := 0
			for _, p := range built {
				switch p := p.(type) {
				case *SRTF:
					n += p.stops.n
				case *EDF:
					n += p.stops.n
				case *Gandiva:
					n += p.stops.n
				}
			}
			t.Logf("%d rounds planned as Keep and Stop", n)
			if n == 0 {
				t.Fatal("no round was planned as Keep and Stop: the loads do not exercise it")
			}
		})
	}
}
