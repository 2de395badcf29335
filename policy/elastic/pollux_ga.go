package elastic

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// The reference search: the artifact's NSGA-II (pymoo 0.4, simulator/
// pollux.py) over allocation matrices, with its two objectives (fitness and
// cluster utility), its crossover (single point over jobs, probability 0.9),
// mutation (reset rows to the current allocation, zero cells, raise cells
// towards node capacity) and repair (one multi-node job per node, replica
// and node limits in a random node order, node capacity in job order). The
// result is the population's best fitness. Individuals are stored sparsely
// (a row of cells per job, rows shared between individuals and never
// modified), so a generation costs about the number of allocated cells.
//
// Unlike the artifact, which starts each round from the previous round's
// final population, the policy starts it from the current allocation alone
// (the artifact's first round): a policy sees one snapshot, not its
// history. evolve takes a previous population for comparisons that grant
// the GA that head start (BenchmarkPolluxRound, .../5-warm-rounds).

// pxInd is one individual.
type pxInd struct {
	rows  [][]pxCell
	f     [2]float64 // minimised: -fitness, -utility
	hash  uint64
	rank  int
	crowd float64
	gen   int // 1 + the last generation it survived (settle); 0: none yet
}

// pxGA is one search's state and scratch space. A problem keeps its GA
// from round to round (pxProblem.ga): individuals that die go back to
// free, and rows live in two arenas, new ones in arenas[cur]; after each
// generation compact copies the survivors' rows to the other and makes it
// the current one, so the memory is that of a population or two, reused.
type pxGA struct {
	pr      *pxProblem
	rng     *rand.Rand
	base    [][]pxCell
	used    []int
	mark    []bool
	on      [][]int32 // per node: jobs with cells on it
	changes []pxChange
	chosen  []int32
	perm    []int

	arenas      [2]pxArena
	cur         int
	free        []*pxInd
	pop, union  []*pxInd // evolve's population and the population with its offspring
	out         []*pxInd // survive's survivors
	off, kids   []*pxInd // mate's offspring and one mating's children
	second      []*pxInd
	seen        pxSeen
	idx, win    []int      // tournament's
	pairs       [][2]int   // tournament's
	count, cur2 []int      // pxFronts': dominated-by counts, the front's indexes
	next        []int      // pxFronts': the next front's indexes
	beats       [][]int    // pxFronts': whom each dominates
	fronts      [][]*pxInd // pxFronts' fronts, back to back in frontMem
	frontMem    []*pxInd
	crowdIdx    []int
}

// pxSeen is a set of individuals by hash (their rows compared on a hash
// match): a chain per hash through next, reused call to call.
type pxSeen struct {
	head map[uint64]int32
	ind  []*pxInd
	next []int32
}

func (sn *pxSeen) reset() {
	if sn.head == nil {
		sn.head = map[uint64]int32{}
	}
	clear(sn.head)
	sn.ind, sn.next = sn.ind[:0], sn.next[:0]
}

func (sn *pxSeen) add(in *pxInd) {
	prev, ok := sn.head[in.hash]
	if !ok {
		prev = -1
	}
	sn.head[in.hash] = int32(len(sn.ind))
	sn.ind = append(sn.ind, in)
	sn.next = append(sn.next, prev)
}

// has reports whether the set holds individual rows equal to in's.
func (sn *pxSeen) has(in *pxInd) bool {
	i, ok := sn.head[in.hash]
	for ok && i >= 0 {
		if pxEqual(sn.ind[i].rows, in.rows) {
			return true
		}
		i = sn.next[i]
	}
	return false
}

// newInd is a new individual (all else zero) whose rows are a copy of the
// list rows (the rows themselves shared), from the free ones when it can.
func (g *pxGA) newInd(rows [][]pxCell) *pxInd {
	var in *pxInd
	if n := len(g.free); n > 0 {
		in, g.free = g.free[n-1], g.free[:n-1]
		*in = pxInd{rows: append(in.rows[:0], rows...)}
	} else {
		in = &pxInd{rows: slices.Clone(rows)}
	}
	return in
}

// row is a new row of n cells (length n, capacity n) from the current
// arena.
func (g *pxGA) row(n int) []pxCell { return g.arenas[g.cur].row(n) }

// compact copies the rows of pop to the other arena and makes it current:
// rows made since the last compaction that no survivor holds are dead.
func (g *pxGA) compact(pop []*pxInd) {
	to := &g.arenas[1-g.cur]
	to.reset()
	for _, in := range pop {
		for j, row := range in.rows {
			if len(row) > 0 {
				r := to.row(len(row))
				copy(r, row)
				in.rows[j] = r
			}
		}
	}
	g.cur = 1 - g.cur
}

