package classic

import (
	"slices"

	"github.com/tide-sched/tide/engine"
)

// Tiresias' order of the active jobs, kept between rounds (issue 19): a
// treap over the jobs' slots (engine.Status.Slot), ordered as the full
// pass sorts them (queue, then compareIn), each node summing its subtree's
// jobs, GPUs asked, least GPUs asked and running jobs. The rounds where
// everything fits only mark the jobs that arrived, started, stopped or
// changed queue (mark); the first round where some job does not fit moves
// each marked job to its place, in O(log n), or builds the order afresh
// when more than a quarter of the jobs were marked (settle). A job that
// ends leaves at once, through its parent link. The greedy pass over the
// whole order is then answered from the sums: the longest prefix whose
// GPUs fit, then each later job that fits what is left, in O(log n) per
// job taken, so such a round costs what changed, not the jobs running
// (scheduleQueued in tiresias_fast.go).

// node is a job's place in the treap (in fastJob).
type node struct {
	in   bool  // in the treap
	l, r int32 // children, slot+1; 0 for none
	par  int32 // parent, slot+1; 0 for the root
	prio uint32
	run  bool // held GPUs when last placed
	size int32
	nrun int32 // running jobs in the subtree
	sum  int   // GPUs asked in the subtree
	min  int   // least GPUs asked in the subtree
	key  tiresiasEntry
}

// nd returns the node of slot+1 i (i > 0).
func (f *tiresiasFast) nd(i int32) *node { return &f.jobs[i-1].node }

func (f *tiresiasFast) size(i int32) int32 {
	if i == 0 {
		return 0
	}
	return f.nd(i).size
}

func (f *tiresiasFast) sumOf(i int32) int {
	if i == 0 {
		return 0
	}
	return f.nd(i).sum
}

// fix recomputes i's sums from its children.
func (f *tiresiasFast) fix(i int32) {
	n := f.nd(i)
	d := n.key.st.Job.GPUs
	n.size, n.sum, n.min, n.nrun = 1, d, d, 0
	if n.run {
		n.nrun = 1
	}
	for _, c := range [2]int32{n.l, n.r} {
		if c == 0 {
			continue
		}
		cn := f.nd(c)
		cn.par = i
		n.size += cn.size
		n.sum += cn.sum
		n.min = min(n.min, cn.min)
		n.nrun += cn.nrun
	}
}

// before reports whether a comes before b in the order.
func (f *tiresiasFast) before(a, b *tiresiasEntry) bool {
	if a.queue != b.queue {
		return a.queue < b.queue
	}
	return f.cmp(*a, *b) < 0
}

// merge joins treaps a and b, every key of a before every key of b.
func (f *tiresiasFast) merge(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	if na, nb := f.nd(a), f.nd(b); na.prio >= nb.prio {
		na.r = f.merge(na.r, b)
		f.fix(a)
		return a
	} else {
		nb.l = f.merge(a, nb.l)
		f.fix(b)
		return b
	}
}

// split parts treap i into the keys before k and the rest.
func (f *tiresiasFast) split(i int32, k *tiresiasEntry) (int32, int32) {
	if i == 0 {
		return 0, 0
	}
	n := f.nd(i)
	if f.before(&n.key, k) {
		l, r := f.split(n.r, k)
		n.r = l
		f.fix(i)
		return i, r
	}
	l, r := f.split(n.l, k)
	n.l = r
	f.fix(i)
	return l, i
}

// remove takes node x (slot+1) out of treap i and returns the new root.
func (f *tiresiasFast) remove(i, x int32) int32 {
	if i == 0 {
		return 0 // not found: the caller's bookkeeping says it is in
	}
	n := f.nd(i)
	if i == x {
		return f.merge(n.l, n.r)
	}
	if f.before(&f.nd(x).key, &n.key) {
		n.l = f.remove(n.l, x)
	} else {
		n.r = f.remove(n.r, x)
	}
	f.fix(i)
	return i
}

