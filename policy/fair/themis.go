package fair

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// themisPolicies registers the policies this file defines; Policies calls it.
func themisPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "themis",
		Summary: "Themis (NSDI'20): finish-time fairness; each lease, GPUs whose lease ended are auctioned among " +
			"the jobs with the worst rho by a partial-allocation auction, the rest go to the others",
		Knobs: "f=0.8: fairness knob: the auction is offered to the ceil((1-f) x N) contending jobs with the " +
			"worst rho (f=0: all of them; f near 1: only the worst); lease=600: seconds a job keeps GPUs it won " +
			"before they go back to auction",
		Defaults: DefaultThemis,
		Build:    contract.Typed(DefaultThemis, func(_ contract.Context, k Themis) (*Themis, error) { return NewThemis(k) }),
	})
}

// Themis is finish-time-fair scheduling (Mahajan et al., NSDI'20), with
// each job as an app.
//
// Finish-time fairness rho = T_shared / T_independent. T_independent is the
// job's run time on its own 1/N share of the cluster (N = active jobs, C
// GPUs): its whole work on its GPU count n, stretched by n·N/C when the
// share C/N is below n (time-slicing a rigid job). T_shared with k GPUs
// from now is its age plus its remaining time on k GPUs; with none it is
// its age, one more lease and its remaining time on n.
//
// Each round, running jobs whose lease (Lease seconds from their last
// start) has not ended keep their GPUs. The other GPUs are offered to the
// ceil((1-F)·M) jobs with the worst current rho among the M contenders
// (jobs not keeping GPUs). Each bids rho for each GPU count it can use;
// the auction picks the counts maximising the product of 1/rho (exactly,
// by dynamic programming over GPUs), then applies Themis' partial
// allocation: winner i keeps a fraction c_i of its GPUs, c_i being the
// others' product of 1/rho with i present over the same without i. An
// elastic winner keeps floor(c_i·k) GPUs (nothing below its minimum); a
// rigid one keeps all when c_i >= 1/2 and none otherwise [our choice: a
// gang cannot run on a fraction]. What is withheld or unsold goes to the
// remaining jobs, worst rho first (work conservation).
type Themis struct {
	F     float64 `knob:"f"`     // in [0, 1)
	Lease float64 `knob:"lease"` // seconds, > 0

	// Memory reused from round to round.
	auction themisAuction // the auction's tables
	bids    []themisBid
	counts  []int     // the bids' counts, one after the other
	gains   []float64 // and gains
	order   []*engine.Status
	rho     map[*engine.Status]float64
	explain explain.Scratch
	run     []engine.Assignment // the last plan's Run
	pool    alloc.Pool          // the round's free GPUs, kept (issue 19)
	shapes  packedShapes
	// kept is what the rounds planned from what changed read (issue 19).
	kept roster.Roster
	got  []int         // the GPUs the plan gives each bid
	lazy explain.Queue // the waiting jobs' reasons, worked out when read
	key  func(int, *engine.Status) float64
}

// DefaultThemis holds Themis' default knobs.
var DefaultThemis = Themis{F: 0.8, Lease: 600}

// NewThemis builds Themis with the knobs k holds, refusing values out of
// range.
func NewThemis(k Themis) (*Themis, error) {
	if k.F < 0 || k.F >= 1 {
		return nil, fmt.Errorf("policy themis: f must be in [0, 1), got %v", k.F)
	}
	if !(k.Lease > 0) {
		return nil, fmt.Errorf("policy themis: lease must be > 0 seconds, got %v", k.Lease)
	}
	return &k, nil
}

// Name implements engine.Policy.
func (t *Themis) Name() string { return "themis" }

// themisBid is one contender: rho for each GPU count it can hold.
type themisBid struct {
	st     *engine.Status
	counts []int     // usable GPU counts, ascending
	gain   []float64 // log(rho(0) / rho(count))
	rho    float64   // rho now, on what it holds
}

