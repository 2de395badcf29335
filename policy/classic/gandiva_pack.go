package classic

import (
	"math/rand/v2"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// Gandiva's packing (knob pack=true) and grow-shrink (grow=true).
//
// Packing: when the cluster is oversubscribed (the active jobs ask for more
// GPUs than are up), jobs not yet paired are paired at random (seeded), two
// of equal GPU count at a time, and a pair runs as one unit of the
// time-slicing: one turn, one set of GPUs (under preset=gavel every pair;
// under preset=paper only as many as the GPUs asked beyond the GPUs up
// need, the others take their turns apart). Pairs outlive rounds; while the
// cluster is not oversubscribed every job runs alone and the pairs wait for
// the next squeeze. Whether a pair stays is decided from its measured
// throughputs (perf.Sharer stands in for Gandiva's introspection):
//
//   - preset=paper, as in the paper: a pair runs packed, and once it has
//     (its members report each other as partner), its normalised
//     throughput on the GPUs it holds, r1/T1 + r2/T2 (packed over alone),
//     is read; at or below 1 packing did not help: the pair is split and
//     never formed again.
//   - preset=gavel, as Gavel's model of Gandiva (scheduler/policies/
//     gandiva.py, which packs): a pair is kept while the sum of that
//     normalised throughput over all GPU types is at least 1, and dropped
//     at once when a type has no measurement for it (Gavel then rolls new
//     random pairs from the jobs left unpaired).
//
// A pair runs packed on a type only where it was measured; elsewhere (and
// on an executor that cannot pack, engine.Snapshot.Sharing false) its first
// member runs alone and the other waits for its turn.
//
// Grow-shrink: when no job waits, idle GPUs go to running elastic jobs
// (MinGPUs < MaxGPUs), in plan order, each growing toward MaxGPUs while the
// model says more GPUs make it faster; when jobs wait again, every job is
// planned at its requested count, so grown jobs shrink back (a resize).
type gandivaPacking struct {
	partner map[string]string // job -> partner, both ways
	bad     map[string]bool   // pairKey of pairs measured not to help
	rng     *rand.Rand
	pcg     *rand.PCG // rng's source, saved with the state
	gavel   bool      // Gavel's keep rule instead of the paper's
}

func newGandivaPacking(seed uint64, gavel bool) *gandivaPacking {
	pcg := rand.NewPCG(seed, 0x6a9d1)
	return &gandivaPacking{partner: map[string]string{}, bad: map[string]bool{}, rng: rand.New(pcg), pcg: pcg, gavel: gavel}
}

func (k *gandivaPacking) split(a, b string) {
	delete(k.partner, a)
	delete(k.partner, b)
}

// keeps reports whether the pair (a, b) may stay paired now.
func (k *gandivaPacking) keeps(s *engine.Snapshot, sh perf.Sharer, a, b *engine.Status) bool {
	if k.bad[alloc.PairKey(a.Job.ID, b.Job.ID)] {
		return false
	}
	if k.gavel {
		sum := 0.0
		for _, t := range s.Cluster.GPUTypes() {
			g, ok := alloc.PackGain(s, sh, a, b, t)
			if !ok {
				return false
			}
			sum += g
		}
		return sum >= 1
	}
	if a.PackedWith != b.Job.ID || len(a.GPUs) == 0 {
		return true // not measured yet
	}
	if g, ok := alloc.PackGain(s, sh, a, b, a.Alloc.GPUType); !ok || g <= 1 {
		k.bad[alloc.PairKey(a.Job.ID, b.Job.ID)] = true
		return false
	}
	return true
}

// update drops the pairs that ended or do not help, pairs unpaired jobs
// when the cluster is oversubscribed, and returns order with each pair
// reduced to its member that comes first (the pair's turn); with the
// cluster not oversubscribed it returns order as it is.
func (k *gandivaPacking) update(s *engine.Snapshot, order []*engine.Status) []*engine.Status {
	sh, ok := s.Model.(perf.Sharer)
	if !ok || !s.Sharing {
		return order
	}
	byID := make(map[string]*engine.Status, len(s.Jobs))
	asked := 0
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
		asked += st.Job.GPUs
	}
	k.adoptPairs(s, byID)
	for _, st := range s.Jobs { // in submission order: deterministic
		p, paired := k.partner[st.Job.ID]
		if !paired || st.Job.ID > p && byID[p] != nil {
			continue // checked from its partner's side
		}
		if q := byID[p]; q == nil || !k.keeps(s, sh, st, q) {
			k.split(st.Job.ID, p)
		}
	}
	for id, p := range k.partner { // partners of departed jobs
		if byID[id] == nil || byID[p] == nil {
			k.split(id, p)
		}
	}
	if asked <= s.Available("", "") {
		return order
	}
	var free []*engine.Status
	for _, st := range s.Jobs {
		if _, paired := k.partner[st.Job.ID]; !paired {
			free = append(free, st)
		}
	}
	for tries := len(free); tries > 0 && len(free) > 1; tries-- {
		i := k.rng.IntN(len(free))
		j := k.rng.IntN(len(free) - 1)
		if j >= i {
			j++
		}
		a, b := free[i], free[j]
		if a.Job.GPUs != b.Job.GPUs || !k.keeps(s, sh, a, b) {
			continue
		}
		if k.gavel || k.measuredSomewhere(s, sh, a, b) {
			k.partner[a.Job.ID], k.partner[b.Job.ID] = b.Job.ID, a.Job.ID
			free = slices.DeleteFunc(free, func(st *engine.Status) bool { return st == a || st == b })
		}
	}
	// Gavel's model runs every pair packed. The paper packs to absorb
	// oversubscription: only the pairs needed to bring the GPUs asked down
	// to the GPUs up take one turn together, first in turn order; the
	// others stay paired but take their turns apart, so no GPU idles while
	// jobs run at their packed rates.
	excess := asked - s.Available("", "")
	seen := map[string]bool{}
	out := make([]*engine.Status, 0, len(order))
	for _, st := range order {
		seen[st.Job.ID] = true
		if p, paired := k.partner[st.Job.ID]; paired && seen[p] && (k.gavel || excess > 0) {
			excess -= st.Job.GPUs
			continue
		}
		out = append(out, st)
	}
	return out
}

