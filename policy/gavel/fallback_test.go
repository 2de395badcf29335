package gavel

import (
	"errors"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/solver/solvertest"
)

// failingAlloc is a Gavel allocator whose solver always fails.
type failingAlloc struct{}

func (failingAlloc) allocate(*gavelProblem) ([][]float64, error) {
	return nil, errors.New("forced failure")
}

// TestFallbacksReported: every policy with a fallback, its solver forced to
// fail, still runs the trace, and the run's report counts the fallback with
// its reason (JSON summary and the text table); without the failure it
// counts none.
func TestFallbacksReported(t *testing.T) {
	solvertest.Require(t)
	fam.Fallbacks(t, []policytest.FallbackCase{
		{Spec: "gavel-las", Force: func(p engine.Policy) { p.(*Gavel).Alloc = failingAlloc{} }, Want: "allocation LP failed, equal shares used"},
		{Spec: "gavel-ftf", Force: func(p engine.Policy) { p.(*Gavel).Alloc = failingAlloc{} }, Want: "allocation LP failed, equal shares used"},
	})
}
