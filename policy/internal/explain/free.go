package explain

import (
	"strconv"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// The free GPUs a waiting job's reason states ("needs 2 GPUs, 2 free").
//
// A job never mixes GPU types or spans sites, and on an edge site it uses
// one server (engine.Assignment). Where the cluster has several such sets
// of GPUs one job may take together (a site's GPUs of one type, or one
// edge server) the GPUs a plan leaves free over the whole cluster are not
// what a job could take: with one GPU free on each of two sites, or one
// V100 and one K80 free, a job of 2 was told "needs 2 GPUs, 2 free", and
// waited for no reason the text gave. There the reason counts instead the
// free GPUs in each set, only those the job could use (of its type when it
// names one; for a job that asks for part of each GPU, of the types whose
// GPUs hold its part), and, when no one set holds what it needs, states
// the most one set has beside the sum: "needs 2 GPUs, at most 1 free on
// any one site (2 across 2 sites)", "at most 1 free of any one type (2
// across 2 types)". On a cluster of one site, one GPU type and no edge
// servers the text is the count over the cluster, as it always was (the
// policies' fast paths, which run on no other cluster, count it so too).

// Free is the GPUs a plan leaves free, as the reasons of the jobs it
// leaves waiting state them. The zero Free is none free on one site.
// Two Frees from PlanFree compare equal only when they state the same
// figures (each call on several sets makes new counts), so a policy may
// key a kept text on one (Gavel).
type Free struct {
	// N is the GPUs the plan leaves free over the whole cluster: what a
	// reason states on a cluster of one site.
	N int
	// sets are, on a cluster of several sets of GPUs a job may take
	// together (perSet), the GPUs free in each; nil on others.
	sets *freeSets
}

// freeSets are the free GPUs of each set of GPUs one job may take
// together, after a plan.
type freeSets struct {
	sets    []freeSet
	oneSite bool // the cluster has one site (of several GPU types)
}

// freeSet is one such set: a site's GPUs of one type, or an edge server.
type freeSet struct {
	site int     // index in Cluster.Sites()
	edge bool    // an edge server
	typ  string  // GPU type
	mem  float64 // memory of its GPUs, GiB (the largest; 0 unknown)
	free int     // GPUs free after the plan (< 0 when the plan over-fills it)
}

// Whole is n GPUs free counted over the whole cluster, for a policy that
// counts them itself on a cluster of one site and one GPU type (its fast
// paths run on no other).
func Whole(n int) Free { return Free{N: n} }

// PlanFree returns the GPUs of s that plan leaves free, as PlanAppend
// counts them: n of them in all (a pair of packed jobs shares its GPUs:
// counted once), and on a cluster of several sets of GPUs a job may take
// together (perSet) those of each set. held is, for a plan with
// engine.Plan.Keep, the GPUs the running jobs hold (they keep them all);
// 0 for a plan that lists
// every job it runs. Each call on several sets makes new counts, so that
// a policy may keep the Free of a round beside the last's.
func PlanFree(s *engine.Snapshot, plan *engine.Plan, held int) Free {
	if !perSet(s.Cluster) {
		return Free{N: planN(s, plan, held)} // no counts to make: nothing allocated
	}
	return new(freeMem).plan(s, plan, held)
}

// perSet reports whether c has several sets of GPUs one job may take
// together: several sites, GPUs of several types, or an edge site
// (whose servers are each a set). On such a cluster free GPUs are
// counted per set; on others, one site of one type, over the cluster.
func perSet(c *cluster.Cluster) bool {
	sites := c.Sites()
	return len(sites) > 1 || len(c.GPUTypes()) > 1 ||
		(len(sites) == 1 && sites[0].Kind == cluster.SiteEdge && len(sites[0].Nodes) > 1)
}

// planN is the GPUs of s that plan leaves free over the whole cluster
// (PlanFree's N).
func planN(s *engine.Snapshot, plan *engine.Plan, held int) int {
	n := s.Available("", "") - held
	for _, a := range plan.Run {
		if a.PackWith == "" || a.Job < a.PackWith {
			n -= a.GPUs
		}
	}
	return n
}

// freeMem is the memory of PlanFree's counts, reused from call to call by
// a caller that reads a Free only until its next call (Scratch), or keeps
// one per round it holds (Queue, Waits): a steady round then allocates
// nothing on several sets either.
type freeMem struct {
	fs      freeSets
	nodeSet []int          // node ID -> index in fs.sets
	used    []bool         // by GPU: counted as held
	given   map[string]int // job ID -> index in run
	placed  []bool         // by index in run: kept in its set
	jobs    []*job.Job     // by index in run
	// in is, by index in run, the set the job is counted in: -1 for one
	// counted nowhere (no set has room for it; the second of a packed
	// pair, counted with its partner).
	in []int
	// shared says some active job holds or asks for GPUs another may
	// hold too (a packed pair, a part of each GPU): the counts are the
	// GPUs, not what each job frees when it ends.
	shared bool
}

// plan is PlanFree in m's memory: the Free it returns is valid until the
// next call.
func (m *freeMem) plan(s *engine.Snapshot, plan *engine.Plan, held int) Free {
	return Free{N: planN(s, plan, held), sets: m.setsAfter(s, plan.Run, plan.Keep)}
}

// setsAfter counts, on a cluster where perSet, the GPUs free in each set
// of GPUs one job may take together once run is placed (keep: every
// running job keeps its GPUs too, engine.Plan.Keep); nil on others. A
// running job the plan keeps on at least some of the GPUs it holds stays
// in its set; any other job planned is counted where the placer would put
// it: in the node or site the assignment names, else on the first site, in
// the cluster's order, with room for it of its type (on an edge site the
// best-fitting server), as place.freeMap does. A GPU held by several jobs
// (a packed pair, parts of it) is counted once. The counts are the
// reason's, not the plan's: a job the placer puts elsewhere only moves
// the figure a reason states.
func (m *freeMem) setsAfter(s *engine.Snapshot, run []engine.Assignment, keep bool) *freeSets {
	c := s.Cluster
	if !perSet(c) {
		return nil // one site, one type: a job may take any free GPUs there
	}
	sites := c.Sites()
	fs := &m.fs
	fs.sets = fs.sets[:0]
	fs.oneSite = len(sites) == 1
	m.nodeSet = grown(m.nodeSet, len(c.Nodes))
	nodeSet := m.nodeSet
	for si, site := range sites {
		first := len(fs.sets)
		edge := site.Kind == cluster.SiteEdge
		for _, id := range site.Nodes {
			n := &c.Nodes[id]
			k := -1
			if !edge {
				for i := first; i < len(fs.sets); i++ {
					if fs.sets[i].typ == n.GPUType {
						k = i
						break
					}
				}
			}
			if k < 0 {
				fs.sets = append(fs.sets, freeSet{site: si, edge: edge, typ: n.GPUType})
				k = len(fs.sets) - 1
			}
			fs.sets[k].free += s.UpGPUs(n)
			fs.sets[k].mem = max(fs.sets[k].mem, n.GPUMemGiB())
			nodeSet[id] = k
		}
	}
	given := reuse(&m.given, len(run))
	for i, a := range run {
		given[a.Job] = i
	}
	m.used = grown(m.used, c.TotalGPUs())
	m.placed = grown(m.placed, len(run))
	m.jobs = grown(m.jobs, len(run))
	m.in = grown(m.in, len(run))
	m.shared = false
	used, placed, jobs, in := m.used, m.placed, m.jobs, m.in
	for i := range in {
		in[i] = -1
	}
	defer clear(jobs) // let the jobs go
	for _, st := range s.ActiveJobs() {
		i, ok := given[st.Job.ID]
		if ok {
			jobs[i] = st.Job
		}
		if st.PackedWith != "" || st.Job.Fractional() {
			m.shared = true
		}
		if len(st.GPUs) == 0 {
			continue
		}
		n := len(st.GPUs)
		if ok {
			a := &run[i]
			k := nodeSet[c.NodeOf(st.GPUs[0]).ID]
			if (a.Site != "" && a.Site != sites[fs.sets[k].site].Name) || (a.GPUType != "" && a.GPUType != fs.sets[k].typ) ||
				(len(a.Nodes) > 0 && nodeSet[a.Nodes[0].Node] != k) {
				continue // it moves: counted where it goes, below
			}
			if a.GPUs > n { // it grows in its set
				fs.sets[k].free -= a.GPUs - n
			}
			n = min(n, a.GPUs)
			placed[i], in[i] = true, k
		} else if !keep {
			continue // preempted: its GPUs are free
		}
		for _, g := range st.GPUs[:n] {
			if !used[g] {
				used[g] = true
				fs.sets[nodeSet[c.NodeOf(g).ID]].free--
			}
		}
	}
	for i, a := range run {
		if a.PackWith != "" {
			m.shared = true
		}
		if placed[i] || (a.PackWith != "" && a.Job > a.PackWith) {
			continue // kept in its set, or the pair's GPUs counted with its partner
		}
		if p, ok := given[a.PackWith]; ok && a.PackWith != "" && placed[p] {
			continue // joins its partner on the GPUs it keeps
		}
		k := -1
		if len(a.Nodes) > 0 {
			k = nodeSet[a.Nodes[0].Node]
		} else {
			k = fs.firstFit(s, a, jobs[i])
		}
		if k >= 0 {
			fs.sets[k].free -= a.GPUs
		}
		in[i] = k
	}
	return fs
}

// grown is b with length n, every element zero.
func grown[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// firstFit is the set the placer would put a's job (j; nil unknown) in:
// on the site a names, else the first site in the cluster's order, whose
// GPUs of the job's type have room for it (on an edge site the
// best-fitting server); -1 when none has.
func (fs *freeSets) firstFit(s *engine.Snapshot, a engine.Assignment, j *job.Job) int {
	t := a.GPUType
	if t == "" && j != nil {
		t = j.GPUType
	}
	sites := s.Cluster.Sites()
	for i := 0; i < len(fs.sets); {
		site, best := fs.sets[i].site, -1
		for ; i < len(fs.sets) && fs.sets[i].site == site; i++ {
			f := &fs.sets[i]
			if (a.Site != "" && sites[site].Name != a.Site) || !f.holds(t, j) || f.free < a.GPUs {
				continue
			}
			if !f.edge {
				return i
			}
			if best < 0 || f.free < fs.sets[best].free {
				best = i
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

// choose is the set a waiting job st would start in, a its assignment
// (the job's own type, or none): for a job that names no type on a
// cluster of several types, the type the greedy pass gives it
// (alloc.Pool.Fit: the type it ran on last if that still holds it, else
// the one with the fewest GPUs free that one set can hold it in, the
// first in the cluster's order on a tie), which choose sets in a; then
// the set firstFit picks of that type. It returns -1 when no set has
// room.
func (fs *freeSets) choose(s *engine.Snapshot, a *engine.Assignment, st *engine.Status) int {
	types := s.Cluster.GPUTypes()
	if st.Job.GPUType != "" || len(types) == 1 {
		return fs.firstFit(s, *a, st.Job)
	}
	room := func(t string) (left, largest int) {
		for i := range fs.sets {
			if f := &fs.sets[i]; f.typ == t && f.free > 0 && f.holds(t, st.Job) {
				left, largest = left+f.free, max(largest, f.free)
			}
		}
		return left, largest
	}
	n, pick, pickLeft := a.GPUs, "", 0
	if t := st.Alloc.GPUType; t != "" {
		if left, largest := room(t); left >= n && largest >= n {
			pick = t
		}
	}
	if pick == "" {
		for _, t := range types {
			if left, largest := room(t); left >= n && largest >= n && (pick == "" || left < pickLeft) {
				pick, pickLeft = t, left
			}
		}
	}
	if pick == "" {
		return -1
	}
	a.GPUType = pick
	k := fs.firstFit(s, *a, st.Job)
	if k < 0 {
		a.GPUType = ""
	}
	return k
}

// holds reports whether a job of type t ("" any) could run on f's GPUs:
// of its type, and for job j (nil: a whole-GPU job) asking for part of
// each GPU, GPUs whose memory holds its part (as the engine checks it).
func (f *freeSet) holds(t string, j *job.Job) bool {
	if t != "" && f.typ != t {
		return false
	}
	if j == nil || !j.Fractional() {
		return true
	}
	share, mem := j.Demand(f.mem)
	return job.Fits(0, 0, share, mem, f.mem)
}

// appendNeeds appends the GPUs job st needs against those free: "needs 2
// GPUs, 2 free" on one site of one type; on other clusters, only the free
// GPUs it could use, and, when they lie in more than one set it may take
// together and no one set holds as many as it needs, the most in one:
// "needs 2 GPUs, at most 1 free on any one site (2 across 2 sites)".
func (f Free) appendNeeds(buf []byte, st *engine.Status) []byte {
	buf = append(buf, "; needs "...)
	buf = strconv.AppendInt(buf, int64(st.Job.MinGPUs), 10)
	if f.sets == nil {
		buf = append(buf, " GPUs, "...)
		buf = strconv.AppendInt(buf, int64(max(f.N, 0)), 10)
		return append(buf, " free"...)
	}
	j := st.Job
	if j.GPUType != "" {
		buf = append(buf, ' ')
		buf = append(buf, j.GPUType...)
	}
	buf = append(buf, " GPUs, "...)
	most, all, n := 0, 0, 0
	edges, sameSite := 0, false
	lastSite := -1
	for i := range f.sets.sets {
		s := &f.sets.sets[i]
		if s.free <= 0 || !s.holds(j.GPUType, j) {
			continue
		}
		most, all, n = max(most, s.free), all+s.free, n+1
		if s.edge {
			edges++
		} else {
			sameSite = sameSite || s.site == lastSite // sets of a site are listed together
			lastSite = s.site
		}
	}
	if n <= 1 || most >= j.MinGPUs {
		// In one set, or one set could hold it: where they lie is not
		// what it waits for.
		buf = strconv.AppendInt(buf, int64(all), 10)
		return append(buf, " free"...)
	}
	buf = append(buf, "at most "...)
	buf = strconv.AppendInt(buf, int64(most), 10)
	var one, many string
	switch {
	case edges == n:
		one, many = " free on any one edge server (", " servers)"
	case edges == 0 && !sameSite:
		one, many = " free on any one site (", " sites)"
	case edges == 0 && f.sets.oneSite:
		one, many = " free of any one type (", " types)"
	case edges == 0:
		one, many = " free of one type on any one site (", " such sets)"
	default:
		one, many = " free of one type on any one site or edge server (", " such sets)"
	}
	buf = append(buf, one...)
	buf = strconv.AppendInt(buf, int64(all), 10)
	buf = append(buf, " across "...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, many...)
}