// nextPrio is the next priority of a deterministic xorshift: the order
// does not depend on the treap's shape, only its cost does.
func (f *tiresiasFast) nextPrio() uint32 {
	x := f.seed
	if x == 0 {
		x = 2463534242
	}
	x ^= x << 13
	x ^= x >> 17
	x ^= x << 5
	f.seed = x
	return x
}

// place puts st in the order at key e (queue and entry time), running or
// not as it is now, moving it when it was in at another key.
func (f *tiresiasFast) place(e tiresiasEntry) {
	st := e.st
	x := int32(st.Slot + 1)
	n := f.nd(x)
	run := len(st.GPUs) > 0
	if n.in {
		if n.key.queue == e.queue && n.key.entered == e.entered && n.key.st == st && n.run == run {
			return
		}
		f.logOut(x)
		f.setRoot(f.remove(f.root, x))
	}
	n.in, n.l, n.r, n.key, n.run = true, 0, 0, e, run
	n.prio = f.nextPrio()
	f.fix(x)
	l, r := f.split(f.root, &n.key)
	f.setRoot(f.merge(f.merge(l, x), r))
	f.logIn(x)
}

// setRoot makes i the root.
func (f *tiresiasFast) setRoot(i int32) {
	f.root = i
	if i != 0 {
		f.nd(i).par = 0
	}
}

// unplace takes st's node out of the order, through its parent link
// (no comparisons): its children's merge takes its place.
func (f *tiresiasFast) unplace(x int32) {
	n := f.nd(x)
	if !n.in {
		return
	}
	f.logOut(x)
	sub, p := f.merge(n.l, n.r), n.par
	*n = node{}
	if p == 0 {
		f.setRoot(sub)
		return
	}
	if pn := f.nd(p); pn.l == x {
		pn.l = sub
	} else {
		pn.r = sub
	}
	for ; p != 0; p = f.nd(p).par {
		f.fix(p)
	}
}

// mark notes that st's place in the order may have moved (it arrived,
// started, stopped or changed queue): settle moves it.
func (f *tiresiasFast) mark(st *engine.Status) {
	if f.stale {
		return // built afresh when next needed
	}
	if j := f.job(st); j != nil && !j.dirty {
		if len(f.dirty) > len(f.jobs)/4+16 {
			// Many moved: settle builds the order afresh; the list goes
			// (a replay in which everything fits never settles).
			clear(f.dirty)
			f.dirty, f.stale = f.dirty[:0], true
			return
		}
		j.dirty = true
		f.dirty = append(f.dirty, st)
	}
}

// settle brings the order up to date: each job marked since goes to its
// key (queue and entry time, from its memo as this round leaves it), or,
// when more than a quarter of the jobs were marked, the order is built
// afresh from every job's key.
func (f *tiresiasFast) settle(t *Tiresias) {
	keyOf := func(st *engine.Status) tiresiasEntry {
		m := t.memoOf(st)
		return tiresiasEntry{st: st, queue: int(m[memoQueue]) - 1, entered: m[memoEntered]}
	}
	if f.stale || f.root == 0 || len(f.dirty) > int(f.size(f.root))/4 {
		t.keepPrev() // the last round's reasons, before the order goes
		f.stale = false
		entries := f.sorted[:0]
		for i := range f.jobs {
			if j := &f.jobs[i]; j.st != nil {
				j.dirty = false
				entries = append(entries, keyOf(j.st))
			}
		}
		slices.SortFunc(entries, func(a, b tiresiasEntry) int {
			if a.queue != b.queue {
				return a.queue - b.queue
			}
			return f.cmp(a, b)
		})
		f.build(entries)
		clear(entries)
		f.sorted = entries[:0]
	} else {
		for _, st := range f.dirty {
			if j := f.job(st); j != nil && j.dirty {
				j.dirty = false
				f.place(keyOf(st))
			}
		}
	}
	clear(f.dirty)
	f.dirty = f.dirty[:0]
}