// Rho returns st's finish-time fairness if it holds k GPUs from now on
// (k = 0: it waits one more lease), with active jobs sharing the cluster.
func (t *Themis) Rho(s *engine.Snapshot, st *engine.Status, k, active int) float64 {
	age := s.Now - st.Job.Submit
	var sh packedShapes
	if k == 0 {
		return rhoOf(age+t.Lease+sh.remaining(s, st, st.Job.GPUs, s.Progress(st)), t.independent(s, st, active, &sh))
	}
	return rhoOf(age+sh.remaining(s, st, k, s.Progress(st)), t.independent(s, st, active, &sh))
}

// independent is st's T_independent with active jobs sharing the cluster
// (it does not depend on what st holds, so Schedule computes it once per job).
func (t *Themis) independent(s *engine.Snapshot, st *engine.Status, active int, sh *packedShapes) float64 {
	n := st.Job.GPUs
	share := float64(s.Available("", "")) / float64(max(active, 1))
	alone := sh.remaining(s, st, n, 0)
	return alone * math.Max(1, float64(n)/share)
}

// rhoOf is rho = T_shared / T_independent, 1 when T_independent is not
// positive.
func rhoOf(tsh, tid float64) float64 {
	if !(tid > 0) {
		return 1
	}
	return tsh / tid
}

// packedShapes keeps the packed allocations the rounds ask the model about
// (engine.Snapshot.Remaining and alloc.Rate build one per call), by GPU
// type, count and GPUs per node: kept from round to round, so that a
// steady round allocates none (issue 19); a cluster whose nodes change
// asks for shapes of other keys. Models keep no Alloc's PerNode
// (perf.Model), so one shape serves every call.
type packedShapes []packedShape

type packedShape struct {
	gpuType string
	n       int
	perNode int
	a       perf.Alloc
}

// maxShapes bounds the shapes kept: past it they are forgotten and made
// again as asked.
const maxShapes = 256

// remaining is st's time to finish from progress p on k packed GPUs of the
// type it runs on (or asks for): Snapshot.Remaining's computation, with the
// shape kept in sh.
func (sh *packedShapes) remaining(s *engine.Snapshot, st *engine.Status, k int, p float64) float64 {
	t := st.Alloc.GPUType
	if t == "" {
		t = st.Job.GPUType
	}
	if t == "" {
		t = s.Cluster.GPUTypes()[0]
	}
	return perf.Remaining(s.Model, st.Job, sh.packed(t, k, s.GPUsPerNode[t]), p)
}

// packed is perf.Packed(t, k, perNode), kept.
func (sh *packedShapes) packed(t string, k, perNode int) perf.Alloc {
	for i := range *sh {
		if e := &(*sh)[i]; e.n == k && e.perNode == perNode && e.gpuType == t {
			return e.a
		}
	}
	if len(*sh) >= maxShapes {
		clear(*sh)
		*sh = (*sh)[:0]
	}
	a := perf.Packed(t, k, perNode)
	*sh = append(*sh, packedShape{t, k, perNode, a})
	return a
}

// Incremental implements engine.IncrementalPolicy: a round in which every
// active job is rigid and fits, and at most one waits, is planned from
// what changed (keptRound). Any other round is planned in full: the order
// in which the auction hands out GPUs moves with every contender's rho,
// which moves with its age and progress and with the number of active jobs.
func (t *Themis) Incremental() bool { return true }

// JobsOnDemand implements engine.JobsOnDemand: a round planned from what
// changed reads the roster (its waiting jobs, its count of the active
// ones), not the list of the active jobs; a full round asks for the list
// first (Snapshot.ActiveJobs), and so does the roster when it rebuilds.
func (t *Themis) JobsOnDemand() bool { return true }

// ExplainsWhenRead implements engine.ExplainsWhenRead: the reasons of the
// jobs a round leaves waiting are worked out when read (explain.Queue) in
// its rounds planned in full too, the first included.
func (t *Themis) ExplainsWhenRead() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed.
func (t *Themis) KeptRounds() int { return t.kept.Kept }

