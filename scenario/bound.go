package scenario

import (
	"fmt"
	"slices"

	"github.com/tide-sched/tide/bound"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/solver"
)

// PointBound is the deadline bound at one point of a scenario.
type PointBound struct {
	Param string  `json:"param,omitempty"`
	Value float64 `json:"value,omitempty"`
	bound.Result
}

// Bounds computes, at each point of the scenario (its sweep, as
// SetSweepValues left it), the most deadlines any schedule could meet on
// its jobs, model, sites and realised capacity (bound.Deadlines). Each site
// is one pool: a job there runs at its fastest over the site's GPU types,
// placed on any of its nodes with at most its largest node's GPUs on each,
// and fits the roomiest GPU's memory (all only raise the bound); an edge
// site's job holds at most one server's GPUs. Capacity counts a server that is both failed and taken
// once (the simulator's rule), so the pools never have less than the runs
// had. done, when set, is called after each point.
func (sc *Scenario) Bounds(done func()) ([]PointBound, error) {
	_, pts, err := sc.readPoints()
	if err != nil {
		return nil, err
	}
	var out []PointBound
	for _, p := range pts {
		pools, err := sc.pools(p)
		if err != nil {
			return nil, err
		}
		r, err := bound.Deadlines(p.jobs, p.model, pools, solver.Options{})
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %s %v: %w", sc.File, p.param, p.value, err)
		}
		out = append(out, PointBound{Param: p.param, Value: p.value, Result: r})
		if done != nil {
			done()
		}
	}
	return out, nil
}

// pools are point p's sites as bound's pools, with their capacity over the
// runs (futureDays; after it a site holds its last value).
func (sc *Scenario) pools(p *point) ([]bound.Pool, error) {
	ss, err := sc.capacitiesBy(p, futureDays*86400, func(taken, failed float64) float64 { return max(taken, failed) })
	if err != nil {
		return nil, err
	}
	series := map[string]forecast.Series{}
	for _, s := range ss {
		series[s.Site] = s.Series
	}
	var out []bound.Pool
	for _, site := range p.c.Sites() {
		pool := bound.Pool{Name: site.Name, GPUs: site.GPUs, Capacity: series[site.Name]}
		for _, id := range site.Nodes {
			n := &p.c.Nodes[id]
			if n.GPUs > 0 {
				pool.Nodes++
			}
			pool.PerNode = max(pool.PerNode, n.GPUs)
			if site.Kind == cluster.SiteEdge {
				pool.MaxJob = max(pool.MaxJob, n.GPUs)
			}
			if n.GPUMem > 0 && (pool.MemGiB == 0 || n.GPUMem > pool.MemGiB) {
				pool.MemGiB = n.GPUMem // the roomiest: only raises the bound
			}
			if !slices.Contains(pool.GPUTypes, n.GPUType) {
				pool.GPUTypes = append(pool.GPUTypes, n.GPUType)
			}
		}
		if pool.GPUs > 0 {
			out = append(out, pool)
		}
	}
	return out, nil
}
