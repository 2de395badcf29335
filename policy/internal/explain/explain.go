// Package explain writes the reasons of a plan: why each job a policy leaves
// out waits, is preempted, shrunk or declined, and when it may start.
package explain

import (
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/engine"
)

// Plan gives plan a reason for every job it leaves waiting, preempts,
// shrinks or declines, keeping the reasons the policy already wrote. The
// text is the decision ("waits", "preempted", "shrunk 4->2", "declined"),
// then terms(st), the job's standing in the policy's own terms (nil: none),
// then what stands in its way: the running and waiting jobs the order puts
// ahead of it and the GPUs it needs against those the plan leaves free.
// order is the policy's order of the jobs (most important first; nil when
// it has none). A waiting job's Reason.Position is its 1-based place in
// the queue: among the jobs of the order that the plan leaves waiting.
func Plan(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, terms func(st *engine.Status) string) {
	var app func(b []byte, st *engine.Status) []byte
	if terms != nil {
		app = func(b []byte, st *engine.Status) []byte { return append(b, terms(st)...) }
	}
	PlanAppend(s, plan, order, app)
}

// PlanAppend is Plan with terms that append to a buffer: the policies
// that run most often (FIFO, Tiresias) explain every waiting job without
// allocating when its reason has not changed since the last round (the
// snapshot's Status.Reason), which is most rounds for most jobs.
func PlanAppend(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, terms func(b []byte, st *engine.Status) []byte) {
	new(Scratch).PlanAppend(s, plan, order, terms)
}

// Scratch is the memory PlanAppend needs, kept by a policy that explains
// every round so that explaining allocates nothing once its maps have
// grown (a new string only for a reason whose text changed). The reasons
// map it makes for a plan is reused at its next call: the engine reads a
// plan's reasons during its round and keeps none of its maps.
type Scratch struct {
	given    map[string]int
	declined map[string]bool
	at       map[string]place
	reasons  map[string]engine.Reason
	buf      []byte
	ends     []End   // KeptPredictStarts' and PredictStarts' listed ends
	planned  Planned // PredictStarts: the status of each planned job
	free     freeMem // the free GPUs' counts, read only during the call
}

// sameText is buf as a string, st's last reason's own string when the
// text has not changed (no allocation).
func sameText(buf []byte, st *engine.Status) string {
	if r := st.Reason().Text; string(buf) == r {
		return r
	}
	return string(buf)
}

// place is a job's place in the order: the planned and the waiting jobs
// ahead of it.
type place struct{ pos, runAhead, waitAhead int }

// PlanAppend is the package's PlanAppend using sc's memory.
func (sc *Scratch) PlanAppend(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, terms func(b []byte, st *engine.Status) []byte) {
	sc.PlanTo(s, plan, order, terms, nil)
}

// PlanTo is PlanAppend for a policy that goes on to add to the reasons
// (tidal joins its own words to them): it hands each reason to put, its
// text in a buffer put may read only during the call, instead of writing
// it into plan.Reasons, so that no string is made for a text that is not
// the job's final one. A nil put writes plan.Reasons as PlanAppend does.
func (sc *Scratch) PlanTo(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, terms func(b []byte, st *engine.Status) []byte, put func(st *engine.Status, text []byte, r engine.Reason)) {
	if runsAll(s, plan, order) {
		return // nothing waits, is preempted, shrunk or declined
	}
	given := reuse(&sc.given, len(plan.Run))
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	free := sc.free.plan(s, plan, 0)
	declined := reuse(&sc.declined, len(plan.Decline))
	for _, id := range plan.Decline {
		declined[id] = true
	}
	at := reuse(&sc.at, len(order))
	runs, waits := 0, 0
	for _, st := range order {
		id := st.Job.ID
		if _, ok := at[id]; ok {
			continue
		}
		_, planned := given[id]
		at[id] = place{pos: waits + 1, runAhead: runs, waitAhead: waits}
		if planned {
			runs++
		} else if !declined[id] {
			waits++
		}
	}
	buf := sc.buf
	defer func() { sc.buf = buf }()
	for _, st := range s.Jobs {
		id := st.Job.ID
		if _, ok := plan.Reasons[id]; ok {
			continue
		}
		g, planned := given[id]
		buf = buf[:0]
		switch {
		case declined[id]:
			buf = append(buf, "declined"...)
		case planned && len(st.GPUs) > g:
			buf = appendLoss(buf, st, g, true)
		case planned:
			continue
		case len(st.GPUs) > 0:
			buf = appendLoss(buf, st, 0, false)
		default:
			buf = append(buf, "waits"...)
		}
		buf = withTerms(buf, st, terms)
		p, inOrder := at[id]
		waiting := !planned && !declined[id]
		buf = standing(buf, st, p, inOrder && waiting, waiting, free)
		var r engine.Reason
		if inOrder && waiting {
			r.Position = p.pos
		}
		if put != nil {
			put(st, buf, r)
			continue
		}
		r.Text = sameText(buf, st)
		if plan.Reasons == nil {
			plan.Reasons = reuse(&sc.reasons, len(s.Jobs)-len(plan.Run))
		}
		plan.Reasons[id] = r
	}
}

