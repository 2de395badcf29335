package elastic

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// The fast search. The fitness is separable: the power mean is a monotone
// function of a sum of per-job terms (pxProblem.term), so maximising it is
// minimising that sum subject to the packing rules (node capacity, GPU
// types, one multi-node job per node, nodes per job). The search:
//
//  1. builds a start with fill: a multiple-choice knapsack per GPU type
//     over each job's options (keep what it holds, nothing, or r GPUs on
//     one node or on the fewest nodes that hold them) gives the counts
//     that minimise the sum when packing is ignored; place packs them in
//     four orders (largest first, one-node shapes first, most to lose on
//     the other kind of shape first, the same with jobs keeping their
//     allocation ranked among the others) and keeps the best; counts that
//     did not pack are banned and the knapsack solved again (three tries);
//  2. improves it by best-response sweeps: each job in turn takes the
//     cheapest of keeping, nothing, or a fresh shape in what the others
//     leave free, until a sweep changes nothing;
//  3. does the same from the current allocation, and keeps the better,
//     done if it reaches the first knapsack's cost: that knapsack relaxes
//     packing, so its cost bounds every allocation's sum from below (as
//     long as a job's speedup does not grow with its node count beyond
//     two, as in goodput's model);
//  4. runs a large-neighbourhood search: free every job on a few random
//     nodes (and a few random jobs), put them back by fill over the free
//     shapes or by greedy growth (the best fall in term per added GPU),
//     then best responses; keep the result if the sum fell. It stops after
//     500 + 20 x nodes tries (at most the tries knob when set), 200 + 4 x
//     nodes tries without a gain, or at the bound;
//  5. ends with best-response sweeps.
//
// Its random choices come from a generator seeded by the seed knob and the
// round, so the same snapshot gives the same plan.

// pxState is a feasible allocation under construction.
type pxState struct {
	pr    *pxProblem
	rows  [][]pxCell
	terms []float64
	free  []int   // per node
	dist  []int32 // per node: the multi-node job on it, -1 if none
	cand  []int   // nodes open to a multi-node shape (openNodes)
	// openNodes' answers by type, valid while gen (set counts changes) is
	// what it was when they were made: options asks again for every job
	// on the same state.
	gen     uint64
	open    []pxOpen
	buckets []int // scratch of openNodes' sort
}

// pxOpen is openNodes' answer for one type.
type pxOpen struct {
	gen     uint64 // s.gen it is valid for; 0 = never
	cand    []int
	maxFree int
}

// pxArena hands out the fast search's rows from blocks it keeps from round
// to round: a row, once made, is never written again (set and the searches
// only replace a job's row), so rows need no memory of their own. reset
// makes every row dead at the start of a round; release, rows made since a
// mark that nothing refers to any more (a rejected LNS try).
type pxArena struct {
	blocks [][]pxCell
	b, i   int // the next cell: blocks[b][i]
}

// pxArenaBlock is the cells of one block: 64 KiB.
const pxArenaBlock = 8192

func (a *pxArena) reset() { a.b, a.i = 0, 0 }

// mark is where the arena stands, for release.
func (a *pxArena) mark() [2]int { return [2]int{a.b, a.i} }

// release makes every row made since mark m dead.
func (a *pxArena) release(m [2]int) { a.b, a.i = m[0], m[1] }

// row is a new row of n cells (their values are the caller's to set), its
// capacity n so that no append reaches the next row.
func (a *pxArena) row(n int) []pxCell {
	for {
		if a.b == len(a.blocks) {
			a.blocks = append(a.blocks, make([]pxCell, max(pxArenaBlock, n)))
		}
		if blk := a.blocks[a.b]; a.i+n <= len(blk) {
			a.i += n
			return blk[a.i-n : a.i : a.i]
		}
		a.b, a.i = a.b+1, 0
	}
}

// pxScratch is the memory of the fast search's steps (fill, place, the
// knapsack, options, lns, searchFast), kept by the problem: the steps never
// run nested, and each overwrites what it uses.
type pxScratch struct {
	all, group, todo, failed, bestFailed []int
	removed                              []int
	picks                                []pxPick   // options' lists, back to back
	opts                                 [][]pxPick // fill's options per job of a group
	chosen                               []pxPick   // the knapsack's picks
	dp, next                             []float64
	choice                               []uint8
	at                                   []int // where each job's row of choice starts
	best, saved                          [][]pxCell
	onNode, inSet                        []bool
	banned                               map[[2]int]bool
	unitRow                              []pxCell // oneUnit's row
}

