package alloc

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Sites. A job never spans sites, and on an edge site it uses one server
// (engine.Assignment). A pool that counted a type's GPUs over every site
// planned jobs that each fit a site but not together, and then nothing
// behind them: with jobs of 3 GPUs running on two sites of 4, it counted
// the 1 + 1 GPUs left as 2, planned a waiting job of 2 that no site could
// hold, and a job of 1 behind it waited beside the two idle GPUs until a
// job of 3 ended (hours), told "needs 1 GPUs, 0 free".
//
// So on a cluster of several sites (or one edge site) the pool also keeps
// what the placer will see, per bin: a site's GPUs of one type, or one
// edge server. It plans each job into one bin as the placer will place it
// (place.freeMap.inSite), and names that bin's site in the assignment, so
// that plan and placement agree:
//   - a running job that keeps its GPUs stays in its bin, if the jobs ahead
//     of it in the plan left it room there; else it is not planned (the
//     jobs ahead took its GPUs, as they may on one site);
//   - any other job goes to the first site, in the cluster's order, whose
//     bin of its type has room (on an edge site the best-fitting server),
//     counting first only GPUs free now, then also those of running jobs
//     the pass has not reached (which it may yet leave out: the job ahead
//     of them preempts them, as the one-site pool lets it).
//
// On an edge site the assignment also names the server (Nodes): the placer
// picks the best-fitting server among those free after the whole plan,
// which the pass cannot know when it plans a job (a running job it has not
// reached may yet be left out), and a server it chose apart from the pool
// left the next job unplaced.

// bin is one set of GPUs a job may take together.
type bin struct {
	site int // index in Cluster.Sites()
	typ  int // index in Pool.types
	node int // the server's node ID on an edge site, else -1
	// up is the GPUs up; pend those held by running jobs the pass has not
	// yet decided on; used those the pass gave (kept and new).
	up, pend, used int
}

// sites is the pool's per-bin state on a cluster of several sites.
type sites struct {
	bins    []bin
	nodeBin []int // node ID -> bin index
	decided map[*engine.Status]bool
}

// initSites fills p.sites for s when a job's room is not its type's GPUs
// in all (several sites, or one edge site), and leaves it empty otherwise.
func (p *Pool) initSites(s *engine.Snapshot) {
	c := s.Cluster
	ss := &p.sites
	ss.bins = ss.bins[:0]
	clear(ss.decided)
	all := c.Sites()
	if len(all) == 0 || (len(all) == 1 && all[0].Kind != cluster.SiteEdge) {
		return
	}
	if cap(ss.nodeBin) < len(c.Nodes) {
		ss.nodeBin = make([]int, len(c.Nodes))
	}
	ss.nodeBin = ss.nodeBin[:len(c.Nodes)]
	for si, site := range all {
		first := len(ss.bins)
		for _, id := range site.Nodes {
			n := &c.Nodes[id]
			k, b := p.Index(n.GPUType), -1
			if site.Kind != cluster.SiteEdge {
				for i := first; i < len(ss.bins); i++ {
					if ss.bins[i].typ == k {
						b = i
						break
					}
				}
			}
			if b < 0 {
				ss.bins = append(ss.bins, bin{site: si, typ: k, node: -1})
				if site.Kind == cluster.SiteEdge {
					ss.bins[len(ss.bins)-1].node = id
				}
				b = len(ss.bins) - 1
			}
			ss.bins[b].up += s.UpGPUs(n)
			ss.nodeBin[id] = b
		}
	}
	for _, st := range s.ActiveJobs() {
		if b := p.binOf(st); b >= 0 {
			if st.PackedWith != "" {
				// A pair holds its GPUs once; the pass plans pairs by
				// type alone, so their GPUs stay out of every bin.
				if st.Job.ID < st.PackedWith {
					ss.bins[b].up -= len(st.GPUs)
				}
				continue
			}
			ss.bins[b].pend += len(st.GPUs)
		}
	}
	for k := range p.largest {
		p.largest[k] = p.binRoom(k)
	}
}

// binOf is the bin of the whole GPUs st holds, -1 when it holds none (or
// parts of GPUs, which the pool counts apart) or the pool keeps no bins.
func (p *Pool) binOf(st *engine.Status) int {
	if len(p.sites.bins) == 0 || len(st.GPUs) == 0 || st.Job.Fractional() {
		return -1
	}
	return p.sites.nodeBin[p.snap.Cluster.NodeOf(st.GPUs[0]).ID]
}

// binRoom is the most GPUs of type index k one job could take in one bin,
// counting GPUs of running jobs the pass has not reached as room.
func (p *Pool) binRoom(k int) int {
	best := 0
	for i := range p.sites.bins {
		if b := &p.sites.bins[i]; b.typ == k {
			best = max(best, b.up-b.used)
		}
	}
	return best
}

// takeBin plans st's n GPUs of type index k into a bin (see Sites),
// returning that bin, or -1 when no bin has room for it. A job packed with
// another is planned by type alone (initSites): bin len(bins).
func (p *Pool) takeBin(st *engine.Status, k, n int) int {
	ss := &p.sites
	if st.PackedWith != "" {
		return len(ss.bins)
	}
	if ss.decided == nil {
		ss.decided = map[*engine.Status]bool{}
	}
	held := p.binOf(st)
	if held >= 0 && !ss.decided[st] {
		ss.decided[st] = true
		b := &ss.bins[held]
		b.pend -= len(st.GPUs)
		if n == len(st.GPUs) && b.typ == k {
			if b.up-b.used < n {
				return -1
			}
			b.used += n
			p.largest[k] = p.binRoom(k)
			return held
		}
	}
	i := p.firstFit(k, n, true)
	if i < 0 {
		i = p.firstFit(k, n, false)
	}
	if i >= 0 {
		ss.bins[i].used += n
		p.largest[k] = p.binRoom(k)
	}
	return i
}

// place names bin i in a (Site, and Nodes on an edge server).
func (p *Pool) place(a *engine.Assignment, i int) {
	if i >= len(p.sites.bins) {
		return
	}
	b := &p.sites.bins[i]
	a.Site = p.snap.Cluster.Sites()[b.site].Name
	if b.node >= 0 {
		a.Nodes = []engine.NodeGPUs{{Node: b.node, GPUs: a.GPUs}}
	}
}

// firstFit is the bin the placer would put a new job of n GPUs of type
// index k in (place.freeMap.inSite): the first site in the cluster's order
// with room, on an edge site its best-fitting server; -1 when none has
// room. With freeNow, GPUs of running jobs the pass has not reached are not
// room.
func (p *Pool) firstFit(k, n int, freeNow bool) int {
	bins := p.sites.bins
	for i := 0; i < len(bins); {
		site, best, bestRoom := bins[i].site, -1, 0
		for ; i < len(bins) && bins[i].site == site; i++ {
			b := &bins[i]
			room := b.up - b.used
			if freeNow {
				room -= b.pend
			}
			if b.typ != k || room < n {
				continue
			}
			if b.node < 0 {
				return i
			}
			if best < 0 || room < bestRoom {
				best, bestRoom = i, room
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}
