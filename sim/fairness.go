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
		s.indexTenants()
	}
	if s.multiTenant == 2 {
		smp.Tenants = int32(s.tenantSample())
	}
	c := s.cfg.Cluster
	if smp.Queued == 0 || int(smp.Allocated) >= c.TotalGPUs() {
		return
	}
	// A waiting job that takes one GPU of any type fits every free GPU:
	// nothing is fragmented, and no need to count the free GPUs.
	var waiting []report.Demand
	for _, st := range s.eng.Active() {
		if len(st.GPUs) == 0 {
			if st.Job.GPUType == "" && st.Job.MinGPUs == 1 {
				return
			}
			waiting = append(waiting, report.Demand{Type: st.Job.GPUType, GPUs: st.Job.MinGPUs})
		}
	}
	free := map[report.Pool]int{}
	for g := range c.TotalGPUs() {
		id := cluster.GPUID(g)
		if s.eng.Holder(id) == nil && !s.eng.IsDown(id) {
			n := c.NodeOf(id)
			free[report.Pool{Site: n.Site, Type: n.GPUType}]++
		}
	}
	smp.Fragmented = int32(report.Fragmented(free, waiting))
}

// indexTenants numbers the trace's tenants and finds whether it has several.
func (s *simulator) indexTenants() {
	s.multiTenant = 1
	s.tenantOf = make([]int32, len(s.jobs))
	idx := map[string]int32{}
	for i, j := range s.jobs {
		k, ok := idx[j.Tenant]
		if !ok {
			k = int32(len(s.tenantName))
			idx[j.Tenant] = k
			s.tenantName = append(s.tenantName, j.Tenant)
		}
		s.tenantOf[i] = k
	}
	if len(s.tenantName) > 1 {
		s.multiTenant = 2
	}
	s.tenantGPUs = make([]int, len(s.tenantName))
	s.tenantsChanged = true
}

// tenantHeld counts gpus more (or fewer) GPUs held by job idx's tenant.
func (s *simulator) tenantHeld(idx, gpus int) {
	if s.multiTenant == 0 {
		s.indexTenants()
	}
	s.tenantGPUs[s.tenantOf[idx]] += gpus
	s.tenantsChanged = true
}

// tenantSample logs the tenants whose GPUs changed since the last sample
// (report.Run.TenantLog) and returns the log's length: a shared GPU counts
// half for each of its tenants.
func (s *simulator) tenantSample() int {
	if s.out.TenantNames == nil {
		s.out.TenantNames = s.tenantName
		s.tenantLogged = make([]int, len(s.tenantName))
	}
	cur := s.tenantGPUs
	if s.nShared > 0 {
		cur = s.tenantHalves[:0]
		for range s.tenantName {
			cur = append(cur, 0)
		}
		for _, r := range s.live {
			cur[s.tenantOf[r.idx]] += r.gpus * halves(r)
		}
		for k := range cur {
			cur[k] /= 2
		}
		s.tenantHalves = cur
		s.tenantsChanged = true // the next sample without pairs compares afresh
	} else if !s.tenantsChanged {
		return len(s.out.TenantLog)
	} else {
		s.tenantsChanged = false
	}
	for k, n := range cur {
		if n != s.tenantLogged[k] {
			s.tenantLogged[k] = n
			s.out.TenantLog = append(s.out.TenantLog, report.TenantChange{Tenant: int32(k), GPUs: int32(n)})
		}
	}
	return len(s.out.TenantLog)
}