// ProgressOnDemand implements engine.ProgressOnDemand: Themis reads a
// job's progress (Snapshot.Progress) only for its bid. A round planned in
// full bids for every contender, so it reads the progress of every running
// job whose lease has ended, as the auction's rule must (a contender's rho
// moves with its progress); the jobs inside their lease keep their GPUs
// unread. A round planned from what changed reads only its waiting job's.
func (t *Themis) ProgressOnDemand() bool { return true }

// keptRound plans s from what changed when it can: when every active job
// is rigid and they all fit at once, every job that has a bid runs on its
// count whatever the auction decides (the auction and the leftovers hand
// out all the GPUs asked for, and the jobs keeping a lease keep theirs).
// A running job outside its lease has run a whole lease, so its age and
// its time to finish are positive and its bid is never empty. Which
// waiting jobs start first decides where the placer puts them, and that
// order is the auction's, which needs every contender's rho: so only a
// round with at most one waiting job, whose bid is not empty, is planned
// here.
func (t *Themis) keptRound(s *engine.Snapshot) (engine.Plan, bool) {
	if t.kept.Odd == nil {
		t.kept.Odd = elastic
	}
	if !t.kept.Begin(s) || !t.kept.Fits(s) || len(t.kept.Waiting()) > 1 {
		return engine.Plan{}, false
	}
	run := t.run[:0]
	for _, st := range t.kept.Waiting() {
		if len(t.bid(s, st, t.kept.Active()).counts) == 0 {
			return engine.Plan{}, false // it waits, with a reason
		}
		run = append(run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: st.Job.GPUType})
	}
	t.run = run
	t.kept.Kept++
	return engine.Plan{Run: run, Keep: true}, true
}

// elastic marks the jobs keptRound cannot plan: the auction may give an
// elastic job any of its counts.
func elastic(_ *engine.Snapshot, st *engine.Status) bool { return st.Job.Elastic() }

// bid is st's bid with active jobs sharing the cluster, its counts and
// gains in t.counts' and t.gains' memory.
func (t *Themis) bid(s *engine.Snapshot, st *engine.Status, active int) themisBid {
	// rho(0) and rho(n) share the time to finish on n GPUs, and
	// T_independent does not depend on the count.
	tid := t.independent(s, st, active, &t.shapes)
	age := s.Now - st.Job.Submit
	n := st.Job.GPUs
	progress := s.Progress(st)
	remN := t.shapes.remaining(s, st, n, progress)
	rhoK := func(k int) float64 {
		if k == n {
			return rhoOf(age+remN, tid)
		}
		return rhoOf(age+t.shapes.remaining(s, st, k, progress), tid)
	}
	r0 := rhoOf(age+t.Lease+remN, tid)
	b := themisBid{st: st, rho: r0}
	if held := len(st.GPUs); held > 0 {
		b.rho = rhoK(held)
	}
	from := len(t.counts)
	for k := st.Job.MinGPUs; k <= st.Job.MaxGPUs; k++ {
		if !st.Job.Elastic() && k != n {
			continue
		}
		g := math.Log(r0 / rhoK(k))
		if math.IsNaN(g) || math.IsInf(g, 0) {
			continue // cannot run on k GPUs
		}
		t.counts, t.gains = append(t.counts, k), append(t.gains, g)
	}
	b.counts, b.gain = t.counts[from:len(t.counts):len(t.counts)], t.gains[from:len(t.gains):len(t.gains)]
	return b
}

