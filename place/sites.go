package place

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// inSite places a on a multi-site cluster: within a.Site when set, else in
// the first site (cluster order) that has enough free GPUs of the type the
// job asks for (or of its most plentiful free type there). On an edge site a
// job takes one server: the best-fitting one. Other sites' nodes are hidden
// from pick while it runs, so no placer spreads a job across sites. It
// returns nil when no site can hold the job now.
func (f *freeMap) inSite(a engine.Assignment, pick func(f *freeMap, t string, k int) []cluster.GPUID) []cluster.GPUID {
	c := f.c
	for _, site := range c.Sites() {
		if a.Site != "" && site.Name != a.Site {
			continue
		}
		count := map[string]int{}
		for _, id := range site.Nodes {
			count[c.Nodes[id].GPUType] += len(f.free[id])
		}
		t := a.GPUType
		if t == "" {
			for _, typ := range c.GPUTypes() {
				if t == "" || count[typ] > count[t] {
					t = typ
				}
			}
		}
		if count[t] < a.GPUs {
			continue
		}
		if site.Kind == cluster.SiteEdge {
			best := -1
			for _, id := range site.Nodes {
				if n := len(f.free[id]); c.Nodes[id].GPUType == t && n >= a.GPUs && (best < 0 || n < len(f.free[best])) {
					best = id
				}
			}
			if best < 0 {
				continue
			}
			return f.take(best, a.GPUs)
		}
		// Hide the other sites' free GPUs from pick, then restore them.
		saved := make(map[int][]cluster.GPUID)
		for i := range c.Nodes {
			if c.Nodes[i].Site != site.Name && len(f.free[i]) > 0 {
				saved[i] = f.free[i]
				f.setFree(i, nil)
			}
		}
		gs := pick(f, t, a.GPUs)
		for i, fr := range saved {
			f.setFree(i, fr)
		}
		return gs
	}
	return nil
}
