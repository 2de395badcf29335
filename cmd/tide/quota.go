package main

import (
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy"
)

// quotaFlags are --quota and --borrow, shared by sim and bench: the same
// tenant quotas `tide kube --quota` applies (policy.Quota), so a quota
// setting tried on a trace is the one that runs on Kubernetes.
type quotaFlags struct {
	spec   string
	borrow bool
	limits map[string]int // parsed spec; nil without --quota
}

func (q *quotaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&q.spec, "quota", "", "GPUs guaranteed per tenant (the trace's tenant column): `TENANT=GPUS,...`; every policy is wrapped in the quota policy tide kube uses (docs/kubernetes.md) (default: no quotas)")
	fs.BoolVar(&q.borrow, "borrow", true, "with --quota: jobs may borrow GPUs idle beyond their tenant's quota, taken back by preemption when the owner needs them")
}

// parse reads --quota once the flags are parsed.
func (q *quotaFlags) parse() error {
	if q.spec == "" {
		return nil
	}
	l, err := policy.ParseQuotas(q.spec)
	if err != nil {
		return usageError{fmt.Errorf("--quota: %w", err)}
	}
	if len(l) == 0 {
		return usageError{fmt.Errorf("--quota %q: no TENANT=GPUS given", q.spec)}
	}
	q.limits = l
	return nil
}

// parsePolicy makes the policy spec names, wrapped in the quotas if any.
func (c *common) parsePolicy(spec string, jobs []*job.Job, s *setup) (engine.Policy, error) {
	p, err := policy.Parse(spec, policy.Context{Jobs: jobs, Service: serviceEstimate(s)})
	if err != nil || c.quota.limits == nil {
		return p, err
	}
	return &policy.Quota{Inner: p, Limits: c.quota.limits, Borrow: c.quota.borrow}, nil
}

// check warns about quotas for tenants the trace does not have (a typo
// would otherwise leave every job borrowing).
func (q *quotaFlags) check(jobs []*job.Job, stderr io.Writer) {
	if q.limits == nil {
		return
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Tenant] = true
	}
	names := make([]string, 0, len(q.limits))
	for t := range q.limits {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		if !seen[t] {
			fmt.Fprintf(stderr, "warning: --quota: tenant %q has no jobs in the trace\n", t)
		}
	}
}