// newState is an empty allocation (no job holds anything) of its own.
func (pr *pxProblem) newState() *pxState {
	return pr.resetState(new(pxState))
}

// state is pr's kept state k (0 or 1) of the fast search, emptied.
func (pr *pxProblem) state(k int) *pxState {
	if pr.states[k] == nil {
		pr.states[k] = new(pxState)
	}
	return pr.resetState(pr.states[k])
}

// resetState makes s an empty allocation of pr, reusing its memory.
func (pr *pxProblem) resetState(s *pxState) *pxState {
	s.pr = pr
	s.rows = resize(s.rows, len(pr.jobs))
	clear(s.rows)
	s.terms = resize(s.terms, len(pr.jobs))
	s.free = resize(s.free, len(pr.nodes))
	s.dist = resize(s.dist, len(pr.nodes))
	s.cand = nil
	// openNodes' answers of the last round are stale: gen moves on, and
	// there is one per type.
	s.gen++
	if s.open != nil && len(s.open) != len(pr.types) {
		s.open = nil
	}
	for i, n := range pr.nodes {
		s.free[i], s.dist[i] = n.cap, -1
	}
	for j := range pr.jobs {
		s.terms[j] = pr.rowTerm(j, nil)
	}
	return s
}

func (s *pxState) total() float64 {
	sum := 0.0
	for _, t := range s.terms {
		sum += t
	}
	return sum
}

// fits reports whether job j can take row given the others' allocations
// (j's own must have been removed).
func (s *pxState) fits(j int, row []pxCell) bool {
	multi := len(row) > 1
	if len(row) > s.pr.pol.MaxNodes {
		return false
	}
	for _, c := range row {
		if s.pr.nodes[c.node].typ != s.pr.jobs[j].typ || s.free[c.node] < int(c.gpus) {
			return false
		}
		if multi && s.pr.pol.Interference && s.dist[c.node] >= 0 {
			return false
		}
	}
	return true
}

// set replaces job j's allocation by row (which must fit).
func (s *pxState) set(j int, row []pxCell) {
	old := s.rows[j]
	for _, c := range old {
		s.free[c.node] += int(c.gpus)
		if len(old) > 1 && s.dist[c.node] == int32(j) {
			s.dist[c.node] = -1
		}
	}
	for _, c := range row {
		s.free[c.node] -= int(c.gpus)
		if len(row) > 1 {
			s.dist[c.node] = int32(j)
		}
	}
	s.rows[j] = row
	s.terms[j] = s.pr.rowTerm(j, row)
	s.gen++
}

// openNodes fills s.cand with the nodes of type t that a multi-node shape
// may use (free GPUs, and no other multi-node job under Interference), most
// free first (in node order among equals), and returns the most free GPUs
// on any node of type t. s.cand must not be changed: it is kept for the
// next call on the same state.
func (s *pxState) openNodes(t int) int {
	if s.open == nil {
		s.open = make([]pxOpen, len(s.pr.types))
		s.gen++
	}
	o := &s.open[t]
	if o.gen == s.gen {
		s.cand = o.cand
		return o.maxFree
	}
	// A counting sort by free GPUs (at most the type's largest node), most
	// first, stable.
	gpn := s.pr.gpn[t]
	s.buckets = append(s.buckets[:0], make([]int, gpn+2)...)
	count := s.buckets
	maxFree, n := 0, 0
	for i, nd := range s.pr.nodes {
		if nd.typ != t || s.free[i] == 0 {
			continue
		}
		maxFree = max(maxFree, s.free[i])
		if !s.pr.pol.Interference || s.dist[i] < 0 {
			count[gpn-min(s.free[i], gpn)+1]++
			n++
		}
	}
	for f := 1; f < len(count); f++ {
		count[f] += count[f-1]
	}
	o.cand = slices.Grow(o.cand[:0], n)[:n]
	for i, nd := range s.pr.nodes {
		if nd.typ != t || s.free[i] == 0 || (s.pr.pol.Interference && s.dist[i] >= 0) {
			continue
		}
		k := gpn - min(s.free[i], gpn)
		o.cand[count[k]] = i
		count[k]++
	}
	o.gen, o.maxFree = s.gen, maxFree
	s.cand = o.cand
	return maxFree
}

