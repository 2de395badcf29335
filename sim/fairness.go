package sim

import (
	"fmt"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/report"
)

// fairSample adds to smp the GPUs each tenant holds (when the trace has
// more than one tenant) and the fragmented GPUs: free GPUs that no waiting
// job fits (report.Fragmented), counted per site and GPU type since a job
// never spans sites. Its cost follows the pools and the kinds of demand
// waiting, not the GPUs or the jobs: both are kept as jobs start, stop,
// wait and GPUs go down (frag).
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
	smp.Fragmented = int32(s.frag.fragmented())
	if checkFrag {
		if want := s.fragScan(); int(smp.Fragmented) != want {
			panic(fmt.Sprintf("sim: fragmented GPUs kept %d, counted %d", smp.Fragmented, want))
		}
	}
}

// checkFrag makes every sample count the fragmented GPUs afresh too
// (fragScan) and panic where the kept count differs (tests).
var checkFrag bool

// fragScan counts the fragmented GPUs from the engine's jobs and GPUs, a
// pass over each: the kept count's reference.
func (s *simulator) fragScan() int {
	// A waiting job that takes one GPU of any type fits every free GPU:
	// nothing is fragmented, and no need to count the free GPUs.
	var waiting []report.Demand
	for _, st := range s.eng.Active() {
		if len(st.GPUs) == 0 {
			if st.Job.GPUType == "" && st.Job.MinGPUs == 1 {
				return 0
			}
			waiting = append(waiting, report.Demand{Type: st.Job.GPUType, GPUs: st.Job.MinGPUs})
		}
	}
	c := s.cfg.Cluster
	free := map[report.Pool]int{}
	for g := range c.TotalGPUs() {
		id := cluster.GPUID(g)
		if s.eng.Holder(id) == nil && !s.eng.IsDown(id) {
			n := c.NodeOf(id)
			free[report.Pool{Site: n.Site, Type: n.GPUType}]++
		}
	}
	return report.Fragmented(free, waiting)
}

// frag keeps, from sample to sample, what the fragmented GPUs are counted
// from: the free GPUs of each pool (site and type) and the demands
// (type, least GPUs) of the waiting jobs, each counted.
type frag struct {
	pools  []report.Pool
	poolOf []int32 // GPU -> index in pools
	held   []int32 // GPU -> running jobs on it (two when packed, more when fractional)
	isDown []bool  // GPU -> down, as last told (down)
	free   []int   // pool -> GPUs with no job that are up
	// anyType counts the waiting jobs of any GPU type by their least
	// GPUs; typed counts the others per demand, and demands are the typed
	// demands with a count, in the order first seen.
	anyType []int32
	typed   map[report.Demand]int
	demands []report.Demand
	all     []report.Demand // scratch: the demands Fragmented is given
	scratch map[report.Pool]int
}

// init starts f on cluster c, every GPU up and free, no job waiting.
func (f *frag) init(c *cluster.Cluster) {
	n := c.TotalGPUs()
	f.poolOf, f.held, f.isDown = make([]int32, n), make([]int32, n), make([]bool, n)
	at := map[report.Pool]int32{}
	for g := range n {
		nd := c.NodeOf(cluster.GPUID(g))
		p := report.Pool{Site: nd.Site, Type: nd.GPUType}
		k, ok := at[p]
		if !ok {
			k = int32(len(f.pools))
			at[p] = k
			f.pools = append(f.pools, p)
			f.free = append(f.free, 0)
		}
		f.poolOf[g] = k
		f.free[k]++
	}
	f.typed = map[report.Demand]int{}
	f.scratch = make(map[report.Pool]int, len(f.pools))
}

// hold counts d more (or fewer) running jobs on each of gs.
func (f *frag) hold(gs []cluster.GPUID, d int32) {
	for _, g := range gs {
		was := f.held[g]
		f.held[g] += d
		if f.isDown[g] {
			continue
		}
		switch {
		case was == 0 && f.held[g] > 0:
			f.free[f.poolOf[g]]--
		case was > 0 && f.held[g] == 0:
			f.free[f.poolOf[g]]++
		}
	}
}

// down takes the engine's word on whether each of gs is down.
func (f *frag) down(e *engine.Engine, gs []cluster.GPUID) {
	for _, g := range gs {
		d := e.IsDown(g)
		if d == f.isDown[g] {
			continue
		}
		f.isDown[g] = d
		if f.held[g] == 0 {
			if d {
				f.free[f.poolOf[g]]--
			} else {
				f.free[f.poolOf[g]]++
			}
		}
	}
}

// wait counts job j as waiting (d = 1) or no longer (d = -1).
func (f *frag) wait(j *job.Job, d int) {
	if j.GPUType == "" {
		if j.MinGPUs >= len(f.anyType) {
			f.anyType = append(f.anyType, make([]int32, j.MinGPUs+1-len(f.anyType))...)
		}
		f.anyType[j.MinGPUs] += int32(d)
		return
	}
	k := report.Demand{Type: j.GPUType, GPUs: j.MinGPUs}
	n, ok := f.typed[k]
	if !ok {
		f.demands = append(f.demands, k)
	}
	f.typed[k] = n + d
}

// fragmented is report.Fragmented of the free GPUs and waiting demands
// kept. Fragmented reads only the least GPUs waiting per type and of any
// type, so those are all it is given.
func (f *frag) fragmented() int {
	least := 0 // the least GPUs a waiting job of any type needs, 0 for none
	for g, n := range f.anyType {
		if n > 0 {
			if g == 1 {
				return 0 // a job of one GPU of any type fits every free GPU
			}
			least = g
			break
		}
	}
	// The typed demands waiting; those no job has any more go.
	ds := f.demands[:0]
	for _, k := range f.demands {
		if f.typed[k] > 0 {
			ds = append(ds, k)
		} else {
			delete(f.typed, k)
		}
	}
	f.demands = ds
	all := append(f.all[:0], ds...)
	if least > 0 {
		all = append(all, report.Demand{GPUs: least})
	}
	f.all = all
	clear(f.scratch)
	for k, n := range f.free {
		if n > 0 {
			f.scratch[f.pools[k]] = n
		}
	}
	return report.Fragmented(f.scratch, all)
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