// withTerms appends to buf, after a reason's decision, terms(st): the
// job's standing in the policy's own terms (none when terms is nil or
// appends nothing).
func withTerms(buf []byte, st *engine.Status, terms func(b []byte, st *engine.Status) []byte) []byte {
	if terms != nil {
		n := len(buf)
		buf = terms(append(buf, "; "...), st)
		if len(buf) == n+2 {
			buf = buf[:n] // no terms
		}
	}
	return buf
}

// standing appends to buf, after a reason's decision and terms, what
// stands in a job's way: the jobs ahead of it in the order (ahead) and,
// for a job left waiting, the GPUs it needs against those free.
func standing(buf []byte, st *engine.Status, p place, ahead, waiting bool, free Free) []byte {
	if ahead {
		buf = append(buf, "; "...)
		buf = strconv.AppendInt(buf, int64(p.runAhead), 10)
		buf = append(buf, " running and "...)
		buf = strconv.AppendInt(buf, int64(p.waitAhead), 10)
		buf = append(buf, " waiting job(s) ahead"...)
	}
	if waiting {
		buf = free.appendNeeds(buf, st)
	}
	return buf
}

// AppendLeftOut appends to buf the reason PlanAppend writes for job st of
// the order when the plan leaves it out ("preempted" when it holds GPUs,
// "waits" when not): its terms, then runAhead running and waitAhead
// waiting jobs ahead of it and the free GPUs the plan leaves. Its
// Reason.Position is waitAhead+1. Policies that plan a round from their
// own kept order (Tiresias) write the same reasons with it, without the
// plan's maps.
func AppendLeftOut(buf []byte, st *engine.Status, terms func(b []byte, st *engine.Status) []byte, runAhead, waitAhead int, free Free) []byte {
	if len(st.GPUs) > 0 {
		buf = append(buf, "preempted"...)
	} else {
		buf = append(buf, "waits"...)
	}
	buf = withTerms(buf, st, terms)
	return standing(buf, st, place{runAhead: runAhead, waitAhead: waitAhead}, true, true, free)
}

// AppendWaits appends to buf the reason KeptAppend (and PlanAppend) write
// without an order for a waiting job st the plan leaves out: "waits", its
// terms, then the GPUs it needs against the free GPUs the plan leaves.
// Policies that work the reasons out when read (engine.Plan.Explain) write
// the same with it.
func AppendWaits(buf []byte, st *engine.Status, terms func(b []byte, st *engine.Status) []byte, free Free) []byte {
	buf = withTerms(append(buf, "waits"...), st, terms)
	return standing(buf, st, place{}, false, true, free)
}

// KeptAppend is PlanAppend for a plan that keeps every running job
// (engine.Plan.Keep, its Run listing only jobs that hold no GPUs, to
// start): it writes the reasons PlanAppend writes for the full plan that
// lists the running jobs, unchanged, ahead of these, without walking the
// running jobs. waiting are the active jobs that hold no GPUs; ordered
// says they are in the policy's order, with ahead running jobs ahead of
// them all and the others behind (FIFO: every running job, then the
// queue; Gandiva: the jobs inside their quantum, the queue, the others);
// otherwise the policy has no order (PlanAppend's nil order). held is the
// GPUs the running jobs hold. The plan declines no job and packs none.
func (sc *Scratch) KeptAppend(s *engine.Snapshot, plan *engine.Plan, waiting []*engine.Status, ordered bool, ahead, held int, terms func(b []byte, st *engine.Status) []byte) {
	if ordered && len(plan.Run) == len(waiting) {
		return // every job runs: PlanAppend's runsAll
	}
	var given map[string]int // none in most such rounds: no lookups then
	if len(plan.Run) > 0 {
		given = reuse(&sc.given, len(plan.Run))
	}
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	// A Keep plan packs no jobs: PlanFree counts each assignment's GPUs.
	free := sc.free.plan(s, plan, held)
	buf := sc.buf
	defer func() { sc.buf = buf }()
	p := place{runAhead: ahead}
	for _, st := range waiting {
		id := st.Job.ID
		if _, planned := given[id]; planned {
			p.runAhead++
			continue
		}
		if _, ok := plan.Reasons[id]; !ok {
			buf = withTerms(append(buf[:0], "waits"...), st, terms)
			p.pos = p.waitAhead + 1
			buf = standing(buf, st, p, ordered, true, free)
			r := engine.Reason{Text: sameText(buf, st)}
			if ordered {
				r.Position = p.pos
			}
			if plan.Reasons == nil {
				plan.Reasons = reuse(&sc.reasons, len(waiting)-len(plan.Run))
			}
			plan.Reasons[id] = r
		}
		p.waitAhead++
	}
}

