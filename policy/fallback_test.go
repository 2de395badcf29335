package policy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver/solvertest"
)

// failingAlloc is a Gavel allocator whose solver always fails.
type failingAlloc struct{}

func (failingAlloc) allocate(*gavelProblem) ([][]float64, error) {
	return nil, errors.New("forced failure")
}

func failingMILP([]leaseJob, []int, leaseNowWeight, float64) (*leasePlan, error) {
	return nil, errors.New("forced failure")
}

// TestFallbacksReported: every policy with a fallback, its solver forced to
// fail, still runs the trace, and the run's report counts the fallback with
// its reason (JSON summary and the text table); without the failure it
// counts none.
func TestFallbacksReported(t *testing.T) {
	solvertest.Require(t)
	var jobs []*job.Job
	for i := 0; i < 12; i++ {
		at := float64(i * 40)
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).GPUs(1+i%3).Seconds(300+float64(i%4)*200).Deadline(at+2000).Obj())
	}
	c := enginetest.Cluster("1x4:t4")
	cases := []struct {
		spec  string
		force func(engine.Policy)
		want  string
	}{
		{"gavel-las", func(p engine.Policy) { p.(*Gavel).Alloc = failingAlloc{} }, "allocation LP failed, equal shares used"},
		{"gavel-ftf", func(p engine.Policy) { p.(*Gavel).Alloc = failingAlloc{} }, "allocation LP failed, equal shares used"},
		{"chronus", func(p engine.Policy) { p.(*Chronus).milp = failingMILP }, "lease MILP failed, admitted jobs packed greedily"},
	}
	for _, tc := range cases {
		for _, force := range []bool{false, true} {
			p := specs.Parse(t, tc.spec, Context{})
			if force {
				tc.force(p)
			}
			r, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}}, jobs)
			if err != nil {
				t.Fatalf("%s force=%v: %v", tc.spec, force, err)
			}
			sum := report.Summarize(r)
			var table bytes.Buffer
			if err := report.WriteTable(&table, []report.Summary{sum}); err != nil {
				t.Fatal(err)
			}
			if !force {
				if sum.Fallbacks != 0 || strings.Contains(table.String(), "fallback") {
					t.Errorf("%s without a forced failure reports %d fallbacks: %+v", tc.spec, sum.Fallbacks, sum.Warnings)
				}
				continue
			}
			if sum.Fallbacks == 0 || len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0].Reason, tc.want) ||
				!strings.Contains(sum.Warnings[0].Reason, "forced failure") || sum.Warnings[0].Kind != engine.WarnFallback {
				t.Errorf("%s forced: fallbacks %d, warnings %+v; want one fallback saying %q", tc.spec, sum.Fallbacks, sum.Warnings, tc.want)
			}
			if !strings.Contains(table.String(), "policy fallbacks (rounds)") || !strings.Contains(table.String(), tc.want) {
				t.Errorf("%s forced: the table does not show the fallback:\n%s", tc.spec, table.String())
			}
		}
	}
}