// Schedule implements engine.Policy.
func (t *Themis) Schedule(s *engine.Snapshot) engine.Plan {
	t.counts, t.gains = t.counts[:0], t.gains[:0]
	t.lazy.Next(s.Round)
	if plan, ok := t.keptRound(s); ok {
		return plan
	}
	free := &t.pool
	free.Reset(s)
	plan := engine.Plan{Run: t.run[:0]} // the engine keeps none of a plan's memory
	bids := t.bids[:0]
	t.counts, t.gains = t.counts[:0], t.gains[:0]
	jobs := s.ActiveJobs() // a round planned in full reads them all
	active := len(jobs)
	for _, st := range jobs {
		if len(st.GPUs) > 0 && s.Now-st.LastStart < t.Lease {
			if a, ok := free.Take(st, len(st.GPUs)); ok {
				plan.Run = append(plan.Run, a)
				continue
			}
		}
		bids = append(bids, t.bid(s, st, active))
	}
	// The GPUs up less those the leased jobs keep, as the pool counts them:
	// jobs holding parts of GPUs share them, and taking each one's GPUs
	// from the count counted a shared GPU once per job (four half-GPU
	// jobs of 2 GPUs on 2 GPUs offered -6, and the auction panicked).
	offered := free.Room()
	t.bids = bids
	slices.SortStableFunc(bids, func(a, b themisBid) int { return -cmp.Compare(a.rho, b.rho) })
	m := int(math.Ceil((1 - t.F) * float64(len(bids))))
	if len(bids) > 0 {
		m = max(m, 1)
	}
	bidders, rest := bids[:m], bids[m:]
	sold, kept := t.auction.run(bidders, offered)
	// Leftovers, worst rho first: bidders who won nothing, the jobs that
	// did not bid, and last the winners whose GPUs were all withheld.
	shrunk := 0 // contenders that held GPUs and get fewer or none
	for _, b := range bids {
		if len(b.st.GPUs) > 0 {
			shrunk++
		}
	}
	got := resize(t.got, len(bids))
	clear(got)
	t.got = got
	take := func(i, k int) bool { // bid i, on k GPUs
		b := bids[i]
		a, ok := free.Take(b.st, k)
		if ok {
			plan.Run = append(plan.Run, a)
			got[i] = a.GPUs
			if held := len(b.st.GPUs); held > 0 && a.GPUs >= held {
				shrunk--
			}
		}
		return ok
	}
	leftover := func(i int) {
		b := bids[i]
		for k := len(b.counts) - 1; k >= 0; k-- {
			if take(i, b.counts[k]) {
				break
			}
		}
	}
	for i := range bidders {
		if sold[i] > 0 && kept[i] > 0 && !take(i, kept[i]) {
			// The auction counts the GPUs of every type together: a
			// count no type (or site) holds alone takes the largest of
			// the bid's smaller counts that one does. Left out, an
			// elastic job alone on a cluster of two types waited for
			// ever beside enough free GPUs of either.
			b := bids[i]
			for k := len(b.counts) - 1; k >= 0; k-- {
				if b.counts[k] < kept[i] && take(i, b.counts[k]) {
					break
				}
			}
		}
	}
	for i := range bidders {
		if sold[i] == 0 {
			leftover(i)
		}
	}
	for i := range rest {
		leftover(m + i)
	}
	for i := range bidders {
		if sold[i] > 0 && kept[i] == 0 {
			leftover(i)
		}
	}
	t.run = plan.Run
	if len(plan.Run) == len(jobs) && shrunk == 0 {
		// Every job runs on at least what it holds: no job needs a
		// reason (explain.PlanAppend would find none, at a cost).
		return plan
	}
	t.order = t.order[:0]
	for _, b := range bids {
		t.order = append(t.order, b.st)
	}
	if explain.Lazy(s) {
		// The waiting and the preempted jobs' reasons are worked out when
		// read (Order.Preempted: themisTerms reads nothing of the job, its
		// rho is the round's key). A preempted job's reason was written
		// here, a new string for each, in rounds 1 s apart at 10,000 GPUs.
		if t.key == nil {
			t.key = func(i int, _ *engine.Status) float64 { return t.bids[i].rho }
		}
		if t.lazy.Record(s, &plan, &explain.Order{Jobs: t.order, Given: got, Key: t.key, Figs: [2]int{m, len(bids)}, Terms: themisTerms, Preempted: true}) {
			plan.Explain = &t.lazy
			return plan
		}
	}
	if t.rho == nil {
		t.rho = map[*engine.Status]float64{}
	}
	empty(t.rho)
	for _, b := range bids {
		t.rho[b.st] = b.rho
	}
	t.explain.PlanAppend(s, &plan, t.order, func(buf []byte, st *engine.Status) []byte {
		return themisTerms(buf, st, t.rho[st], [2]int{m, len(bids)})
	})
	return plan
}