// reuse returns *m emptied, made with room for n entries when it is nil.
// It is emptied key by key, not with clear: clear draws the map a new
// hash seed, and a large map refilled with the same keys under a new seed
// may split its tables again, an allocation in a round in which nothing
// changed (FIFO's at 5,000 jobs, now and then).
func reuse[V any](m *map[string]V, n int) map[string]V {
	if *m == nil {
		*m = make(map[string]V, n)
	}
	for k := range *m {
		delete(*m, k)
	}
	return *m
}

// runsAll reports, without building anything, whether plan runs every job
// of the snapshot on at least the GPUs it holds and declines none: then no
// job needs a reason. It recognises the plan a greedy pass over order makes
// when everything fits (the plan's assignments in order's order, every
// active job in order), the commonest plan on a cluster with room; for any
// other plan it says false and the reasons are worked out in full.
func runsAll(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status) bool {
	if len(plan.Decline) > 0 || len(plan.Run) != len(s.Jobs) || len(order) != len(plan.Run) {
		return false
	}
	for i, a := range plan.Run {
		st := order[i]
		if a.Job != st.Job.ID || len(st.GPUs) > a.GPUs {
			return false
		}
	}
	return true
}

// predictAhead is how many waiting jobs predictStarts times.
const predictAhead = PredictAhead

// PredictAhead is how many of the waiting jobs PredictStarts and
// KeptPredictStarts give a predicted start at most: the first ones the plan
// does not run, in the order.
const PredictAhead = 16

// PredictStarts sets Reason.PredictedStart for the waiting jobs of a plan
// whose order does not change while they wait (FIFO): running jobs end
// when the model says, and waiting jobs take freed GPUs in order (strict:
// none overtakes a job that does not fit yet), assuming no arrivals,
// failures or capacity changes. A job whose wait depends on a job the
// model cannot time (no duration) gets none, and so do those behind it.
// On a cluster of several sets of GPUs one job may take together (several
// sites, GPU types or edge servers) the free GPUs and the ends are counted
// per set, and a job starts when one set has room for it (predictSets); on
// one site of one type, over the whole cluster.
//
// Only the first predictAhead waiting jobs get a prediction: each costs the
// model's remaining time every round, and further back the assumption of
// no arrivals and exact durations wears thin.
//
// endOf(st, a) is when st would end on assignment a if it ran from now
// (+Inf unknown); nil computes it from the model each time.
func PredictStarts(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, strict bool, endOf func(*engine.Status, engine.Assignment) float64) {
	new(Scratch).PredictStarts(s, plan, order, strict, endOf)
}

// PredictStarts is the package's PredictStarts using sc's memory: a policy
// that predicts every round (FIFO) allocates nothing for it once sc has
// grown. order's jobs are the snapshot's.
func (sc *Scratch) PredictStarts(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, strict bool, endOf func(*engine.Status, engine.Assignment) float64) {
	if s.Model == nil || runsAll(s, plan, order) {
		return // nothing to time jobs with, or no job waits
	}
	if endOf == nil {
		endOf = func(st *engine.Status, a engine.Assignment) float64 { return ModelEnd(s, st, a) }
	}
	if perSet(s.Cluster) {
		sc.predictSets(s, plan, order, strict, endOf)
		return
	}
	given := reuse(&sc.given, len(plan.Run))
	free := s.Available("", "")
	pool := endPool{listed: sc.ends[:0]}
	sts := sc.planned.Of(s, order, plan.Run)
	for i, a := range plan.Run {
		given[a.Job] = a.GPUs
		if a.PackWith != "" && a.Job > a.PackWith {
			continue
		}
		free -= a.GPUs
		st := sts[i]
		if st == nil {
			continue
		}
		pool.listed = append(pool.listed, End{T: endOf(st, a), GPUs: a.GPUs})
	}
	predict(s, plan, order, given, free, &pool, strict, endOf)
	sc.ends = pool.listed[:0]
	clear(sts) // let the jobs go
}

