package classic

import (
	"slices"
	"sort"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/internal/minheap"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// Tiresias' rounds that cost what changed (issue 19).
//
// Under 2D-LAS without the starvation knob a job's queue changes only when
// its attained service crosses a limit, which only a running job's does,
// at a time its GPU count predicts. And when the GPUs every active job
// asks for fit the cluster at once, the greedy pass runs every job
// whatever the order: the plan keeps the running jobs where they are and
// starts the waiting ones in their queue order. So, between rounds of the
// same engine (Snapshot.Changed), Tiresias keeps:
//
//   - the GPUs the active jobs ask for, in all;
//   - the waiting jobs;
//   - for each running job, the time its service may next cross a limit,
//     in a heap, a little early (a margin far above the rounding of the
//     engine's sums), rechecked exactly when due;
//
// and, in a round where everything fits, plans "as before, plus the
// waiting jobs" (engine.Plan.Keep), touching only the jobs that changed,
// the jobs whose crossing is due and the waiting jobs. Any other round
// (something does not fit, a job runs on a count it did not ask for, a
// fractional job, GPUs down, several GPU types or sites, a snapshot that is
// not the next round of the same engine) is planned in full, which also
// rebuilds this state. The plans are the full pass's, job for job
// (TestTiresiasFastMatchesFull).

// tiresiasFast is the state Tiresias keeps between incremental rounds.
type tiresiasFast struct {
	ok    bool // the state matches the end of round `round` of engine `from`
	from  *engine.Engine
	round int
	jobs  []fastJob // by Status.Slot
	// demand is the GPUs the active jobs ask for; odd counts the active
	// jobs the shortcut cannot plan (fractional jobs, jobs that run on
	// other than the GPUs they ask for, packed jobs).
	demand, odd int
	waiting     []*engine.Status
	due         []crossing
	later       []crossing // pushed after this round's pops
	sorted      []tiresiasEntry
	kept        int // rounds planned from what changed
	queued      int // of them, rounds in which some job does not fit

	// The order of the active jobs (tiresias_order.go): its root (slot+1),
	// the treap's priorities and build stack, and compareIn.
	root  int32
	seed  uint32
	stack []int32
	cmp   func(a, b tiresiasEntry) int
	// dirty are the jobs whose place in the order may have moved since
	// it was last brought up to date (settle): the rounds where
	// everything fits only note them.
	dirty []*engine.Status
	stale bool // too many moved to list: settle builds the order afresh
	// Scratch of the rounds in which some job does not fit.
	fill    []ranked // the jobs the greedy pass takes after the prefix
	stops   []ranked // the running jobs it leaves out
	starts  []ranked // the waiting jobs it runs
	stopIDs []string
	reasons map[string]engine.Reason
	buf     []byte
	// Reasons worked out when read (tiresias_reasons.go): the figures of
	// this round and the last, the changes to the order since the last
	// (while logging), the last round's reasons kept before the order was
	// built afresh, and Reason's buffer.
	lazy    explain.Rounds[tiresiasFigs]
	log     []orderOp
	logging bool
	rbuf    []byte
}

// fastJob is what tiresiasFast keeps per active job.
type fastJob struct {
	st    *engine.Status
	wait  int  // 1 + its index in waiting, 0 when it runs
	odd   bool // counted in tiresiasFast.odd
	gen   int  // bumped whenever its crossing is pushed: older entries are stale
	node       // its place in the order (tiresias_order.go)
	dirty bool // in tiresiasFast.dirty
	// said is 1 + the round whose plan gave its reason from the kept
	// order, 0 if none, with the figures that reason was written from.
	said     int
	saidFigs [3]int // jobs running and waiting ahead, GPUs free
	saidHeld bool   // it held GPUs (preempted, not waiting)
	// text is the last reason Reason worked out for it while it waited,
	// from these figures (as saidFigs), attained service and queue base.
	text              string
	textFigs          [3]int
	textAtt, textBase float64
}

// crossing is a running job's next possible queue change.
type crossing struct {
	at  float64 // snapshot time from which to check it
	st  *engine.Status
	gen int
}

// crossingFirst is the order of the crossings' heap: earliest first.
func crossingFirst(a, b crossing) bool { return a.at < b.at }

// Incremental implements engine.IncrementalPolicy: 2D-LAS without the
// starvation knob plans from what changed (Gittins indexes and promotions
// move with time).
func (t *Tiresias) Incremental() bool { return t.Gittins == nil && t.Knob == 0 }

// JobsOnDemand implements engine.JobsOnDemand: a round planned from what
// changed reads no list of the active jobs; a full one asks for it first
// (Snapshot.ActiveJobs).
func (t *Tiresias) JobsOnDemand() bool { return t.Incremental() }

// ProgressFree implements engine.ProgressFree: Tiresias ranks by attained
// service, never by progress.
func (t *Tiresias) ProgressFree() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed
// (Plan.Keep) rather than in full: for tests and benchmarks.
func (t *Tiresias) KeptRounds() int { return t.fast.kept }

// QueuedRounds is how many of the KeptRounds had jobs that did not fit
// (the greedy pass chose from the kept order, Plan.Stop).
func (t *Tiresias) QueuedRounds() int { return t.fast.queued }

// standing computes st's queue this round and its memo (the knob's
// promotion included), recording a memo that changes in *memo (in t.memo's
// memory). It brings st's counters up to date (Snapshot.Sync): every
// reading of them in a round comes after it.
func (t *Tiresias) standing(s *engine.Snapshot, st *engine.Status, memo *map[string]engine.Memo) (int, engine.Memo) {
	s.Sync(st) // its counters, under lazy counters (engine.Config.LazyCounters)
	m := st.Memo
	// Starvation: a job that ran before and has waited knob x its
	// executed time (since its last promotion) goes back to Q0.
	exec := st.Executed - m[memoBaseExec]
	if t.Knob > 0 && len(st.GPUs) == 0 && st.Job.Submit != st.LastStop && exec > 0 &&
		s.Now-st.LastStop >= t.Knob*exec && int(m[memoQueue]) > 1 {
		m[memoBaseServ], m[memoBaseExec] = st.Attained, st.Executed
		m[memoQueue] = 0
	}
	q := t.queueOf(st.Attained - m[memoBaseServ])
	if int(m[memoQueue]) != q+1 {
		m[memoQueue], m[memoEntered] = float64(q+1), s.Now
		if st.Starts == 0 && q == 0 {
			m[memoEntered] = st.Job.Submit
		}
	}
	if m != st.Memo {
		if *memo == nil {
			if t.memo == nil {
				t.memo = map[string]engine.Memo{}
			}
			*memo = t.memo
		}
		(*memo)[st.Job.ID] = m
	}
	return q, m
}

// fastUsable reports whether s may be planned from the kept state.
func (t *Tiresias) fastUsable(s *engine.Snapshot) bool {
	f := &t.fast
	return f.ok && s.Incremental && s.AddOnly && s.From() != nil && s.From() == f.from && s.Round == f.round+1 &&
		s.Down == nil && len(s.Cluster.GPUTypes()) == 1 && len(s.Cluster.Sites()) <= 1
}

// scheduleFast plans s from the kept state when everything fits; it
// reports false, having planned nothing, when the round must be planned
// in full.
func (t *Tiresias) scheduleFast(s *engine.Snapshot, memo *map[string]engine.Memo) (engine.Plan, bool) {
	f := &t.fast
	f.ok = false // until this round's state is complete
	// The jobs that left first: a new job may have taken one's slot.
	for _, st := range s.Changed {
		if st.State.Terminal() {
			f.drop(st)
		}
	}
	f.later = f.later[:0]
	for _, st := range s.Changed {
		if st.State.Terminal() {
			continue
		}
		if !f.add(st) {
			return engine.Plan{}, false
		}
		q, m := t.standing(s, st, memo)
		f.mark(st)
		if len(st.GPUs) > 0 {
			f.push(t, st, q, m[memoBaseServ], s.Now)
		}
	}
	// The running jobs whose service may have crossed a limit.
	for len(f.due) > 0 && f.due[0].at <= s.Now {
		c := minheap.Pop(&f.due, crossingFirst)
		st := c.st
		if j := f.job(st); j == nil || j.gen != c.gen || len(st.GPUs) == 0 {
			continue // stale: it stopped or ended (Changed says when it runs again)
		}
		q, m := t.standing(s, st, memo)
		f.mark(st)
		f.push(t, st, q, m[memoBaseServ], s.Now)
	}
	for _, c := range f.later {
		minheap.Push(&f.due, c, crossingFirst)
	}
	if f.odd > 0 {
		return engine.Plan{}, false
	}
	if free := s.Available("", s.Cluster.GPUTypes()[0]); f.demand > free {
		return t.scheduleQueued(s, memo, free), true // the greedy pass must choose
	}
	// Everything fits: the running jobs keep their GPUs and the waiting
	// ones start in queue order.
	entries := f.sorted[:0]
	for _, st := range f.waiting {
		q, m := t.standing(s, st, memo)
		entries = append(entries, tiresiasEntry{st: st, queue: q, entered: m[memoEntered]})
	}
	slices.SortFunc(entries, func(a, b tiresiasEntry) int {
		if a.queue != b.queue {
			return a.queue - b.queue
		}
		return t.inQueue(a, b)
	})
	run := t.run[:0]
	for _, e := range entries {
		j := e.st.Job
		run = append(run, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
	}
	clear(entries)
	f.sorted = entries[:0]
	t.run = run
	t.keptRound(s)
	// Every job runs: no reason to give; the last round's are asked for
	// through Reason as its waiting jobs start.
	return engine.Plan{Run: run, Memo: *memo, Keep: true, Explain: t}, true
}

// keptRound ends a round planned from what changed.
func (t *Tiresias) keptRound(s *engine.Snapshot) {
	f := &t.fast
	f.ok, f.from, f.round = true, s.From(), s.Round
	f.kept++
	// The full pass's kept order is stale now: its next pass sorts.
	clear(t.prev)
	t.prev = t.prev[:0]
}

// scheduleQueued plans, from the kept order, a round in which the GPUs the
// active jobs ask for do not fit the free GPUs: the plan the full greedy
// pass makes, as "as before, less the running jobs it leaves out, plus the
// waiting jobs it runs" (engine.Plan.Keep, Plan.Stop), with the reasons
// explain.PlanAppend writes. The greedy pass over the order runs every job
// of the longest prefix whose GPUs fit, then each later job that fits what
// is left; the order's sums find both (tiresias_order.go), so the round
// costs the jobs that start, stop, wait or fill in, each in O(log n).
func (t *Tiresias) scheduleQueued(s *engine.Snapshot, memo *map[string]engine.Memo, free int) engine.Plan {
	f := &t.fast
	f.settle(t)
	p, used := f.prefix(free)
	left := free - used
	fill := f.fill[:0]
	for from := p + 1; left > 0; {
		x, r := f.firstFit(f.root, 0, from, left)
		if x == 0 {
			break
		}
		fill = append(fill, ranked{x: x, rank: r})
		left -= f.nd(x).key.st.Job.GPUs
		from = r + 1
	}
	// taken reports whether the greedy pass runs the job at rank r.
	taken := func(r int) bool {
		if r < p {
			return true
		}
		_, ok := slices.BinarySearchFunc(fill, r, func(a ranked, r int) int { return a.rank - r })
		return ok
	}
	// The running jobs it leaves out stop.
	stops := f.stops[:0]
	for _, c := range f.runningFrom(f.root, 0, p, f.stops[:0]) {
		if !taken(c.rank) {
			stops = append(stops, c)
		}
	}
	// The waiting jobs it takes start, in order (those of the prefix,
	// then those of the fill); the others wait, their reasons left to
	// Reason (tiresias_reasons.go).
	starts := f.waitingBefore(f.root, 0, p, f.starts[:0])
	for _, c := range fill {
		if !f.nd(c.x).run {
			starts = append(starts, c)
		}
	}
	run := t.run[:0]
	for _, c := range starts {
		j := f.nd(c.x).key.st.Job
		run = append(run, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
	}
	t.run = run
	// The running jobs it leaves out get their reasons now, as
	// explain.PlanAppend writes them: their standing, the jobs the plan
	// runs and those it leaves waiting ahead of them, and the GPUs it
	// leaves free.
	if f.reasons == nil {
		f.reasons = map[string]engine.Reason{}
	}
	clear(f.reasons)
	if t.terms == nil {
		t.terms = t.appendTerms
	}
	stopIDs := f.stopIDs[:0]
	for _, c := range stops {
		j := &f.jobs[c.x-1]
		st := j.st
		stopIDs = append(stopIDs, st.Job.ID)
		ahead := p + sort.Search(len(fill), func(i int) bool { return fill[i].rank >= c.rank })
		figs := [3]int{ahead, c.rank - ahead, left}
		r := engine.Reason{Text: st.Reason().Text, Position: c.rank - ahead + 1}
		if j.said != s.Round || figs != j.saidFigs || !j.saidHeld || r.Text == "" {
			// Not the reason the last round gave it from the same
			// figures: write it.
			t.standing(s, st, memo) // its counters, for its terms
			// One site (fastUsable): the free GPUs are counted over the cluster.
			f.buf = explain.AppendLeftOut(f.buf[:0], st, t.terms, ahead, c.rank-ahead, explain.Whole(left))
			if string(f.buf) != r.Text {
				r.Text = string(f.buf)
			}
		}
		j.said, j.saidFigs, j.saidHeld = s.Round+1, figs, true
		f.reasons[st.Job.ID] = r
	}
	// This round's figures, for Reason.
	cur := &f.lazy.Cur
	cur.Take(s.Round, len(f.log))
	cur.Figs.p, cur.Figs.left, cur.Figs.fill = p, left, cur.Figs.fill[:0]
	for _, c := range fill {
		cur.Figs.fill = append(cur.Figs.fill, c.rank)
	}
	clear(stops)
	clear(starts)
	clear(fill)
	f.fill, f.stops, f.starts, f.stopIDs = fill[:0], stops[:0], starts[:0], stopIDs
	f.queued++
	t.keptRound(s)
	return engine.Plan{Run: run, Stop: stopIDs, Memo: *memo, Reasons: f.reasons, Keep: true, Explain: t}
}

// rebuild makes the kept state from a round planned in full (entries are
// its jobs' queues, in any order).
func (f *tiresiasFast) rebuild(t *Tiresias, s *engine.Snapshot, entries []tiresiasEntry) {
	f.ok = false
	if !t.Incremental() || s.From() == nil {
		return
	}
	clear(f.jobs)
	f.root = 0
	clear(f.dirty)
	f.dirty, f.stale = f.dirty[:0], false
	clear(f.waiting)
	clear(f.due)
	f.waiting, f.due, f.demand, f.odd = f.waiting[:0], f.due[:0], 0, 0
	f.later = f.later[:0]
	for _, e := range entries {
		if !f.add(e.st) {
			return // two jobs in one slot: not one engine's
		}
		if len(e.st.GPUs) > 0 {
			f.push(t, e.st, e.queue, t.memoOf(e.st)[memoBaseServ], s.Now)
		}
	}
	f.due = append(f.due, f.later...)
	minheap.Init(f.due, crossingFirst)
	f.build(entries)
	f.ok, f.from, f.round = true, s.From(), s.Round
}

// memoOf is st's memo as this round's plan leaves it.
func (t *Tiresias) memoOf(st *engine.Status) engine.Memo {
	if m, ok := t.memo[st.Job.ID]; ok {
		return m
	}
	return st.Memo
}

// job is st's entry, nil when st is not kept.
func (f *tiresiasFast) job(st *engine.Status) *fastJob {
	if st.Slot < 0 || st.Slot >= len(f.jobs) || f.jobs[st.Slot].st != st {
		return nil
	}
	return &f.jobs[st.Slot]
}

// add keeps st (or updates it: whether it waits, whether it is odd); it
// reports false when its slot holds another job, which the kept state
// never saw leave.
func (f *tiresiasFast) add(st *engine.Status) bool {
	if st.Slot < 0 {
		return false
	}
	if st.Slot >= len(f.jobs) {
		f.jobs = slices.Grow(f.jobs, st.Slot+1-len(f.jobs))[:st.Slot+1]
	}
	j := &f.jobs[st.Slot]
	if j.st != st {
		if j.st != nil {
			return false
		}
		*j = fastJob{st: st, gen: j.gen}
		f.demand += st.Job.GPUs
	}
	odd := st.Job.Fractional() || st.PackedWith != "" || (len(st.GPUs) > 0 && len(st.GPUs) != st.Job.GPUs)
	if odd != j.odd {
		j.odd = odd
		if odd {
			f.odd++
		} else {
			f.odd--
		}
	}
	switch waits := len(st.GPUs) == 0; {
	case waits && j.wait == 0:
		f.waiting = append(f.waiting, st)
		j.wait = len(f.waiting)
	case !waits && j.wait > 0:
		f.unwait(j)
	}
	return true
}

// drop forgets st, which ended.
func (f *tiresiasFast) drop(st *engine.Status) {
	j := f.job(st)
	if j == nil {
		return
	}
	f.demand -= st.Job.GPUs
	if j.odd {
		f.odd--
	}
	if j.wait > 0 {
		f.unwait(j)
	}
	f.unplace(int32(st.Slot + 1))
	*j = fastJob{gen: j.gen + 1}
}

// unwait takes j's job out of the waiting jobs.
func (f *tiresiasFast) unwait(j *fastJob) {
	i := j.wait - 1
	last := f.waiting[len(f.waiting)-1]
	f.waiting[i] = last
	f.jobs[last.Slot].wait = i + 1
	f.waiting[len(f.waiting)-1] = nil
	f.waiting = f.waiting[:len(f.waiting)-1]
	j.wait = 0
}

// push schedules a check of running job st, in queue q now, for when its
// service may reach the next limit (none past the last queue), into
// f.later; older entries for st become stale.
func (f *tiresiasFast) push(t *Tiresias, st *engine.Status, q int, base, now float64) {
	j := f.job(st)
	j.gen++
	if q >= len(t.Limits) {
		return // the last queue: its service crosses no more limits
	}
	rate := st.HeldGPUs() // GPU-seconds attained per second
	if !(rate > 0) {
		return
	}
	limit := t.Limits[q] + base
	// The engine sums dt x rate round by round; its sum differs from the
	// product by rounding only, far below this margin.
	margin := 1e-6 * max(1, limit)
	at := now + (limit-margin-st.Attained)/rate
	f.later = append(f.later, crossing{at: at, st: st, gen: j.gen})
}