type pxChange struct{ job, node, gpus int32 }

const (
	pxCrossoverProb = 0.9 // pymoo's default for the artifact's Crossover
	pxResetProb     = 0.1 // mutation (1): a row back to the current allocation
	pxZeroRowProb   = 0.1 // mutation (2): a row chosen for zeroing...
	pxZeroCellProb  = 0.1 // ...and each of its cells zeroed
	pxMaxMatings    = 100 // pymoo's tries to fill the offspring with new individuals
)

func (pr *pxProblem) searchGA(rng *rand.Rand) [][]pxCell {
	best, _ := pr.evolve(rng, nil, false)
	return best
}

// gaFor is pr's GA, made at its first search and reset for this one.
func (pr *pxProblem) gaFor(rng *rand.Rand) *pxGA {
	if pr.ga == nil {
		pr.ga = new(pxGA)
	}
	g := pr.ga
	g.pr, g.rng = pr, rng
	g.base = resize(g.base, len(pr.jobs))
	for j := range pr.jobs {
		g.base[j] = pr.jobs[j].base
	}
	g.used = resize(g.used, len(pr.nodes))
	g.mark = resize(g.mark, len(pr.nodes))
	if cap(g.on) < len(pr.nodes) {
		g.on = append(g.on[:cap(g.on)], make([][]int32, len(pr.nodes)-cap(g.on))...)
	}
	g.on = g.on[:len(pr.nodes)]
	// Every individual of the last search is free, every row dead.
	g.free = append(g.free, g.pop...)
	g.pop = g.pop[:0]
	g.arenas[0].reset()
	g.arenas[1].reset()
	return g
}

// evolve runs the GA from the current allocation and the individuals of
// init (a previous round's population, as the artifact keeps; nil for
// none), and returns the best individual (pr's memory, valid until its
// next search) and, with keep, the final population (memory of its own).
func (pr *pxProblem) evolve(rng *rand.Rand, init [][][]pxCell, keep bool) ([][]pxCell, [][][]pxCell) {
	g := pr.gaFor(rng)
	pop := g.union[:0]
	g.seen.reset()
	for k := -1; k < len(init); k++ {
		rows := g.base
		if k >= 0 {
			rows = init[k]
		}
		in := g.newInd(rows)
		g.repair(in.rows)
		in.hash = pxHash(in.rows)
		if g.seen.has(in) {
			g.free = append(g.free, in)
			continue
		}
		g.seen.add(in)
		g.eval(in)
		pop = append(pop, in)
	}
	g.union = pop
	pop = g.settle(pop, min(len(pop), pr.pol.Pop), 0)
	for gen := 1; gen < pr.pol.Gens; gen++ {
		off := g.mate(pop, pr.pol.Pop)
		for _, o := range off {
			g.eval(o)
		}
		g.union = append(append(g.union[:0], pop...), off...)
		pop = g.settle(g.union, pr.pol.Pop, gen)
	}
	g.pop = append(g.pop[:0], pop...)
	best := pop[0]
	for _, in := range pop {
		if in.rank == 0 && (in.f[0] < best.f[0] || (in.f[0] == best.f[0] && in.f[1] < best.f[1])) {
			best = in
		}
	}
	var final [][][]pxCell
	if keep {
		final = make([][][]pxCell, len(pop))
		for i, in := range pop {
			final[i] = make([][]pxCell, len(in.rows))
			for j, row := range in.rows {
				final[i][j] = slices.Clone(row)
			}
		}
	}
	return best.rows, final
}

// settle is survive on all, the population of generation gen: the
// individuals of all that do not survive are freed, and the survivors'
// rows compacted. The survivors are g.out's memory.
func (g *pxGA) settle(all []*pxInd, n, gen int) []*pxInd {
	pop := g.survive(all, n)
	mark := gen + 1 // a new individual's gen is 0
	for _, in := range pop {
		in.gen = mark
	}
	for _, in := range all {
		if in.gen != mark {
			g.free = append(g.free, in)
		}
	}
	g.compact(pop)
	return pop
}

func (g *pxGA) eval(in *pxInd) {
	in.f = [2]float64{-g.pr.fitness(in.rows), -g.pr.utility(in.rows, g.mark)}
}

func pxHash(rows [][]pxCell) uint64 {
	h := uint64(14695981039346656037)
	for j, row := range rows {
		for _, c := range row {
			h ^= uint64(j)<<40 ^ uint64(c.node)<<16 ^ uint64(c.gpus)
			h *= 1099511628211
			h ^= h >> 29
		}
	}
	return h
}