// Planned is the memory of Of, reused from call to call (the zero
// Planned is ready).
type Planned struct {
	sts []*engine.Status
	// byID finds a planned job's status when the plan does not list the
	// jobs in the order's order.
	byID map[string]*engine.Status
}

// Of returns, in p's memory (valid until the next call), the status of
// each job run lists (nil for one not active in s): found by walking order
// alongside run when run lists jobs of order in order's order (as a greedy
// pass plans), else by ID among the active jobs.
func (p *Planned) Of(s *engine.Snapshot, order []*engine.Status, run []engine.Assignment) []*engine.Status {
	sts := slices.Grow(p.sts[:0], len(run))[:len(run)]
	p.sts = sts
	k := 0
	for i, a := range run {
		for k < len(order) && order[k].Job.ID != a.Job {
			k++
		}
		if k == len(order) {
			jobs := s.ActiveJobs()
			byID := reuse(&p.byID, len(jobs))
			for _, st := range jobs {
				byID[st.Job.ID] = st
			}
			for i, a := range run {
				sts[i] = byID[a.Job]
			}
			clear(byID)
			return sts
		}
		sts[i] = order[k]
		k++
	}
	return sts
}

// End is a job's predicted end: when, and the GPUs it frees then.
type End struct {
	T    float64
	GPUs int
	set  int // on several sets, the set of GPUs it frees them in (freeSets)
}

// KeptPredictStarts is PredictStarts (strict, one GPU type, one site) for
// a plan that keeps every running job (engine.Plan.Keep), without walking
// the running jobs: running are their predicted ends (endOf's), earliest
// first and, among equal ends, in the engine's order of the jobs (the
// order in which PredictStarts lists them); waiting are the jobs that hold
// no GPUs, in the policy's order, the running jobs all ahead of them, and
// the plan starts some of them; free is the GPUs the plan leaves free
// over the cluster. It predicts what PredictStarts predicts for the full
// plan.
func (sc *Scratch) KeptPredictStarts(s *engine.Snapshot, plan *engine.Plan, waiting []*engine.Status, free int, running []End, endOf func(*engine.Status, engine.Assignment) float64) {
	if s.Model == nil || len(plan.Run) == len(waiting) {
		return // nothing to time jobs with, or no job waits
	}
	given := reuse(&sc.given, len(plan.Run))
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
	}
	pool := endPool{sorted: running, listed: sc.ends[:0]}
	for _, st := range waiting {
		if g, ok := given[st.Job.ID]; ok {
			pool.listed = append(pool.listed, End{T: endOf(st, engine.Assignment{Job: st.Job.ID, GPUs: g, GPUType: st.Job.GPUType}), GPUs: g})
		}
	}
	predict(s, plan, waiting, given, free, &pool, true, endOf)
	sc.ends = pool.listed
}

// endPool hands out predicted ends as PredictStarts releases them: the
// earliest first and, among equal ends, the one listed first. sorted
// are listed first, already in that order; listed come after them, in
// the order they were listed.
type endPool struct {
	sorted []End
	i      int // sorted[:i] are handed out
	listed []End
}

func (p *endPool) empty() bool { return p.i >= len(p.sorted) && len(p.listed) == 0 }

// pop hands out the next end (the pool is not empty).
func (p *endPool) pop() End {
	k := p.next()
	if k < 0 {
		p.i++
		return p.sorted[p.i-1]
	}
	e := p.listed[k]
	p.listed = append(p.listed[:k], p.listed[k+1:]...)
	return e
}

// next is the index in listed of the next end pop hands out, -1 when it
// is sorted's next (the pool is not empty).
func (p *endPool) next() int {
	k := -1
	for j := range p.listed {
		if k < 0 || p.listed[j].T < p.listed[k].T {
			k = j
		}
	}
	if p.i < len(p.sorted) && (k < 0 || !(p.listed[k].T < p.sorted[p.i].T)) {
		return -1
	}
	return k
}

// nextT is when the next end pop hands out falls (the pool is not empty).
func (p *endPool) nextT() float64 {
	if k := p.next(); k >= 0 {
		return p.listed[k].T
	}
	return p.sorted[p.i].T
}

