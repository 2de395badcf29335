package classic

import (
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// keptRounds is what the policies of this file report of their rounds
// planned from what changed.
type keptRounds interface{ KeptRounds() int }

// lockstep runs spec as is and in full through policytest.Lockstep.
func lockstep(t *testing.T, spec string, load policytest.Load) {
	t.Helper()
	policytest.Lockstep(t, func(int) engine.Policy { return fam.Parse(t, spec, contract.Context{}) },
		func(p engine.Policy) int { return p.(keptRounds).KeptRounds() }, load)
}

// TestFIFOKeptMatchesFull: FIFO (with and without backfill) plans the
// rounds in which every job fits from what changed, and every round's
// changes, reasons and predicted starts are those of the full pass.
func TestFIFOKeptMatchesFull(t *testing.T) {
	for _, spec := range []string{"fifo", "fifo:backfill=true"} {
		t.Run(spec, func(t *testing.T) { lockstep(t, spec, policytest.Load{Elastic: true, Faults: true}) })
	}
}

// TestSRTFKeptMatchesFull: the same for SRTF, whose waiting jobs start by
// remaining time.
func TestSRTFKeptMatchesFull(t *testing.T) {
	lockstep(t, "srtf", policytest.Load{Elastic: true, Faults: true})
}

// TestEDFKeptMatchesFull: the same for EDF, whose waiting jobs start by
// deadline.
func TestEDFKeptMatchesFull(t *testing.T) {
	lockstep(t, "edf", policytest.Load{Elastic: true, Faults: true})
}

// TestGandivaKeptMatchesFull: the same for Gandiva (with and without
// migration, short quanta so that jobs take turns), whose waiting jobs
// start longest suspended first.
func TestGandivaKeptMatchesFull(t *testing.T) {
	for _, spec := range []string{"gandiva", "gandiva:migrate=false", "gandiva:quantum=20"} {
		t.Run(spec, func(t *testing.T) { lockstep(t, spec, policytest.Load{Elastic: true, Faults: true}) })
	}
}
