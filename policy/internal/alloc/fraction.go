package alloc

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// Fractional jobs (job.Job.Fractional) ask for part of each GPU. The pool
// counts them as the engine's check does: a part takes room left on GPUs
// earlier parts opened, and opens whole GPUs only when none is left, so a
// greedy policy runs four quarter-GPU jobs on one GPU's worth of the pool.
// The engine places the parts exactly (by memory as well as share, MIG
// apart); a part the pool counted but the engine cannot place waits.

// takePart is Take for a fractional job.
func (p *Pool) takePart(st *engine.Status, n int) (engine.Assignment, bool) {
	if p.room == nil {
		p.room = make([]float64, len(p.types))
		p.mem = make([]float64, len(p.types))
		p.opened = make([]int, len(p.types))
		for k, t := range p.types {
			p.mem[k] = TypeMem(p.snap.Cluster, t)
		}
	}
	// share: the part's compute on a GPU of type index k, as the engine
	// places it; on GPUs of unknown memory a share alone is that share
	// (job.Job.Demand), as the engine packs it there.
	share := func(k int) float64 {
		sh, _ := st.Job.Demand(p.mem[k])
		return sh
	}
	// fits: the part fits on a GPU of type index k (its memory), as the
	// engine checks at submission; a job of any type must not be counted
	// on a type whose GPUs cannot hold it, where it would wait for ever.
	fits := func(k int) bool { return PartFits(st.Job, p.mem[k]) }
	// On GPUs parts opened already: the type with the least room that
	// holds it (best fit), its own type when it names one.
	best := -1
	if n == 1 {
		for k := range p.types {
			if t := st.Job.GPUType; (t != "" && p.types[k] != t) || !fits(k) {
				continue
			}
			if sh := share(k); sh <= p.room[k]+1e-9 && (best < 0 || p.room[k] < p.room[best]) {
				best = k
			}
		}
	}
	if best >= 0 {
		p.room[best] -= share(best)
		return p.assign(st, best, n), true
	}
	if n > 1 {
		if a, ok := p.takeSpread(st, n, share, fits); ok {
			return a, true
		}
	}
	k := p.fitIf(st, n, fits)
	if k < 0 {
		return engine.Assignment{}, false
	}
	p.left[k] -= n
	p.opened[k] += n
	p.room[k] += float64(n) * (1 - share(k))
	return p.assign(st, k, n), true
}

// takeSpread gives a job of n parts (one a GPU, on distinct GPUs) as many
// GPUs parts opened as have room, counted as if the room were spread over
// them, and whole GPUs for the rest. Without it a gang of parts counted
// only whole GPUs, so a running gang could be planned off a cluster that
// had room for it beside earlier parts (and preempted). Where the room is
// in fewer GPUs than counted, the engine places what fits exactly and the
// rest waits, as for any part the pool counted.
func (p *Pool) takeSpread(st *engine.Status, n int, share func(k int) float64, fits func(k int) bool) (engine.Assignment, bool) {
	for k := range p.types {
		if t := st.Job.GPUType; (t != "" && p.types[k] != t) || !fits(k) {
			continue
		}
		sh := share(k)
		m := min(n, p.opened[k], int((p.room[k]+1e-9)/sh))
		if m <= 0 || p.left[k] < n-m {
			continue
		}
		p.room[k] += float64(n-m)*(1-sh) - float64(m)*sh
		p.left[k] -= n - m
		p.opened[k] += n - m
		return p.assign(st, k, n), true
	}
	return engine.Assignment{}, false
}

// TypeMem is the most memory a GPU of type t in c has, GiB: its node's,
// or the default for its type; 0 when unknown.
func TypeMem(c *cluster.Cluster, t string) float64 {
	most := 0.0
	for _, nd := range c.Nodes {
		if nd.GPUType != t {
			continue
		}
		mem := nd.GPUMem
		if mem == 0 {
			mem = cluster.DefaultGPUMemGiB[nd.GPUType]
		}
		most = max(most, mem)
	}
	return most
}

// PartFits reports whether fractional job j's part fits on a GPU of
// memGiB alone (as the engine checks at submission): a policy must not
// give a job of any type a type whose GPUs cannot hold it, where it would
// wait for ever.
func PartFits(j *job.Job, memGiB float64) bool {
	share, mem := j.Demand(memGiB)
	return job.Fits(0, 0, share, mem, memGiB)
}