func pxEqual(a, b [][]pxCell) bool {
	for j := range a {
		if !slices.Equal(a[j], b[j]) {
			return false
		}
	}
	return true
}

// mate makes n new individuals (fewer if it keeps producing duplicates):
// binary tournaments pick parents, then crossover, mutation and repair;
// duplicates of the population or of each other are dropped.
//
// The offspring are g.off's memory; the children dropped are freed.
func (g *pxGA) mate(pop []*pxInd, n int) []*pxInd {
	seen := &g.seen
	seen.reset()
	for _, in := range pop {
		seen.add(in)
	}
	off := g.off[:0]
	for try := 0; len(off) < n && try < pxMaxMatings; try++ {
		left := n - len(off)
		parents := g.tournament(pop, (left+1)/2)
		kids, second := g.kids[:0], g.second[:0]
		for _, pp := range parents {
			a, b := pop[pp[0]].rows, pop[pp[1]].rows
			k1, k2 := g.newInd(a), g.newInd(b)
			c1, c2 := k1.rows, k2.rows
			if g.rng.Float64() < pxCrossoverProb {
				pt := g.rng.IntN(len(a))
				copy(c1[:pt], b[:pt])
				copy(c2[:pt], a[:pt])
			}
			kids = append(kids, k1)
			second = append(second, k2)
		}
		kids = append(kids, second...)
		g.kids, g.second = kids, second
		for _, k := range kids {
			g.mutate(k.rows)
			g.repair(k.rows)
			k.hash = pxHash(k.rows)
			if len(off) == n || seen.has(k) {
				g.free = append(g.free, k)
				continue
			}
			seen.add(k)
			off = append(off, k)
		}
	}
	g.off = off
	return off
}

// tournament runs binary tournaments on random permutations of pop and
// returns matings pairs of winners.
func (g *pxGA) tournament(pop []*pxInd, matings int) [][2]int {
	need := 4 * matings
	idx := g.idx[:0]
	for len(idx) < need {
		// rng.Perm(len(pop)), in idx's memory: the same draws.
		k := len(idx)
		for i := range len(pop) {
			idx = append(idx, i)
		}
		p := idx[k:]
		g.rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	}
	g.idx = idx
	g.win = resize(g.win, 2*matings)
	win := g.win
	for i := range win {
		a, b := idx[2*i], idx[2*i+1]
		switch {
		case pxDominates(pop[a].f, pop[b].f):
			win[i] = a
		case pxDominates(pop[b].f, pop[a].f):
			win[i] = b
		case pop[a].crowd > pop[b].crowd:
			win[i] = a
		case pop[b].crowd > pop[a].crowd:
			win[i] = b
		case g.rng.IntN(2) == 0:
			win[i] = a
		default:
			win[i] = b
		}
	}
	g.pairs = resize(g.pairs, matings)
	pairs := g.pairs
	for m := range pairs {
		pairs[m] = [2]int{win[2*m], win[2*m+1]}
	}
	return pairs
}

func pxDominates(a, b [2]float64) bool {
	return a[0] <= b[0] && a[1] <= b[1] && (a[0] < b[0] || a[1] < b[1])
}

// each calls f for every i in [0, n) drawn independently with probability
// p, skipping geometrically so that it costs the number drawn.
func (g *pxGA) each(n int, p float64, f func(i int)) {
	if p <= 0 || n <= 0 {
		return
	}
	if p >= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	lq := math.Log1p(-p)
	for i := -1; ; {
		i += 1 + int(math.Log1p(-g.rng.Float64())/lq)
		if i >= n {
			return
		}
		f(i)
	}
}

