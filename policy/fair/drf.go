package fair

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// drfPolicies registers the policies this file defines; Policies calls it.
func drfPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "drf",
		Summary: "Dominant Resource Fairness (NSDI'11) across tenants over GPUs, CPU cores and host memory: " +
			"the tenant with the lowest weighted dominant share starts its next job that fits",
		Knobs: "preempt=false: recompute the allocation from zero every round, preempting what no longer fits " +
			"(running jobs first inside a tenant), instead of only handing out free resources; " +
			"weights=T@W/..: tenant weights (default 1; tenant \"\" is -)",
		Defaults: DRF{},
		Build:    contract.Typed(DRF{}, func(_ contract.Context, k DRF) (*DRF, error) { return &k, nil }),
	})
}

// DRF is Dominant Resource Fairness (Ghodsi et al., NSDI'11) with tenants
// as users and jobs as tasks. The resources are GPUs, CPU cores and host
// memory, with the cluster's totals as capacities; CPU or memory drops out
// when no node gives it (cluster.Node.CPUs, MemGiB = 0). A job's demand is
// its GPU count, job.CPUs and job.MemGiB, or the cluster's CPUs and memory
// per GPU times its GPU count where the job gives none.
//
// A tenant's dominant share is the largest, over resources, of its jobs'
// demand divided by capacity, divided by its weight. Progressive filling:
// while some tenant has a job that fits what is left, the tenant with the
// lowest dominant share (ties by name) starts its earliest such job.
// Without Preempt, running jobs keep what they hold and only what is free is
// filled; with Preempt, the filling starts from an empty cluster every
// round, each tenant offering its running jobs before its waiting ones.
//
// CPU and memory are counted cluster-wide: the placer places GPUs only.
type DRF struct {
	Preempt bool             `knob:"preempt"`
	Weights contract.Weights `knob:"weights"`

	// Scratch reused from round to round: the last plan's Run (the engine
	// is done with it by the next round), the reasons' memory, and this
	// round's shares, for appendTerms.
	run     []engine.Assignment
	explain explain.Scratch
	terms   func(b []byte, st *engine.Status) []byte
	capa    resources
	// The round's pool and tenants, kept so that a steady round allocates
	// nothing (issue 19): each tenant's resources in use and its queue of
	// candidates.
	pool    alloc.Pool
	tenants tenantGroups[drfTenant]
}

// drfTenant is a tenant's part of a round: what its jobs use and its
// candidates still queued.
type drfTenant struct {
	use   resources
	queue []*engine.Status
}

// appendTerms appends a waiting job's standing to b: "tenant "a" holds a
// dominant share of 0.25 (weight 1); the lowest share is served first",
// its tenant's share as this round left it.
func (d *DRF) appendTerms(b []byte, st *engine.Status) []byte {
	t := st.Job.Tenant
	b = append(b, "tenant "...)
	b = strconv.AppendQuote(b, t)
	b = append(b, " holds a dominant share of "...)
	var use resources // a tenant without jobs uses nothing
	if g := d.tenants.Of(t); g != nil {
		use = g.v.use
	}
	b = strconv.AppendFloat(b, dominant(use, d.capa), 'f', 2, 64)
	b = append(b, " (weight "...)
	b = strconv.AppendFloat(b, d.Weights.Of(t), 'g', -1, 64)
	return append(b, "); the lowest share is served first"...)
}

// Name implements engine.Policy.
func (d *DRF) Name() string {
	if d.Preempt {
		return "drf:preempt=true"
	}
	return "drf"
}

// ProgressFree implements engine.ProgressFree: DRF shares GPUs, CPU cores
// and memory by the jobs' demands, and reads no job's progress.
func (d *DRF) ProgressFree() bool { return true }

// resources are the dimensions DRF shares: GPUs, CPU cores, memory GiB.
type resources [3]float64

// capacity is the cluster's total of each resource.
func capacity(c *cluster.Cluster) resources {
	var r resources
	for _, n := range c.Nodes {
		r[0] += float64(n.GPUs)
		r[1] += float64(n.CPUs)
		r[2] += n.MemGiB
	}
	return r
}

// demand is what j takes of each resource on n GPUs.
func demand(j *job.Job, n int, capa resources) resources {
	r := resources{float64(n), j.CPUs, j.MemGiB}
	for i := 1; i < len(r); i++ {
		if r[i] == 0 && capa[0] > 0 {
			r[i] = capa[i] / capa[0] * float64(n)
		}
	}
	return r
}

// dominant is use's largest share of capa, over the resources capa has.
func dominant(use, capa resources) float64 {
	s := 0.0
	for i := range use {
		if capa[i] > 0 {
			s = math.Max(s, use[i]/capa[i])
		}
	}
	return s
}

// Schedule implements engine.Policy.
func (d *DRF) Schedule(s *engine.Snapshot) engine.Plan {
	capa := capacity(s.Cluster)
	free := &d.pool
	free.Reset(s)
	left := capa
	plan := engine.Plan{Run: d.run[:0]}
	tenants := d.tenants.Group(s.Jobs)
	for _, g := range tenants {
		clear(g.v.queue) // the last round's statuses
		g.v.use, g.v.queue = resources{}, g.v.queue[:0]
	}
	give := func(g *tenantGroup[drfTenant], st *engine.Status) bool {
		dem := demand(st.Job, st.Job.GPUs, capa)
		for i := 1; i < len(dem); i++ {
			if capa[i] > 0 && dem[i] > left[i]+1e-9 {
				return false
			}
		}
		a, ok := free.Take(st, st.Job.GPUs)
		if !ok {
			return false
		}
		plan.Run = append(plan.Run, a)
		for i := range dem {
			left[i] -= dem[i]
			g.v.use[i] += dem[i]
		}
		return true
	}
	// Each tenant's candidates: with Preempt its running jobs, then its
	// waiting ones, each in submission order; without, running jobs keep
	// their resources first and only waiting jobs queue.
	for _, g := range tenants {
		for _, st := range g.jobs {
			switch {
			case len(st.GPUs) == 0:
			case d.Preempt:
				g.v.queue = append(g.v.queue, st)
			default:
				give(g, st)
			}
		}
		for _, st := range g.jobs {
			if len(st.GPUs) == 0 {
				g.v.queue = append(g.v.queue, st)
			}
		}
	}
	for {
		var best *tenantGroup[drfTenant]
		bestShare := math.Inf(1)
		for _, g := range tenants {
			if len(g.v.queue) == 0 {
				continue
			}
			if sh := dominant(g.v.use, capa) / d.Weights.Of(g.name); best == nil || sh < bestShare ||
				(sh == bestShare && strings.Compare(g.name, best.name) < 0) {
				best, bestShare = g, sh
			}
		}
		if best == nil {
			if d.terms == nil { // made once: a closure made every round is allocated every round
				d.terms = d.appendTerms
			}
			d.capa = capa
			d.explain.PlanAppend(s, &plan, nil, d.terms)
			d.run = plan.Run
			return plan
		}
		// The tenant's earliest job that fits starts; jobs that fit
		// nothing now are dropped from this round's queue.
		q := best.v.queue
		started := false
		for i, st := range q {
			if give(best, st) {
				best.v.queue = slices.Delete(q, i, i+1)
				started = true
				break
			}
		}
		if !started {
			clear(q)
			best.v.queue = q[:0]
		}
	}
}
