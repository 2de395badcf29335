package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// dropUnfit checks that the cluster could ever run each job: enough GPUs
// of one type on one site (of the job's type, when it names one) for its
// smallest allocation (sim.Fits). When elastic, some policy asked for
// replays the jobs as elastic (from one GPU up), so only a job more than
// the cluster's GPUs of its type is unfit, as the simulator then checks
// each policy's jobs itself; a job asking for part of each GPU stays rigid
// (docs/sharing.md), and is checked as such. With
// skip (--skip-bad) a job that does not fit is left out with a warning,
// like a bad trace row; without, it is an error that says so.
func dropUnfit(jobs []*job.Job, c *cluster.Cluster, elastic, skip bool, warn func(string)) ([]*job.Job, error) {
	out := jobs[:0:0]
	for _, j := range jobs {
		err := sim.Fits(c, j)
		if elastic && !j.Fractional() && j.MinGPUs <= c.GPUsOfType(j.GPUType) {
			err = nil
		}
		if err == nil {
			out = append(out, j)
			continue
		}
		msg := err.Error()
		if !skip {
			return nil, fmt.Errorf("%s (give a larger --cluster, or --skip-bad to skip such jobs with a warning)", msg)
		}
		warn("skipping " + msg)
	}
	return out, nil
}

// anyElastic reports whether a policy of the --policy list (or all of
// them) replays jobs as elastic (policy.Info.Elastic). --policy all leaves
// the elastic policies out when partGPU, a trace with part-GPU jobs
// (allPolicies).
func anyElastic(specs string, partGPU bool) bool {
	for _, spec := range strings.Split(specs, ",") {
		spec = strings.TrimSpace(spec)
		if i, ok := policy.Lookup(spec); (spec == "all" && !partGPU) || (ok && i.Elastic) {
			return true
		}
	}
	return false
}

// allPolicies expands --policy all: every registered policy that can run
// this trace here. It says on stderr which it left out and why: those that
// schedule for deadlines when no job has one, the elastic ones when a job
// asks for part of each GPU (partJob, through the trace column partColumn;
// nil when none does: elastic policies refuse such a trace, assemble.Build),
// and those that need GLPK when noSolver says it is missing.
func allPolicies(hasDeadlines bool, partJob *job.Job, partColumn string, noSolver error, stderr io.Writer) []string {
	var specs, noDeadline, elastic, needSolver []string
	for _, i := range policy.All() {
		switch {
		case i.NeedsSolver && noSolver != nil:
			needSolver = append(needSolver, i.Name)
		case i.NeedsDeadlines && !hasDeadlines:
			noDeadline = append(noDeadline, i.Name)
		case i.Elastic && partJob != nil:
			elastic = append(elastic, i.Name)
		default:
			specs = append(specs, i.Name)
		}
	}
	if len(noDeadline) > 0 {
		fmt.Fprintf(stderr, "note: --policy all leaves out %s: they schedule for deadlines and no job in the trace has one\n", strings.Join(noDeadline, ", "))
	}
	if len(elastic) > 0 {
		fmt.Fprintf(stderr, "note: --policy all leaves out %s: they are elastic and run jobs on whole GPUs, and the trace has jobs that ask for part of each GPU (job %s: %s)\n",
			strings.Join(elastic, ", "), partJob.ID, partColumn)
	}
	if len(needSolver) > 0 {
		fmt.Fprintf(stderr, "note: --policy all leaves out %s: they solve LPs with GLPK, and %v\n", strings.Join(needSolver, ", "), noSolver)
	}
	return specs
}
