package alloc

import (
	"slices"

	"github.com/tide-sched/tide/engine"
)

// Bins is the pool's per-bin room (Sites) for a policy that picks each
// job's type and GPU count by its own rule, which the greedy pass does not
// follow: Gavel's round mechanism, the elastic policies' GPU-by-GPU shares.
// Such a policy counted a type's GPUs over every site and planned jobs that
// each fit a site but not together; the placer left one of them waiting,
// and the GPUs it was counted on idle. With Bins it plans each job into one
// bin as the placer will place it, and names the bin in the assignment.
//
// On a cluster of one site that is not an edge site there are no bins
// (Reset reports false) and a policy plans as it did.
type Bins struct {
	p Pool
	// claim is, per bin, the GPUs the jobs TakeSpread put there may still
	// grow by (want - n): room a job that moves or starts should not count
	// on.
	claim []int
}

// Reset readies b for s, in the memory b kept from an earlier round; it
// reports whether s has bins: several sites, or one edge site.
func (b *Bins) Reset(s *engine.Snapshot) bool {
	b.p.init(s, b.p.counts)
	b.claim = resize(b.claim, len(b.p.sites.bins))
	clear(b.claim)
	return len(b.p.sites.bins) > 0
}

// Take plans n GPUs of type t for st into one bin and returns it, or -1
// when no bin has room for them (or t is no type of the cluster). A job
// running on GPUs of type t stays in the bin it holds when there is room
// there; any other job goes where the placer would put it (first the GPUs
// free now, then also those of running jobs not yet taken, which lose
// them: Sites). A job may be taken more than once (Gavel tries it on one
// type after another): each take holds its GPUs until the round ends.
//
// A fractional job, which takes parts of GPUs, and a job packed with
// another (a pair holds its GPUs once) are not counted in bins, as the
// greedy pass counts them: Take returns len(bins) for them, a bin that
// names nothing (Name).
func (b *Bins) Take(st *engine.Status, t string, n int) int { return b.take(st, t, n, n, false) }

// TakeSpread is Take for an elastic job that may grow to want GPUs
// (want >= n), where room counts the GPUs free now less those the jobs
// put there before it may grow by: a running job stays where it runs
// while that has room for want; any other goes to the first bin in the
// cluster's order with room for want, as the placer would, else to the
// one with the most room (the first on a tie) — a running job only when
// that has more than its own. The assignment names the bin, so the placer
// puts it there. First fit on its minimum packed every job into the first
// site, where none could grow, and left the other sites idle.
func (b *Bins) TakeSpread(st *engine.Status, t string, n, want int) int {
	return b.take(st, t, n, max(n, want), true)
}

// take is Take, or TakeSpread with spread.
func (b *Bins) take(st *engine.Status, t string, n, want int, spread bool) int {
	p := &b.p
	ss := &p.sites
	if st.Job.Fractional() || st.PackedWith != "" {
		return len(ss.bins)
	}
	k := p.Index(t)
	if t == "" && len(p.types) == 1 {
		k = 0
	}
	if k < 0 {
		return -1
	}
	if ss.decided == nil {
		ss.decided = map[*engine.Status]bool{}
	}
	held := p.binOf(st)
	if held >= 0 && !ss.decided[st] {
		ss.decided[st] = true
		ss.bins[held].pend -= len(st.GPUs) // its own GPUs are its room
	}
	if held >= 0 && ss.bins[held].typ != k {
		held = -1
	}
	i, heldRoom := -1, -1
	if held >= 0 {
		heldRoom = b.room(held, true)
	}
	if held >= 0 && b.spare(held) >= want {
		i = held
	}
	if i < 0 {
		if !spread {
			i = p.firstFit(k, n, true)
		} else if j := b.spread(k, n, want); j >= 0 && (held < 0 || b.spare(j) > b.spare(held)) {
			i = j
		}
	}
	if i < 0 && heldRoom >= n {
		i = held
	}
	if i < 0 && held >= 0 && b.room(held, false) >= n {
		i = held
	}
	if i < 0 {
		if spread {
			i = b.mostRoom(k, n, false)
		} else {
			i = p.firstFit(k, n, false)
		}
	}
	if i >= 0 {
		ss.bins[i].used += n
		if spread {
			b.claim[i] += want - n
		}
	}
	return i
}