// build makes the order from entries, already in order, in linear time
// (a Cartesian tree on fresh priorities).
func (f *tiresiasFast) build(entries []tiresiasEntry) {
	stack := f.stack[:0]
	for _, e := range entries {
		x := int32(e.st.Slot + 1)
		n := f.nd(x)
		*n = node{in: true, key: e, run: len(e.st.GPUs) > 0, prio: f.nextPrio()}
		var last int32
		for len(stack) > 0 && f.nd(stack[len(stack)-1]).prio < n.prio {
			last = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f.fix(last)
		}
		n.l = last
		if len(stack) > 0 {
			f.nd(stack[len(stack)-1]).r = x
		}
		stack = append(stack, x)
	}
	for k := len(stack) - 1; k >= 0; k-- {
		f.fix(stack[k])
	}
	f.root = 0
	if len(stack) > 0 {
		f.setRoot(stack[0])
	}
	f.stack = stack[:0]
}

// rank is x's 0-based place in the order: the jobs before it in its
// subtree and in the left subtrees of the ancestors it lies right of.
func (f *tiresiasFast) rank(x int32) int {
	r := int(f.size(f.nd(x).l))
	for c, p := x, f.nd(x).par; p != 0; c, p = p, f.nd(p).par {
		if n := f.nd(p); n.r == c {
			r += int(f.size(n.l)) + 1
		}
	}
	return r
}

// prefix returns the number p of jobs at the head of the order whose GPUs
// together fit in free GPUs, the (p+1)-th's not, and the GPUs they ask.
func (f *tiresiasFast) prefix(free int) (p, used int) {
	for i := f.root; i != 0; {
		n := f.nd(i)
		if used+f.sumOf(n.l) > free {
			i = n.l
			continue
		}
		used += f.sumOf(n.l)
		p += int(f.size(n.l))
		if d := n.key.st.Job.GPUs; used+d > free {
			return p, used
		}
		used += n.key.st.Job.GPUs
		p++
		i = n.r
	}
	return p, used
}

// firstFit returns the first job of subtree i (whose first job has rank
// base) at rank from or later that asks for at most free GPUs, and its
// rank; 0 when there is none.
func (f *tiresiasFast) firstFit(i int32, base, from, free int) (int32, int) {
	if i == 0 {
		return 0, 0
	}
	n := f.nd(i)
	if n.min > free || base+int(n.size) <= from {
		return 0, 0
	}
	if x, r := f.firstFit(n.l, base, from, free); x != 0 {
		return x, r
	}
	me := base + int(f.size(n.l))
	if me >= from && n.key.st.Job.GPUs <= free {
		return i, me
	}
	return f.firstFit(n.r, me+1, from, free)
}

// runningFrom appends to out the running jobs of subtree i (first rank
// base) at rank from or later, in order, with their ranks.
func (f *tiresiasFast) runningFrom(i int32, base, from int, out []ranked) []ranked {
	if i == 0 {
		return out
	}
	n := f.nd(i)
	if n.nrun == 0 || base+int(n.size) <= from {
		return out
	}
	out = f.runningFrom(n.l, base, from, out)
	me := base + int(f.size(n.l))
	if me >= from && n.run {
		out = append(out, ranked{x: i, rank: me})
	}
	return f.runningFrom(n.r, me+1, from, out)
}

// waitingBefore appends to out the jobs of subtree i (first rank base)
// before rank to that hold no GPUs, in order, with their ranks.
func (f *tiresiasFast) waitingBefore(i int32, base, to int, out []ranked) []ranked {
	if i == 0 || base >= to {
		return out
	}
	n := f.nd(i)
	if n.size == n.nrun {
		return out // every job of the subtree runs
	}
	out = f.waitingBefore(n.l, base, to, out)
	me := base + int(f.size(n.l))
	if me < to && !n.run {
		out = append(out, ranked{x: i, rank: me})
	}
	return f.waitingBefore(n.r, me+1, to, out)
}

// ranked is a job of the order with its rank.
type ranked struct {
	x    int32 // slot+1
	rank int
}