// minNodes is the fewest open nodes (s.cand) holding r GPUs, 0 if none do.
func (s *pxState) minNodes(r int) int {
	acc := 0
	for k, i := range s.cand {
		acc += s.free[i]
		if acc >= r {
			return k + 1
		}
	}
	return 0
}

// single is r GPUs on one node of type t: the node with the fewest free
// GPUs that holds them (best fit), nil if none does.
func (s *pxState) single(t, r int) []pxCell {
	best := -1
	for i, nd := range s.pr.nodes {
		if nd.typ == t && s.free[i] >= r && (best < 0 || s.free[i] < s.free[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	row := s.pr.arena.row(1)
	row[0] = pxCell{node: int32(best), gpus: int32(r)}
	return row
}

// spread is r GPUs on exactly n of the open nodes (s.cand, filled by
// openNodes): the most free first, the last by best fit; nil if they cannot
// hold them.
func (s *pxState) spread(r, n int) []pxCell {
	if n < 2 || n > r || n > len(s.cand) || n > s.pr.pol.MaxNodes {
		return nil
	}
	if k := s.minNodes(r); k == 0 || k > n {
		return nil
	}
	row := s.pr.arena.row(n)[:0]
	acc := 0
	for i := 0; i < n-1; i++ {
		g := min(s.free[s.cand[i]], r-acc-(n-1-i))
		row = append(row, pxCell{node: int32(s.cand[i]), gpus: int32(g)})
		acc += g
	}
	rem, last := r-acc, -1
	for _, i := range s.cand[n-1:] {
		if s.free[i] >= rem && (last < 0 || s.free[i] < s.free[last]) {
			last = i
		}
	}
	row = append(row, pxCell{node: int32(last), gpus: int32(rem)})
	slices.SortFunc(row, func(a, b pxCell) int { return cmp.Compare(a.node, b.node) })
	return row
}

// bestResponse is job j's cheapest allocation given the others' (j's own
// removed): its current one kept, nothing, or a fresh shape. Ties go to
// keeping, then to fewer GPUs, then to one node.
func (s *pxState) bestResponse(j int) ([]pxCell, float64) {
	pr := s.pr
	jb := &pr.jobs[j]
	var best []pxCell
	bestT := math.Inf(1)
	if jb.keepOK && s.fits(j, jb.base) {
		best, bestT = jb.base, pr.term(j, len(jb.base), jb.baseR, false)
	}
	if t := pr.term(j, 0, 0, jb.baseR > 0); t < bestT {
		best, bestT = nil, t
	}
	if jb.typ < 0 || jb.maxR < jb.minR {
		return best, bestT
	}
	maxFree := s.openNodes(jb.typ)
	bestR, bestN := 0, 0
	k, acc := 0, 0 // s.cand[:k] is the shortest prefix holding r GPUs
	for r := jb.minR; r <= jb.maxR; r++ {
		if r <= maxFree {
			if t := pr.term(j, 1, r, true); t < bestT {
				bestT, bestR, bestN = t, r, 1
			}
		}
		for k < len(s.cand) && acc < r {
			acc += s.free[s.cand[k]]
			k++
		}
		if acc < r {
			if r >= maxFree {
				break // no larger r fits either
			}
			continue
		}
		if n := max(k, 2); r >= 2 && n <= r && n <= len(s.cand) && n <= pr.pol.MaxNodes {
			if t := pr.term(j, n, r, true); t < bestT {
				bestT, bestR, bestN = t, r, n
			}
		}
	}
	switch {
	case bestN == 1:
		best = s.single(jb.typ, bestR)
	case bestN > 1:
		best = s.spread(bestR, bestN)
	}
	return best, bestT
}

// improve runs best-response sweeps over the jobs in order until one
// changes nothing (or maxSweeps ran). A job moves only when that lowers its
// term, so the sum of terms falls with every move.
func (s *pxState) improve(maxSweeps int) {
	for range maxSweeps {
		moved := false
		for j := range s.pr.jobs {
			cur, curT := s.rows[j], s.terms[j]
			s.set(j, nil)
			row, t := s.bestResponse(j)
			if t < curT-1e-12*math.Abs(curT) {
				s.set(j, row)
				if s.terms[j] < curT {
					moved = true
					continue
				}
				s.set(j, nil)
			}
			s.set(j, cur)
		}
		if !moved {
			return
		}
	}
}

// pxOrder is an order in which place packs the fresh picks.
type pxOrder int

const (
	pxLargestFirst pxOrder = iota // most GPUs first (bin packing's rule)
	pxSingleFirst                 // one-node shapes first, then largest first
	pxRegretFirst                 // most to lose on the other kind of shape first
	pxRegretAll                   // the same, jobs keeping their allocation included
	pxOrders
)

// pxPick is a knapsack option for one job: r GPUs on n nodes, or keeping
// its current allocation.
type pxPick struct {
	r, n int
	keep bool
	cost float64 // the job's term
	alt  float64 // its term on the other kind of shape (one node or several), or moved; +Inf if none
}

// options lists job j's knapsack options, lightest first, each cheaper than
// every lighter one: keep, nothing, or r GPUs on one node or on the fewest
// nodes that hold them, except those banned: banned[{j, r}] bans r fresh
// GPUs, banned[{j, -1}] keeping. With live,
// shapes must fit what the state leaves free (j's own allocation removed);
// otherwise any count of the job's type counts as packable on
// ceil(r / GPUs per node) nodes.
//
// The list is appended to pr.scratch.picks, so that lists made one after
// the other stay valid together; the caller empties picks when it no
// longer reads any of them.
func (s *pxState) options(j int, live bool, banned map[[2]int]bool) []pxPick {
	pr := s.pr
	jb := &pr.jobs[j]
	start := len(pr.scratch.picks)
	o := pr.scratch.picks[start:]
	if jb.keepOK && (!live || s.fits(j, jb.base)) && !banned[[2]int{j, -1}] {
		// Its alternative: the same size, moved.
		o = append(o, pxPick{r: jb.baseR, n: len(jb.base), keep: true, cost: pr.term(j, len(jb.base), jb.baseR, false),
			alt: pr.term(j, max(1, (jb.baseR+pr.gpn[jb.typ]-1)/pr.gpn[jb.typ]), jb.baseR, true)})
	}
	o = append(o, pxPick{cost: pr.term(j, 0, 0, jb.baseR > 0), alt: math.Inf(1)})
	if t := jb.typ; t >= 0 {
		gpn, maxFree, capT := pr.gpn[t], pr.gpn[t], pr.typeGPUs[t]
		open := pr.typeNodes[t]
		if live {
			maxFree = s.openNodes(t)
			open, capT = len(s.cand), 0
			for _, i := range s.cand {
				capT += s.free[i]
			}
			capT = max(capT, maxFree)
		}
		k, acc := 0, 0 // live: s.cand[:k] is the shortest prefix holding r GPUs
		for r := jb.minR; r <= min(jb.maxR, capT); r++ {
			best := pxPick{r: r, cost: math.Inf(1), alt: math.Inf(1)}
			if r <= maxFree {
				best.n, best.cost = 1, pr.term(j, 1, r, true)
			}
			n := (r + gpn - 1) / gpn
			if live {
				for k < len(s.cand) && acc < r {
					acc += s.free[s.cand[k]]
					k++
				}
				if n = k; acc < r {
					n = math.MaxInt
				}
			}
			if n = max(n, 2); r >= 2 && n <= r && n <= open && n <= pr.pol.MaxNodes {
				c := pr.term(j, n, r, true)
				if c < best.cost {
					best.n, best.cost, best.alt = n, c, best.cost
				} else {
					best.alt = c
				}
			}
			if best.n > 0 && !banned[[2]int{j, r}] {
				o = append(o, best)
			}
		}
	}
	slices.SortStableFunc(o, func(a, b pxPick) int { return cmp.Compare(a.r, b.r) })
	kept := o[:0]
	for _, p := range o {
		if len(kept) == 0 || p.cost < kept[len(kept)-1].cost {
			kept = append(kept, p)
		}
	}
	// o was appended in place after picks[:start] (or, grown, elsewhere);
	// picks takes its memory either way, the list kept at its end.
	pr.scratch.picks = append(pr.scratch.picks[:start], kept...)
	return pr.scratch.picks[start : start+len(kept) : start+len(kept)]
}

// pxKnapsack solves a multiple-choice knapsack: one option per job (opts
// lightest first), at most capacity GPUs in all, least total cost. Ties go
// to lighter options. It returns the picks and their total cost; the picks
// and its tables are sc's memory.
func (sc *pxScratch) pxKnapsack(opts [][]pxPick, capacity int) ([]pxPick, float64) {
	// dp[c]: least cost of the jobs so far on at most c GPUs. Job i's row
	// covers c up to w_i, the capacity or the GPUs of the heaviest options
	// of the jobs so far if fewer: beyond it every choice of theirs fits, so
	// dp and the choice are those at w_i (and where the GPUs are many and the
	// jobs small, as at 10,000 GPUs, the table is much smaller than jobs x
	// GPUs). Reads beyond the last row's width are read at it; every entry
	// read is written first: dp's row 0 below, next's and choice's in the
	// loop.
	sc.dp, sc.next = resize(sc.dp, capacity+1), resize(sc.next, capacity+1)
	clear(sc.dp)
	dp, next := sc.dp, sc.next
	// at[i]: where job i's row starts in choice; at[i+1]-at[i]-1 is w_i.
	sc.at = resize(sc.at, len(opts)+1)
	at, w := sc.at, 0
	at[0] = 0
	for i, o := range opts {
		w = min(capacity, w+o[len(o)-1].r)
		at[i+1] = at[i] + w + 1
	}
	sc.choice = resize(sc.choice, at[len(opts)])
	choice := sc.choice
	w = 0
	for i, o := range opts {
		prev := w
		row := choice[at[i]:at[i+1]]
		w = len(row) - 1
		for c := 0; c <= w; c++ {
			best, arg := math.Inf(1), 0
			for k, p := range o {
				if p.r > c {
					break
				}
				if v := dp[min(c-p.r, prev)] + p.cost; v < best {
					best, arg = v, k
				}
			}
			next[c], row[c] = best, uint8(arg)
		}
		dp, next = next, dp
	}
	picks := resize(sc.chosen, len(opts))
	sc.chosen = picks
	c := capacity
	for i := len(opts) - 1; i >= 0; i-- {
		row := choice[at[i]:at[i+1]]
		picks[i] = opts[i][row[min(c, len(row)-1)]]
		c -= picks[i].r
	}
	return picks, dp[w]
}

// place puts jobs (none of which holds anything) on their knapsack picks,
// in the given order (jobs keeping their allocation first, except in
// pxRegretAll), each on its pick's shape if it fits, else the other kind of
// shape; a job whose current allocation is no longer free takes a fresh
// shape of the same size. Jobs that fit nowhere stay without GPUs. It
// returns the jobs that did not get their pick's term.
//
// The failed list is s.pr.scratch.failed's memory, overwritten by the next
// call.
func (s *pxState) place(jobs []int, picks []pxPick, order pxOrder) (failed []int) {
	sc := &s.pr.scratch
	todo, failed := sc.todo[:0], sc.failed[:0]
	defer func() { sc.todo, sc.failed = todo, failed }()
	for i := range jobs {
		if picks[i].r > 0 {
			todo = append(todo, i)
		}
	}
	slices.SortStableFunc(todo, func(x, y int) int {
		px, py := picks[x], picks[y]
		if order != pxRegretAll && px.keep != py.keep {
			if px.keep {
				return -1
			}
			return 1
		}
		regret := -cmp.Compare(px.alt-px.cost, py.alt-py.cost)
		switch order {
		case pxSingleFirst:
			if (px.n == 1) != (py.n == 1) {
				if px.n == 1 {
					return -1
				}
				return 1
			}
		case pxRegretFirst, pxRegretAll:
			if regret != 0 {
				return regret
			}
		}
		if c := cmp.Compare(px.r, py.r); c != 0 {
			return -c
		}
		return regret
	})
	for _, i := range todo {
		j, p := jobs[i], picks[i]
		if base := s.pr.jobs[j].base; p.keep && s.fits(j, base) {
			s.set(j, base)
			continue
		}
		t := s.pr.jobs[j].typ
		var row []pxCell
		if p.n == 1 {
			row = s.single(t, p.r)
		}
		if row == nil {
			s.openNodes(t)
			row = s.spread(p.r, max(p.n, s.minNodes(p.r), 2))
		}
		if row == nil && p.n > 1 {
			row = s.single(t, p.r)
		}
		if row != nil {
			s.set(j, row)
		}
		if s.terms[j] > p.cost*(1+1e-12) {
			failed = append(failed, j)
		}
	}
	return failed
}

// fill gives jobs, which hold nothing, allocations: per GPU type, a
// knapsack over their options (but those banned, as in options), placed in
// each order; the fresh counts that failed to place are banned too and the
// knapsack solved again, a few times.
// The best placement found stays. With live, the options are the shapes
// the state leaves free; otherwise counts of the whole type. It returns the
// first knapsacks' total cost, which (not live, every job) bounds the sum
// of terms of any allocation from below.
func (s *pxState) fill(jobs []int, live bool, banned map[[2]int]bool) (bound float64) {
	const tries = 3
	pr := s.pr
	sc := &pr.scratch
	if banned == nil {
		banned = sc.bannedMap()
	}
	for t := range pr.types {
		group := sc.group[:0]
		for _, j := range jobs {
			if pr.jobs[j].typ == t {
				group = append(group, j)
			}
		}
		sc.group = group
		if len(group) == 0 {
			continue
		}
		capacity := pr.typeGPUs[t]
		if live {
			capacity = 0
			for i, nd := range pr.nodes {
				if nd.typ == t {
					capacity += s.free[i]
				}
			}
		}
		best := sc.best[:0]
		bestT := math.Inf(1)
		// A job's options are at most keep, nothing and one per count: room
		// for them all, so that options' lists never move.
		need := 0
		for _, j := range group {
			need += 2 + max(pr.jobs[j].maxR-pr.jobs[j].minR+1, 0)
		}
		sc.opts = resize(sc.opts, len(group))
		opts := sc.opts
		for try := range tries {
			sc.picks = slices.Grow(sc.picks[:0], need)
			for i, j := range group {
				opts[i] = s.options(j, live, banned)
			}
			picks, cost := sc.pxKnapsack(opts, capacity)
			if try == 0 {
				bound += cost
			}
			failed := sc.bestFailed[:0]
			for order := range pxOrders {
				f := s.place(group, picks, order)
				sum := 0.0
				for _, j := range group {
					sum += s.terms[j]
				}
				if sum < bestT {
					bestT, failed = sum, append(failed[:0], f...)
					best = best[:0]
					for _, j := range group {
						best = append(best, s.rows[j])
					}
				}
				for _, j := range group {
					s.set(j, nil)
				}
			}
			sc.bestFailed = failed
			if len(failed) == 0 {
				break
			}
			for _, j := range failed {
				for i, g := range group {
					if g == j && !picks[i].keep {
						banned[[2]int{j, picks[i].r}] = true
					}
				}
			}
		}
		for i, j := range group {
			s.set(j, best[i])
		}
		sc.best = best
	}
	return bound
}

// bannedMap is sc's banned map, emptied: fill's when its caller bans
// nothing.
func (sc *pxScratch) bannedMap() map[[2]int]bool {
	if sc.banned == nil {
		sc.banned = map[[2]int]bool{}
	}
	clear(sc.banned)
	return sc.banned
}

// searchFast is the fast search; see the comment at the top of the file.
func (pr *pxProblem) searchFast(round int) [][]pxCell {
	const sweeps = 50
	// From the knapsack's counts.
	a := pr.state(0)
	all := resize(pr.scratch.all, len(pr.jobs))
	pr.scratch.all = all
	for j := range all {
		all[j] = j
	}
	bound := a.fill(all, false, nil)
	a.improve(sweeps)
	// From the current allocation.
	b := pr.state(1)
	for j := range pr.jobs {
		if jb := &pr.jobs[j]; jb.keepOK && b.fits(j, jb.base) {
			b.set(j, jb.base)
		}
	}
	b.improve(sweeps)
	if a.total() < b.total() {
		b = a
	}
	// Nothing beats the knapsack's bound: stop when it is reached.
	bound *= 1 + 1e-12
	if b.total() <= bound {
		return b.rows
	}
	rng := pr.reseed(round)
	iters := pxLNSIters(len(pr.nodes))
	if pr.pol.Tries > 0 {
		iters = min(iters, pr.pol.Tries)
	}
	b.lns(rng, iters, pxLNSPatience(len(pr.nodes)), bound)
	b.improve(sweeps)
	return b.rows
}

func pxLNSIters(nodes int) int    { return 500 + 20*nodes }
func pxLNSPatience(nodes int) int { return 200 + 4*nodes }

// lns is a large-neighbourhood search: it frees every job on a few random
// nodes (and a few random jobs, so that waiting ones compete too), puts
// them back by a knapsack over the shapes left free, lets each take its
// best response, and keeps the result if the sum of terms fell. It stops
// after iters tries, patience tries without a gain, or when the sum
// reaches bound.
func (s *pxState) lns(rng *rand.Rand, iters, patience int, bound float64) {
	pr := s.pr
	sc := &pr.scratch
	n, jn := len(pr.nodes), len(pr.jobs)
	sc.onNode, sc.inSet = resize(sc.onNode, n), resize(sc.inSet, jn)
	onNode, inSet := sc.onNode, sc.inSet
	clear(onNode)
	clear(inSet)
	removed, saved := sc.removed[:0], sc.saved[:0]
	defer func() { sc.removed, sc.saved = removed, saved }()
	for it, since := 0, 0; it < iters && since < patience; it, since = it+1, since+1 {
		// The rows made from here on are dead if the try is rejected.
		mark := pr.arena.mark()
		// Destroy.
		removed = removed[:0]
		for range 1 + rng.IntN(min(3, n)) {
			onNode[rng.IntN(n)] = true
		}
		for range 1 + rng.IntN(3) {
			if j := rng.IntN(jn); !inSet[j] {
				inSet[j] = true
				removed = append(removed, j)
			}
		}
		for j, row := range s.rows {
			if inSet[j] {
				continue
			}
			for _, c := range row {
				if onNode[c.node] {
					inSet[j] = true
					removed = append(removed, j)
					break
				}
			}
		}
		clear(onNode)
		slices.Sort(removed)
		saved = saved[:0]
		before := 0.0
		for _, j := range removed {
			inSet[j] = false
			saved = append(saved, s.rows[j])
			before += s.terms[j]
			s.set(j, nil)
		}
		// Repair, by turns with a knapsack and greedily, then best responses.
		// Half the knapsack repairs forbid one job to keep its allocation, so
		// that jobs keeping theirs cannot block a better packing for good.
		switch {
		case it%2 == 1:
			s.grow(removed)
		case rng.IntN(2) == 0:
			j := removed[rng.IntN(len(removed))]
			banned := sc.bannedMap()
			banned[[2]int{j, -1}] = true
			s.fill(removed, true, banned)
		default:
			s.fill(removed, true, nil)
		}
		for _, j := range removed {
			cur, curT := s.rows[j], s.terms[j]
			s.set(j, nil)
			if row, t := s.bestResponse(j); t < curT-1e-12*math.Abs(curT) {
				cur = row
			}
			s.set(j, cur)
		}
		after := 0.0
		for _, j := range removed {
			after += s.terms[j]
		}
		if after < before-1e-12*math.Abs(before) {
			if s.total() <= bound {
				return
			}
			since = 0
			continue
		}
		for _, j := range removed {
			s.set(j, nil)
		}
		for i, j := range removed {
			s.set(j, saved[i])
		}
		// Every job holds a row made before the try again.
		pr.arena.release(mark)
	}
}

// grow puts the jobs (which hold nothing) back greedily: each step moves
// one of them to the larger allocation with the best fall in its term per
// added GPU, among the shapes the state leaves free, until no step helps.
func (s *pxState) grow(jobs []int) {
	pr := s.pr
	for {
		bj, bratio := -1, 0.0
		var brow []pxCell
		for _, j := range jobs {
			cur, curT := s.rows[j], s.terms[j]
			r0 := 0
			for _, c := range cur {
				r0 += int(c.gpus)
			}
			s.set(j, nil)
			pr.scratch.picks = pr.scratch.picks[:0]
			for _, p := range s.options(j, true, nil) {
				if p.r <= r0 {
					continue
				}
				if ratio := (curT - p.cost) / float64(p.r-r0); ratio > bratio {
					var row []pxCell
					switch {
					case p.keep:
						row = pr.jobs[j].base
					case p.n == 1:
						row = s.single(pr.jobs[j].typ, p.r)
					default:
						s.openNodes(pr.jobs[j].typ)
						row = s.spread(p.r, p.n)
					}
					if row != nil {
						bj, bratio, brow = j, ratio, row
					}
				}
			}
			s.set(j, cur)
		}
		if bj < 0 {
			return
		}
		s.set(bj, nil)
		s.set(bj, brow)
	}
}
