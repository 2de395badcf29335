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
