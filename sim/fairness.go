package sim

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/report"
)

// fairSample adds to smp the GPUs each tenant holds (when the trace has
// more than one tenant) and the fragmented GPUs: free GPUs that no waiting
// job fits (report.Fragmented), counted per site and GPU type since a job
// never spans sites.
func (s *simulator) fairSample(smp *report.Sample) {
	if s.multiTenant == 0 {
		s.multiTenant = 1
		for _, j := range s.jobs {
			if j.Tenant != s.jobs[0].Tenant {
				s.multiTenant = 2
				break
			}
		}
	}
	if s.multiTenant == 2 {
		smp.Tenants = map[string]int{}
		for _, r := range s.live {
			smp.Tenants[r.st.Job.Tenant] += r.gpus * halves(r)
		}
		for t, n := range smp.Tenants {
			smp.Tenants[t] = n / 2 // a shared GPU counts half for each tenant
		}
	}
	c := s.cfg.Cluster
	if smp.Queued == 0 || smp.Allocated >= c.TotalGPUs() {
		return
	}
	free := map[report.Pool]int{}
	for g := range c.TotalGPUs() {
		id := cluster.GPUID(g)
		if s.eng.Holder(id) == nil && !s.eng.IsDown(id) {
			n := c.NodeOf(id)
			free[report.Pool{Site: n.Site, Type: n.GPUType}]++
		}
	}
	var waiting []report.Demand
	for _, st := range s.eng.Active() {
		if len(st.GPUs) == 0 {
			waiting = append(waiting, report.Demand{Type: st.Job.GPUType, GPUs: st.Job.MinGPUs})
		}
	}
	smp.Fragmented = report.Fragmented(free, waiting)
}