// mutate is the artifact's mutation, in place on rows (whose row slices it
// replaces, never modifies).
func (g *pxGA) mutate(rows [][]pxCell) {
	pr := g.pr
	// (1) Reset some rows to the current allocation.
	for j := range rows {
		if g.rng.Float64() < pxResetProb {
			rows[j] = g.base[j]
		}
	}
	// (2) Zero some cells of some rows.
	for j, row := range rows {
		if g.rng.Float64() >= pxZeroRowProb || len(row) == 0 {
			continue
		}
		out := g.row(len(row))[:0]
		cut := false
		for _, c := range row {
			if g.rng.Float64() < pxZeroCellProb {
				cut = true
				continue
			}
			out = append(out, c)
		}
		if cut {
			rows[j] = out
		}
	}
	// (3) On each node with a free GPU, draw each job of its type with
	// probability 1/(jobs of that type) and, independently, each job on it
	// with probability 1/(jobs on it); a drawn job's count there becomes
	// uniform between what it has and the node's capacity.
	clear(g.used)
	for n := range g.on {
		g.on[n] = g.on[n][:0]
	}
	for j, row := range rows {
		for _, c := range row {
			g.used[c.node] += int(c.gpus)
			g.on[c.node] = append(g.on[c.node], int32(j))
		}
	}
	g.changes = g.changes[:0]
	for n, nd := range pr.nodes {
		jobs := pr.typeJobs[nd.typ]
		if nd.cap-g.used[n] < 1 || len(jobs) == 0 {
			continue
		}
		g.chosen = g.chosen[:0]
		g.each(len(jobs), 1/float64(len(jobs)), func(i int) { g.chosen = append(g.chosen, int32(jobs[i])) })
		on := g.on[n]
		g.each(len(on), 1/float64(max(len(on), 1)), func(i int) {
			if pr.jobs[on[i]].typ == nd.typ {
				g.chosen = append(g.chosen, on[i])
			}
		})
		slices.Sort(g.chosen)
		for _, j := range slices.Compact(g.chosen) {
			cur := 0
			for _, c := range rows[j] {
				if c.node == int32(n) {
					cur = int(c.gpus)
				}
			}
			if cur > nd.cap {
				continue
			}
			v := cur + g.rng.IntN(nd.cap-cur+1)
			if v != cur {
				g.changes = append(g.changes, pxChange{job: j, node: int32(n), gpus: int32(v)})
			}
		}
	}
	slices.SortFunc(g.changes, func(a, b pxChange) int {
		if c := cmp.Compare(a.job, b.job); c != 0 {
			return c
		}
		return cmp.Compare(a.node, b.node)
	})
	for i := 0; i < len(g.changes); {
		j := g.changes[i].job
		k := i
		for k < len(g.changes) && g.changes[k].job == j {
			k++
		}
		rows[j] = pxApplyChanges(g.row(len(rows[j]) + k - i)[:0], rows[j], g.changes[i:k])
		i = k
	}
}

// pxApplyChanges returns row with the given (node-sorted) counts set,
// appended to out (room for len(row)+len(ch) cells).
func pxApplyChanges(out, row []pxCell, ch []pxChange) []pxCell {
	i := 0
	for _, c := range ch {
		for i < len(row) && row[i].node < c.node {
			out = append(out, row[i])
			i++
		}
		if i < len(row) && row[i].node == c.node {
			i++
		}
		if c.gpus > 0 {
			out = append(out, pxCell{node: c.node, gpus: c.gpus})
		}
	}
	return append(out, row[i:]...)
}

// repair is the artifact's repair, in place on rows.
func (g *pxGA) repair(rows [][]pxCell) {
	pr := g.pr
	// At most one multi-node job per node: the first in job order keeps it.
	if pr.pol.Interference {
		clear(g.mark)
		for j, row := range rows {
			if len(row) <= 1 {
				continue
			}
			out := g.row(len(row))[:0]
			cut := false
			for _, c := range row {
				if g.mark[c.node] {
					cut = true
					continue
				}
				g.mark[c.node] = true
				out = append(out, c)
			}
			if cut {
				rows[j] = out
			}
		}
	}
	// Replica and node limits, counted over the nodes in a random order.
	for j, row := range rows {
		r := 0
		for _, c := range row {
			r += int(c.gpus)
		}
		maxR := pr.jobs[j].maxR
		if r <= maxR && len(row) <= pr.pol.MaxNodes {
			continue
		}
		g.perm = g.perm[:0]
		for i := range row {
			g.perm = append(g.perm, i)
		}
		g.rng.Shuffle(len(g.perm), func(a, b int) { g.perm[a], g.perm[b] = g.perm[b], g.perm[a] })
		out := g.row(len(row))[:0]
		acc := 0
		for _, i := range g.perm {
			k := min(int(row[i].gpus), maxR-acc)
			if k <= 0 {
				continue
			}
			acc += k
			if len(out) < pr.pol.MaxNodes {
				out = append(out, pxCell{node: row[i].node, gpus: int32(k)})
			}
		}
		slices.SortFunc(out, func(a, b pxCell) int { return cmp.Compare(a.node, b.node) })
		rows[j] = out
	}
	// Node capacity, first come first served in job order (and only nodes
	// of the job's type).
	clear(g.used)
	for j, row := range rows {
		var out []pxCell
		cut := false
		for i, c := range row {
			avail := 0
			if pr.nodes[c.node].typ == pr.jobs[j].typ {
				avail = pr.nodes[c.node].cap - g.used[c.node]
			}
			k := min(int(c.gpus), avail)
			if k != int(c.gpus) && !cut {
				cut = true
				out = append(g.row(len(row))[:0], row[:i]...)
			}
			if k > 0 {
				g.used[c.node] += k
				if cut {
					out = append(out, pxCell{node: c.node, gpus: int32(k)})
				}
			}
		}
		if cut {
			rows[j] = out
		}
	}
	// A job that gets GPUs gets at least its minimum.
	for j, row := range rows {
		r := 0
		for _, c := range row {
			r += int(c.gpus)
		}
		if r > 0 && r < pr.jobs[j].minR {
			rows[j] = nil
		}
	}
}