// spare is bin i's GPUs free now less those claimed (TakeSpread).
func (b *Bins) spare(i int) int { return b.room(i, true) - b.claim[i] }

// CanTake reports whether Take(st, t, n) would find a bin, taking nothing.
func (b *Bins) CanTake(st *engine.Status, t string, n int) bool {
	p := &b.p
	if st.Job.Fractional() || st.PackedWith != "" {
		return true
	}
	k := p.Index(t)
	if t == "" && len(p.types) == 1 {
		k = 0
	}
	if k < 0 {
		return false
	}
	if held := p.binOf(st); held >= 0 && p.sites.bins[held].typ == k && b.room(held, false) >= n {
		return true
	}
	return p.firstFit(k, n, false) >= 0
}

// Release says running job st was not planned, or not on its own GPUs (its
// partner's, when packed): its GPUs are room for the jobs after it. Take
// does so itself.
func (b *Bins) Release(st *engine.Status) {
	ss := &b.p.sites
	held := b.p.binOf(st)
	if held < 0 || st.PackedWith != "" {
		return
	}
	if ss.decided == nil {
		ss.decided = map[*engine.Status]bool{}
	}
	if !ss.decided[st] {
		ss.decided[st] = true
		ss.bins[held].pend -= len(st.GPUs)
	}
}

// Room is the GPUs bin i has left for a job already in it, counting those
// of running jobs not yet taken (they lose them); 0 for a bin that names
// nothing.
func (b *Bins) Room(i int) int {
	if i < 0 || i >= len(b.p.sites.bins) {
		return 0
	}
	return b.room(i, false)
}

// Grow adds n GPUs to the job Take put in bin i, when the bin has room.
func (b *Bins) Grow(i, n int) bool {
	if b.Room(i) < n {
		return false
	}
	b.p.sites.bins[i].used += n
	return true
}

// Name names bin i in a: its site, and on an edge site its server, which
// a.GPUs must be set for. A bin that names nothing leaves a as it is.
func (b *Bins) Name(a *engine.Assignment, i int) {
	if i >= 0 {
		b.p.place(a, i)
	}
}

// spread is the first bin of type index k, in the cluster's order, with
// room for n and spare GPUs (free now, less those claimed) for want, as
// first fit would choose; else the one with room for n and the most spare
// GPUs; -1 when none has room for n.
func (b *Bins) spread(k, n, want int) int {
	for i := range b.p.sites.bins {
		if b.p.sites.bins[i].typ == k && b.room(i, true) >= n && b.spare(i) >= want {
			return i
		}
	}
	return b.mostRoom(k, n, true)
}

// mostRoom is the bin of type index k with room for n and the most spare
// GPUs (those free now, with freeNow, less those claimed); -1 when none
// has room for n. With freeNow, GPUs of running jobs not yet taken are not
// room.
func (b *Bins) mostRoom(k, n int, freeNow bool) int {
	best, most := -1, 0
	for i := range b.p.sites.bins {
		if b.p.sites.bins[i].typ != k || b.room(i, freeNow) < n {
			continue
		}
		if r := b.room(i, freeNow) - b.claim[i]; best < 0 || r > most {
			best, most = i, r
		}
	}
	return best
}

// room is bin i's GPUs left; with freeNow, those of running jobs not yet
// taken are not room.
func (b *Bins) room(i int, freeNow bool) int {
	x := &b.p.sites.bins[i]
	r := x.up - x.used
	if freeNow {
		r -= x.pend
	}
	return r
}

// resize is xs with length n, in its memory when it has room.
func resize(xs []int, n int) []int { return slices.Grow(xs[:0], n)[:n] }