// predict is PredictStarts' pass over the waiting jobs of order (those
// not given GPUs), releasing pool's ends until each fits.
func predict(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, given map[string]int, free int, pool *endPool, strict bool, endOf func(*engine.Status, engine.Assignment) float64) {
	now := s.Now
	blocked := false
	predicted := 0
	for _, st := range order {
		if _, ok := given[st.Job.ID]; ok || blocked {
			continue
		}
		if predicted++; predicted > predictAhead {
			break
		}
		need := st.Job.GPUs
		// Release GPUs in end order until the job fits.
		for free < need && !pool.empty() {
			e := pool.pop()
			now = math.Max(now, e.T)
			free += e.GPUs
		}
		if free < need || math.IsInf(now, 1) {
			blocked = strict
			continue
		}
		r := endOf(st, engine.Assignment{Job: st.Job.ID, GPUs: need, GPUType: st.Job.GPUType}) - s.Now
		if r2, ok := plan.Reasons[st.Job.ID]; ok && now > s.Now {
			r2.PredictedStart = now
			plan.Reasons[st.Job.ID] = r2
		}
		free -= need
		pool.listed = append(pool.listed, End{T: now + r, GPUs: need})
	}
}

// predictSets is PredictStarts on a cluster of several sets. A job never
// spans sites or mixes GPU types, and on an edge site it uses one server:
// GPUs free on two sites do not start a job that fits neither. So the free
// GPUs and the ends are counted per set of GPUs one job may take together
// (freeSets, as the waiting reasons count them): a running job frees its
// GPUs in the set it holds them in; a job the plan starts, in the set the
// placer would put it in (freeMem.setsAfter); and a waiting job starts at
// the first end after which some one set has room for it, in the set the
// greedy pass and the placer would then choose, with every end up to then
// counted (choose: of a job that names no type, the type the greedy pass
// gives it; then the first site in the cluster's order, on an edge site
// the best-fitting server), and runs as fast as the model says it runs on
// that set's type. Where the counts cannot say what a job's end frees (a packed
// pair, parts of GPUs shared, a plan that keeps its running jobs without
// listing them, a planned job no set has room for, a set over-filled) no
// job gets a prediction: none rather than a wrong one.
func (sc *Scratch) predictSets(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, strict bool, endOf func(*engine.Status, engine.Assignment) float64) {
	if plan.Keep {
		return // the running jobs' ends are not listed
	}
	m := &sc.free
	fs := m.setsAfter(s, plan.Run, false)
	if m.shared {
		return
	}
	for i := range fs.sets {
		if fs.sets[i].free < 0 {
			return
		}
	}
	given := reuse(&sc.given, len(plan.Run))
	pool := endPool{listed: sc.ends[:0]}
	sts := sc.planned.Of(s, order, plan.Run)
	defer clear(sts) // let the jobs go
	for i, a := range plan.Run {
		given[a.Job] = a.GPUs
		k := m.in[i]
		if k < 0 {
			sc.ends = pool.listed[:0]
			return
		}
		if st := sts[i]; st != nil {
			pool.listed = append(pool.listed, End{endOf(st, a), a.GPUs, k})
		}
	}
	now := s.Now
	blocked := false
	predicted := 0
	for _, st := range order {
		if _, ok := given[st.Job.ID]; ok || blocked {
			continue
		}
		if predicted++; predicted > predictAhead {
			break
		}
		a := engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: st.Job.GPUType}
		// Release GPUs in end order until some one set holds the job.
		k := fs.choose(s, &a, st)
		for k < 0 && !pool.empty() {
			e := pool.pop()
			now = math.Max(now, e.T)
			fs.sets[e.set].free += e.GPUs
			k = fs.choose(s, &a, st)
		}
		if k < 0 || math.IsInf(now, 1) {
			blocked = strict
			continue
		}
		// The round at now sees every job that ends by then gone: the
		// placer chooses among all the sets with room.
		released := false
		for !pool.empty() && pool.nextT() <= now {
			e := pool.pop()
			fs.sets[e.set].free += e.GPUs
			released = true
		}
		if released {
			k = fs.choose(s, &a, st)
		}
		r := endOf(st, a) - s.Now
		if r2, ok := plan.Reasons[st.Job.ID]; ok && now > s.Now {
			r2.PredictedStart = now
			plan.Reasons[st.Job.ID] = r2
		}
		fs.sets[k].free -= a.GPUs
		pool.listed = append(pool.listed, End{now + r, a.GPUs, k})
	}
	sc.ends = pool.listed[:0]
}

// ModelEnd is when st ends on a, by the model, from now (+Inf unknown).
func ModelEnd(s *engine.Snapshot, st *engine.Status, a engine.Assignment) float64 {
	r := s.Remaining(st, a.GPUs, a.GPUType)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return math.Inf(1)
	}
	return s.Now + r
}