// survive keeps n individuals: whole non-dominated fronts in rank order,
// the last one cut by crowding distance (ties in random order). It sets
// each survivor's rank and crowding distance.
//
// The survivors are g.out's memory.
func (g *pxGA) survive(pop []*pxInd, n int) []*pxInd {
	out := g.out[:0]
	defer func() { g.out = out }()
	for rank, front := range g.pxFronts(pop) {
		g.pxCrowding(front)
		for _, in := range front {
			in.rank = rank
		}
		if len(out)+len(front) > n {
			g.rng.Shuffle(len(front), func(a, b int) { front[a], front[b] = front[b], front[a] })
			slices.SortStableFunc(front, func(a, b *pxInd) int { return -cmp.Compare(a.crowd, b.crowd) })
			front = front[:n-len(out)]
		}
		out = append(out, front...)
		if len(out) == n {
			break
		}
	}
	return out
}

// pxFronts sorts pop into fronts (Deb's fast non-dominated sort). The
// fronts are g's memory.
func (g *pxGA) pxFronts(pop []*pxInd) [][]*pxInd {
	n := len(pop)
	g.count = resize(g.count, n)
	count := g.count
	clear(count)
	if cap(g.beats) < n {
		g.beats = append(g.beats[:cap(g.beats)], make([][]int, n-cap(g.beats))...)
	}
	beats := g.beats[:n]
	for a := range beats {
		// Room for all: the memory stays the same from call to call.
		beats[a] = slices.Grow(beats[a][:0], n)
	}
	// Every individual is in one front: room for all of them.
	mem := slices.Grow(g.frontMem[:0], n)
	g.frontMem = mem
	cur, next := g.cur2[:0], g.next[:0]
	defer func() { g.cur2, g.next = cur, next }()
	for a := range n {
		for b := range n {
			if pxDominates(pop[a].f, pop[b].f) {
				beats[a] = append(beats[a], b)
			} else if pxDominates(pop[b].f, pop[a].f) {
				count[a]++
			}
		}
		if count[a] == 0 {
			cur = append(cur, a)
		}
	}
	fronts := g.fronts[:0]
	for len(cur) > 0 {
		front := mem[len(mem) : len(mem)+len(cur) : len(mem)+len(cur)]
		mem = mem[:len(mem)+len(cur)]
		next = next[:0]
		for i, a := range cur {
			front[i] = pop[a]
			for _, b := range beats[a] {
				if count[b]--; count[b] == 0 {
					next = append(next, b)
				}
			}
		}
		slices.Sort(next)
		fronts = append(fronts, front)
		cur, next = next, cur
	}
	g.fronts = fronts
	return fronts
}

// crowding sets the crowding distance of each individual of a front, as
// pymoo 0.4 computes it: the normalised gap between its neighbours summed
// over objectives, averaged; the extremes (and fronts of two) get 1e14.
func (g *pxGA) pxCrowding(front []*pxInd) {
	const far = 1e14
	n := len(front)
	if n <= 2 {
		for _, in := range front {
			in.crowd = far
		}
		return
	}
	for _, in := range front {
		in.crowd = 0
	}
	g.crowdIdx = resize(g.crowdIdx, n)
	idx := g.crowdIdx
	for k := range 2 {
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(front[a].f[k], front[b].f[k]) })
		lo, hi := front[idx[0]].f[k], front[idx[n-1]].f[k]
		norm := hi - lo
		if norm == 0 {
			continue // all equal: no contribution, not even at the extremes
		}
		for i, a := range idx {
			if i == 0 || i == n-1 {
				front[a].crowd = math.Inf(1)
				continue
			}
			front[a].crowd += (front[idx[i+1]].f[k] - front[idx[i-1]].f[k]) / norm / 2
		}
	}
	for _, in := range front {
		if math.IsInf(in.crowd, 1) {
			in.crowd = far
		}
	}
}
