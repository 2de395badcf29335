// Package alloc holds what policies share to hand out GPUs: greedy
// placement in an order, a pool of the GPUs of each type a plan has left,
// and a job sort.
package alloc

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/tide-sched/tide/engine"
)

// Greedy runs jobs in the given order while their GPU counts fit, each on
// its requested count (Job.GPUs) and type. With strict, it stops at the first
// job that does not fit (no job overtakes it); otherwise smaller jobs behind
// it may start.
//
// A job that accepts any type is given a concrete one here, so that what the
// plan counts is what the placer can honour on a mixed cluster: the type it
// runs on now if it still fits there, else the type with the fewest GPUs
// left that still holds it (best fit, the first in the cluster's order on a
// tie), which keeps the larger pools for the jobs that need them. On a one-type cluster the
// assignment keeps the job's own (possibly empty) type.
func Greedy(s *engine.Snapshot, order []*engine.Status, strict bool) engine.Plan {
	return GreedyInto(s, order, strict, nil)
}

// GreedyInto is greedy appending the plan's assignments to run[:0], so a
// policy may reuse the memory of its last plan (each assignment takes a GPU
// at least, so one allocation of the GPUs left suffices when run is short).
func GreedyInto(s *engine.Snapshot, order []*engine.Status, strict bool, run []engine.Assignment) engine.Plan {
	// Pools are recycled, so a round's greedy pass allocates nothing of
	// its own.
	free := pools.Get().(*Pool)
	defer free.put()
	return free.greedy(s, order, strict, run)
}

// greedy is GreedyInto's pass with p as the pool of GPUs left.
func (free *Pool) greedy(s *engine.Snapshot, order []*engine.Status, strict bool, run []engine.Assignment) engine.Plan {
	free.init(s, free.counts)
	plan := engine.Plan{Run: slices.Grow(run[:0], min(len(order), free.Room()))}
	single := len(free.types) == 1 && len(free.sites.bins) == 0
	for _, st := range order {
		if j := st.Job; single && !j.Fractional() {
			// Take on a one-type cluster, inline: most large runs are on
			// one type, and this pass visits every active job each round.
			n := j.GPUs
			if free.left[0] >= n && (j.GPUType == free.types[0] || (j.GPUType == "" && free.largest[0] >= n)) {
				free.left[0] -= n
				plan.Run = append(plan.Run, engine.Assignment{Job: j.ID, GPUs: n, GPUType: j.GPUType})
			} else if strict {
				break
			}
			continue
		}
		a, ok := free.Take(st, st.Job.GPUs)
		if !ok {
			if strict {
				break
			}
			continue
		}
		plan.Run = append(plan.Run, a)
	}
	return plan
}

// Pool counts the GPUs of each type a plan has left to give: those
// available to training (GPUs taken by inference or faults do not count).
// Types are held by their index in the cluster's GPUTypes, so a round's
// greedy pass does no map work.
type Pool struct {
	types []string
	left  []int // GPUs left per type index
	// largest is the most GPUs of a type one job can hold: on a multi-site
	// cluster a job never spans sites, so a type counts only where one
	// site (or one edge server) can hold the job.
	largest []int
	// room and mem serve fractional jobs (fraction.go), nil until one
	// comes: the GPUs' worth of room left on GPUs parts opened, and the
	// largest GPU memory, per type index.
	room, mem []float64
	opened    []int // GPUs parts opened, per type index (fraction.go)
	snap      *engine.Snapshot
	counts    []int // the memory of left and largest
	// sites holds, on a cluster of several sites, the room of each site
	// and edge server (sites.go); no bins on one site.
	sites sites
}

func NewPool(s *engine.Snapshot) *Pool {
	p := new(Pool)
	p.init(s, nil)
	return p
}

// pools recycles GreedyInto's pools.
var pools = sync.Pool{New: func() any { return new(Pool) }}

// put gives p back to pools, keeping only its memory.
func (p *Pool) put() {
	*p = Pool{counts: p.counts, sites: p.sites}
	pools.Put(p)
}

// init fills p for s, its counts in buf's memory when it has room.
func (p *Pool) init(s *engine.Snapshot, buf []int) {
	types := s.Cluster.GPUTypes()
	buf = slices.Grow(buf[:0], 2*len(types))[:2*len(types)]
	*p = Pool{types: types, left: buf[:len(types)], largest: buf[len(types):], snap: s, counts: buf, sites: p.sites}
	for k, t := range types {
		p.left[k] = s.Available("", t)
		p.largest[k] = p.left[k]
	}
	p.initSites(s) // largest per site or edge server, where there are several
}