// themisTerms states a bid's rho (key) and the round's auction (figs: the
// bids that go to auction, of how many), as the full pass's terms.
func themisTerms(buf []byte, _ *engine.Status, rho float64, figs [2]int) []byte {
	buf = append(buf, "finish-time fairness rho "...)
	buf = strconv.AppendFloat(buf, rho, 'f', 2, 64)
	buf = append(buf, " (the worst off bid first; "...)
	buf = strconv.AppendInt(buf, int64(figs[0]), 10)
	buf = append(buf, " of "...)
	buf = strconv.AppendInt(buf, int64(figs[1]), 10)
	return append(buf, " bids go to auction)"...)
}

// partialAllocation runs the auction over budget GPUs and returns each
// bidder's count in the welfare-maximising allocation (sold) and what it
// keeps after Themis' partial allocation (kept); 0 = nothing.
func partialAllocation(bids []themisBid, budget int) (sold, kept []int) {
	var a themisAuction
	return a.run(bids, budget)
}

// themisAuction is the auction's memory, kept from round to round.
//
// The welfare-maximising allocation is a knapsack over GPUs solved by
// dynamic programming from the last bidder back (suffix tables). Partial
// allocation needs, for every winner i, the best welfare of the others
// without i; that is the best split of the budget between the bidders
// before i (a forward table, built once for all winners) and those after
// it (the suffix table), so the whole auction costs two passes over the
// bidders instead of one pass per winner. A table's row is flat beyond
// the GPUs its bidders can use at most (their largest useful counts
// summed), so rows are stored only up to that point.
type themisAuction struct {
	suf    []float64 // suffix rows, row i at sufOff[i], length sufCap[i]+1
	sufOff []int
	sufCap []int
	fwd    []float64 // the forward row for the bidders before the current one
	next   []float64
	// Per bidder.
	top, sold, kept []int
	soldGain        []float64
}

// resize returns b with length n, in b's memory when it has room; the
// contents are not cleared.
func resize[T any](b []T, n int) []T {
	return slices.Grow(b[:0], n)[:n]
}

// cell is row i of the suffix table at g GPUs (the row is flat past its cap).
func (a *themisAuction) cell(i, g int) float64 {
	return a.suf[a.sufOff[i]+min(g, a.sufCap[i])]
}