// adoptPairs takes as pairs the pairs running packed that it did not form
// (neither member paired here): an executor restarted without the
// policy's saved state re-adopts running pairs (engine.Adopt), and
// planning them apart would move a job that runs. In the simulator every
// running pair is one it formed, so this never acts there.
func (k *gandivaPacking) adoptPairs(s *engine.Snapshot, byID map[string]*engine.Status) {
	for _, st := range s.Jobs {
		id, p := st.Job.ID, st.PackedWith
		if p == "" || id > p {
			continue
		}
		_, a := k.partner[id]
		_, b := k.partner[p]
		if q := byID[p]; !a && !b && q != nil && q.PackedWith == id {
			k.partner[id], k.partner[p] = p, id
		}
	}
}

// measuredSomewhere: the pair has throughputs on some GPU type.
func (k *gandivaPacking) measuredSomewhere(s *engine.Snapshot, sh perf.Sharer, a, b *engine.Status) bool {
	for _, t := range s.Cluster.GPUTypes() {
		if _, ok := alloc.PackGain(s, sh, a, b, t); ok {
			return true
		}
	}
	return false
}

// expand adds to run, after each pair's first member, its partner on the
// same GPUs, where the pair was measured on the type planned. It does
// nothing while the cluster is not oversubscribed (update left order whole,
// so both members may already be in run alone).
func (k *gandivaPacking) expand(s *engine.Snapshot, run []engine.Assignment) []engine.Assignment {
	sh, ok := s.Model.(perf.Sharer)
	if !ok || !s.Sharing || len(k.partner) == 0 {
		return run
	}
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	planned := make(map[string]bool, len(run))
	for _, a := range run {
		planned[a.Job] = true
	}
	out := make([]engine.Assignment, 0, len(run))
	for _, a := range run {
		p, paired := k.partner[a.Job]
		st, q := byID[a.Job], byID[p]
		t := a.GPUType
		if t == "" && len(s.Cluster.GPUTypes()) == 1 {
			t = s.Cluster.GPUTypes()[0]
		}
		if !paired || planned[p] || q == nil || t == "" || a.GPUs != q.Job.GPUs ||
			(q.Job.GPUType != "" && q.Job.GPUType != t) {
			out = append(out, a)
			continue
		}
		if _, ok := alloc.PackGain(s, sh, st, q, t); !ok {
			out = append(out, a)
			continue
		}
		b := a
		a.PackWith, b.Job, b.PackWith = p, p, a.Job
		out = append(out, a, b)
	}
	return out
}