// Index is t's index in p.types, -1 when the cluster has no such type.
func (p *Pool) Index(t string) int {
	for k, u := range p.types {
		if u == t {
			return k
		}
	}
	return -1
}

// Free returns the GPUs of type t left (0 for a type the cluster lacks).
func (p *Pool) Free(t string) int {
	if k := p.Index(t); k >= 0 {
		return p.left[k]
	}
	return 0
}

// Use takes n GPUs of type t (which the cluster has) from the pool.
func (p *Pool) Use(t string, n int) { p.left[p.Index(t)] -= n }

// Room is the GPUs left of every type.
func (p *Pool) Room() int {
	n := 0
	for _, l := range p.left {
		n += l
	}
	return n
}

// Fit returns the type index greedy gives st for n GPUs (-1 when none has
// room): its own type; else the type it runs on now if that still has
// room; else the type with the fewest GPUs left that holds n (first in the
// cluster's order on a tie).
func (p *Pool) Fit(st *engine.Status, n int) int { return p.fitIf(st, n, nil) }

// fitIf is Fit choosing, for a job of any type, among the types ok
// accepts (all when ok is nil).
func (p *Pool) fitIf(st *engine.Status, n int, ok func(k int) bool) int {
	k := -1
	if t := st.Job.GPUType; t != "" {
		k = p.Index(t)
	} else if len(p.types) == 1 {
		if p.largest[0] >= n {
			k = 0
		}
	} else {
		if c := p.Index(st.Alloc.GPUType); c >= 0 && p.left[c] >= n && p.largest[c] >= n {
			k = c
		} else {
			for c := range p.types {
				if p.left[c] >= n && p.largest[c] >= n && (k < 0 || p.left[c] < p.left[k]) && (ok == nil || ok(c)) {
					k = c
				}
			}
		}
	}
	if k < 0 || p.left[k] < n {
		return -1
	}
	return k
}

// Take gives st n GPUs of the type fit picks, when one has room. On a
// one-type cluster the assignment keeps the job's own (possibly empty)
// type: there is nothing to choose, so the plan says what the job asked.
//
// A fractional job takes its part from room parts left before it opens
// whole GPUs (fraction.go).
func (p *Pool) Take(st *engine.Status, n int) (engine.Assignment, bool) {
	if st.Job.Fractional() {
		return p.takePart(st, n)
	}
	k := p.Fit(st, n)
	if k < 0 {
		return engine.Assignment{}, false
	}
	b := -1
	if len(p.sites.bins) > 0 {
		if b = p.takeBin(st, k, n); b < 0 {
			return engine.Assignment{}, false
		}
	}
	p.left[k] -= n
	a := p.assign(st, k, n)
	if b >= 0 {
		p.place(&a, b)
	}
	return a, true
}

// assign is st's assignment of n GPUs of type index k.
func (p *Pool) assign(st *engine.Status, k, n int) engine.Assignment {
	t := p.types[k]
	if len(p.types) == 1 {
		t = st.Job.GPUType
	}
	return engine.Assignment{Job: st.Job.ID, GPUs: n, GPUType: t}
}

// SortJobs orders a copy of jobs by less, falling back to (submit, ID).
// The order is total (IDs are unique), so an unstable sort gives what a
// stable one would, faster.
func SortJobs(jobs []*engine.Status, less func(a, b *engine.Status) int) []*engine.Status {
	out := append([]*engine.Status(nil), jobs...)
	slices.SortFunc(out, func(a, b *engine.Status) int {
		if c := less(a, b); c != 0 {
			return c
		}
		ja, jb := a.Job, b.Job
		if ja.Submit != jb.Submit {
			return cmp.Compare(ja.Submit, jb.Submit)
		}
		return strings.Compare(ja.ID, jb.ID)
	})
	return out
}

// SortByKey orders a copy of jobs by key, ascending (cmp.Compare's order),
// falling back to (submit, ID): SortJobs comparing keys, with each job's
// key computed once instead of at every comparison.
func SortByKey(jobs []*engine.Status, key func(st *engine.Status) float64) []*engine.Status {
	type keyed struct {
		k  float64
		st *engine.Status
	}
	ks := make([]keyed, len(jobs))
	for i, st := range jobs {
		ks[i] = keyed{key(st), st}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(a.k, b.k); c != 0 {
			return c
		}
		ja, jb := a.st.Job, b.st.Job
		if ja.Submit != jb.Submit {
			return cmp.Compare(ja.Submit, jb.Submit)
		}
		return strings.Compare(ja.ID, jb.ID)
	})
	out := make([]*engine.Status, len(ks))
	for i, k := range ks {
		out[i] = k.st
	}
	return out
}

// Types are the cluster's GPU types, in the order Index counts them.
func (p *Pool) Types() []string { return p.types }
