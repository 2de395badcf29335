package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy"
)

// dropUnfit checks that the cluster could ever run each job: enough GPUs
// (of the job's type, when it names one) for its smallest allocation. With
// skip (--skip-bad) a job that does not fit is left out with a warning,
// like a bad trace row; without, it is an error that says so.
func dropUnfit(jobs []*job.Job, c *cluster.Cluster, skip bool, warn func(string)) ([]*job.Job, error) {
	out := jobs[:0:0]
	for _, j := range jobs {
		need := j.MinGPUs
		if need == 0 {
			need = j.GPUs
		}
		have := c.GPUsOfType(j.GPUType)
		if need <= have {
			out = append(out, j)
			continue
		}
		what := "GPUs"
		if j.GPUType != "" {
			what = j.GPUType + " GPUs"
		}
		msg := fmt.Sprintf("job %s: needs at least %d %s, the cluster has %d", j.ID, need, what, have)
		if !skip {
			return nil, fmt.Errorf("%s (give a larger --cluster, or --skip-bad to skip such jobs with a warning)", msg)
		}
		warn("skipping " + msg)
	}
	return out, nil
}

// allPolicies expands --policy all: every registered policy that can run
// this trace here. It says on stderr which it left out and why: those that
// schedule for deadlines when no job has one, and those that need GLPK
// when noSolver says it is missing.
func allPolicies(hasDeadlines bool, noSolver error, stderr io.Writer) []string {
	var specs, noDeadline, needSolver []string
	for _, i := range policy.All() {
		switch {
		case i.NeedsSolver && noSolver != nil:
			needSolver = append(needSolver, i.Name)
		case i.NeedsDeadlines && !hasDeadlines:
			noDeadline = append(noDeadline, i.Name)
		default:
			specs = append(specs, i.Name)
		}
	}
	if len(noDeadline) > 0 {
		fmt.Fprintf(stderr, "note: --policy all leaves out %s: they schedule for deadlines and no job in the trace has one\n", strings.Join(noDeadline, ", "))
	}
	if len(needSolver) > 0 {
		fmt.Fprintf(stderr, "note: --policy all leaves out %s: they solve LPs with GLPK, and %v\n", strings.Join(needSolver, ", "), noSolver)
	}
	return specs
}
