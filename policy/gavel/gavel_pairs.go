package gavel

import (
	"cmp"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// Space sharing in Gavel (its *_packing policies; knob space_sharing=true):
// besides X[m][k], the LP gets a variable Y[p][k] for each pair p of jobs
// that may share GPUs of type k, the fraction of time the two run together
// there. A pair's time counts against both members' time (each job's
// shares, alone and in pairs, sum to at most 1) and once against the type's
// GPUs; each member's effective throughput gains its packed throughput
// times Y. Every objective is written over the effective throughputs, so
// LAS, makespan, FTF and max-throughput all take pairs the same way.
//
// Gavel (scheduler/policies/policy.go, PolicyWithPacking) adds a variable
// for every pair of active jobs. tide adds only the pairs that can help:
// both members of equal GPU count (the only pairs measured), the pair
// measured on k (perf.Sharer), and r1/T1 + r2/T2 > 1 on k, where r are the
// packed and T the alone throughputs. A pair below that line is dominated:
// running its members alone for r1/T1 and r2/T2 of the time gives each as
// much progress with less GPU time and less of the jobs' time. With many
// jobs each keeps at most pairsPerJob partners, those that gain most.
//
// The mechanism schedules pairs as Gavel's does: each (pair, type) is an
// entry next to the (job, type) entries, with priority Y[p][k] over the
// pair's share of the type's time since the last recomputation; a pair is
// skipped when either member already runs this round. One departure: a pair
// with no allocation never runs (Gavel would let it fill idle GPUs like a
// job with no allocation; tide then runs its members alone).

// gavelPair is two jobs (indexes in gavelProblem.jobs, a < b) that may share
// GPUs, with each one's packed throughput on each type (0 where not).
type gavelPair struct {
	a, b int
	tput [][2]float64
	key  string
}

// pairsPerJob caps the partners a job is offered in the LP.
const pairsPerJob = 16

// pairs lists the pairs that may share GPUs in p (see above); nil when the
// executor or the model cannot pack.
func (g *Gavel) pairs(s *engine.Snapshot, p *gavelProblem) []gavelPair {
	sh, ok := s.Model.(perf.Sharer)
	if !g.SpaceSharing || !s.Sharing || !ok {
		return nil
	}
	var out []gavelPair
	var gain []float64
	for a := range p.jobs {
		for b := a + 1; b < len(p.jobs); b++ {
			ja, jb := p.jobs[a].Job, p.jobs[b].Job
			if ja.GPUs != jb.GPUs {
				continue
			}
			pr := gavelPair{a: a, b: b, tput: make([][2]float64, len(p.types)), key: alloc.PairKey(ja.ID, jb.ID)}
			best := 0.0
			for k, t := range p.types {
				if p.tput[a][k] <= 0 || p.tput[b][k] <= 0 {
					continue
				}
				r1, r2, ok := sh.Shared(ja, jb, perf.Packed(t, ja.GPUs, s.GPUsPerNode[t]))
				if g := r1/p.tput[a][k] + r2/p.tput[b][k]; ok && r1 > 0 && r2 > 0 && g > 1 {
					pr.tput[k] = [2]float64{r1, r2}
					best = max(best, g)
				}
			}
			if best > 0 {
				out = append(out, pr)
				gain = append(gain, best)
			}
		}
	}
	return capPairs(out, gain, len(p.jobs))
}

// capPairs keeps the pairs that are among the pairsPerJob best (by gain) of
// either member.
func capPairs(pairs []gavelPair, gain []float64, n int) []gavelPair {
	byJob := make([][]int, n)
	for i, pr := range pairs {
		byJob[pr.a] = append(byJob[pr.a], i)
		byJob[pr.b] = append(byJob[pr.b], i)
	}
	keep := make([]bool, len(pairs))
	for _, list := range byJob {
		slices.SortStableFunc(list, func(x, y int) int { return cmp.Compare(gain[y], gain[x]) })
		for _, i := range list[:min(len(list), pairsPerJob)] {
			keep[i] = true
		}
	}
	out := pairs[:0]
	for i, pr := range pairs {
		if keep[i] {
			out = append(out, pr)
		}
	}
	return out
}

// gavelPairState is the mechanism's state for one pair, like gavelJob's.
type gavelPairState struct {
	x, deficit, received []float64
}

// resetPairs restarts the pairs' time shares at a recomputation, as reset
// does the jobs', and forgets pairs no longer offered.
func (g *Gavel) resetPairs(p *gavelProblem, elapsed float64) {
	offered := make(map[string]bool, len(p.pairs))
	for _, pr := range p.pairs {
		offered[pr.key] = true
		ps := g.pairState[pr.key]
		if ps == nil {
			ps = &gavelPairState{deficit: make([]float64, len(g.types)), received: make([]float64, len(g.types))}
			for k := range ps.received {
				ps.received[k] = g.Round / 2
			}
			g.pairState[pr.key] = ps
		}
		g.restart(ps.x, ps.deficit, ps.received, elapsed)
		ps.x = nil // until the allocation is in
	}
	for key := range g.pairState {
		if !offered[key] {
			delete(g.pairState, key)
		}
	}
}

// pairEntries appends the queue entries of the pairs with an allocation on
// type k.
func (g *Gavel) pairEntries(queue []gavelEntry, p *gavelProblem, k int) []gavelEntry {
	for q, pr := range p.pairs {
		ps := g.pairState[pr.key]
		if ps == nil || ps.x == nil || pr.tput[k][0] <= 0 {
			continue
		}
		alloc, prio := g.priority(ps.x[k], ps.received[k], k)
		if alloc <= 0 {
			continue
		}
		queue = append(queue, gavelEntry{m: pr.a, k: k, prio: prio, deficit: ps.deficit[k], alloc: alloc, pair: q})
	}
	return queue
}

// placePair runs pair entry e when both members are free and its GPUs fit
// (with sites, in one site: alloc.Bins; a pair running together already
// keeps its GPUs, counted by type alone, as alloc.Pool counts pairs).
func (g *Gavel) placePair(run []engine.Assignment, e gavelEntry, p *gavelProblem, left []float64, done []bool, sites bool) []engine.Assignment {
	pr := p.pairs[e.pair]
	n := p.gpus[pr.a]
	if done[pr.a] || done[pr.b] || n > left[e.k] {
		return run
	}
	sa, sb := p.jobs[pr.a], p.jobs[pr.b]
	ja, jb := sa.Job, sb.Job
	t := g.types[e.k]
	a := engine.Assignment{Job: ja.ID, GPUs: ja.GPUs, GPUType: t, PackWith: jb.ID}
	b := engine.Assignment{Job: jb.ID, GPUs: jb.GPUs, GPUType: t, PackWith: ja.ID}
	if sites {
		i := g.bins.Take(sa, t, ja.GPUs)
		if i < 0 {
			return run
		}
		g.bins.Release(sb) // it runs on its partner's GPUs
		g.bins.Name(&a, i)
		g.bins.Name(&b, i)
	}
	left[e.k] -= n
	done[pr.a], done[pr.b] = true, true
	return append(run, a, b)
}