// run is partialAllocation with a's memory.
func (a *themisAuction) run(bids []themisBid, budget int) (sold, kept []int) {
	n := len(bids)
	a.top = resize(a.top, n) // largest count with a positive gain, 0 if none
	top := a.top
	for i, b := range bids {
		top[i] = 0
		for c, k := range b.counts {
			if b.gain[c] > 0 {
				top[i] = k
			}
		}
	}
	// Suffix table: row i is the best gain of bidders i.. with g GPUs left.
	a.sufOff, a.sufCap = resize(a.sufOff, n+1), resize(a.sufCap, n+1)
	a.sufCap[n] = 0
	size := 0
	for i := n; i >= 0; i-- {
		if i < n {
			a.sufCap[i] = min(budget, a.sufCap[i+1]+top[i])
		}
		size += a.sufCap[i] + 1
	}
	a.suf = resize(a.suf, size)
	off := 0
	for i := n; i >= 0; i-- {
		a.sufOff[i] = off
		off += a.sufCap[i] + 1
	}
	a.suf[a.sufOff[n]] = 0
	for i := n - 1; i >= 0; i-- {
		row := a.suf[a.sufOff[i] : a.sufOff[i]+a.sufCap[i]+1]
		knap(row, a.suf[a.sufOff[i+1]:a.sufOff[i+1]+a.sufCap[i+1]+1], bids[i])
	}
	// The allocation: ties keep fewer GPUs for later bidders.
	a.sold = resize(a.sold, n)
	sold = a.sold
	g := budget
	for i := 0; i < n; i++ {
		b := bids[i]
		sold[i] = 0
		for c, k := range b.counts {
			if k > g || !(b.gain[c] > 0) {
				continue
			}
			if v := b.gain[c] + a.cell(i+1, g-k); v > a.cell(i+1, g) && math.Abs(v-a.cell(i, g)) <= 1e-12*math.Max(1, a.cell(i, g)) {
				sold[i] = k
				break
			}
		}
		g -= sold[i]
	}
	// Others' welfare with i present, for every i: the total less i's gain.
	a.kept, a.soldGain = resize(a.kept, n), resize(a.soldGain, n)
	kept = a.kept
	last := -1 // the last winner
	for i, k := range sold {
		kept[i], a.soldGain[i] = 0, 0
		if k > 0 {
			last = i
			a.soldGain[i] = bids[i].gainOf(k)
		}
	}
	a.fwd = append(a.fwd[:0], 0)
	fcap := 0 // the forward row is flat past fcap
	for i := 0; i <= last; i++ {
		if k := sold[i]; k > 0 {
			with := 0.0
			for j, kj := range sold {
				if j != i && kj > 0 {
					with += a.soldGain[j]
				}
			}
			// Without i: the best split of the budget between the bidders
			// before i (fwd, up to g GPUs) and those after (at most budget-g).
			without := 0.0
			lo, hi := max(0, budget-a.sufCap[i+1]), min(budget, fcap)
			for g := min(lo, hi); g <= hi; g++ {
				without = math.Max(without, a.fwd[g]+a.cell(i+1, budget-g))
			}
			c := math.Exp(with - without)
			b := bids[i]
			if b.st.Job.Elastic() {
				if keep := int(math.Floor(c*float64(k) + 1e-9)); keep >= b.st.Job.MinGPUs {
					kept[i] = keep
				}
			} else if c >= 0.5 {
				kept[i] = k
			}
		}
		if i == last {
			break
		}
		ncap := min(budget, fcap+top[i])
		a.next = slices.Grow(a.next[:0], ncap+1)[:ncap+1]
		copy(a.next, a.fwd)
		for g := len(a.fwd); g <= ncap; g++ {
			a.next[g] = a.fwd[fcap]
		}
		knap(a.next, a.next, bids[i])
		a.fwd, a.next, fcap = a.next, a.fwd, ncap
	}
	return sold, kept
}

// knap sets row[g] (g = len(row)-1 down to 0) to the best of prev[g] and
// b's gain for a count k <= g plus prev[g-k]; prev is flat past its end.
// row and prev may be the same slice: g falls and every read is at g or below.
func knap(row, prev []float64, b themisBid) {
	pc := len(prev) - 1
	for g := len(row) - 1; g >= 0; g-- {
		v := prev[min(g, pc)]
		for c, k := range b.counts {
			// Gains here are > 0 and table values >= +0, never NaN or -0:
			// a plain comparison is math.Max.
			if k > g || !(b.gain[c] > 0) {
				continue
			}
			if x := b.gain[c] + prev[min(g-k, pc)]; x > v {
				v = x
			}
		}
		row[g] = v
	}
}

func (b themisBid) gainOf(k int) float64 {
	if i, ok := slices.BinarySearch(b.counts, k); ok {
		return b.gain[i]
	}
	return 0
}
