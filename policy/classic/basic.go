package classic

import (
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/roster"
)

// basicPolicies registers the policies this file defines; Policies calls it.
func basicPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:     "fifo",
		Presets:  []string{"fifo:backfill=true"},
		Summary:  "first come, first served; a running job is never preempted",
		Knobs:    "backfill=false: let smaller jobs start past a head job that does not fit",
		Defaults: FIFO{},
		Build:    contract.Typed(FIFO{}, func(_ contract.Context, k FIFO) (*FIFO, error) { return &k, nil }),
	})
	register(contract.Info{
		Name: "srtf",
		Summary: "shortest remaining time first, preemptive, with oracle knowledge of " +
			"each job's remaining time (an upper reference, not deployable)",
		Knobs: "",
		Build: func(contract.Context, contract.Options) (engine.Policy, error) { return &SRTF{}, nil },
	})
	register(contract.Info{
		Name:           "edf",
		Summary:        "earliest deadline first, preemptive; jobs without a deadline go last",
		Knobs:          "",
		NeedsDeadlines: true,
		Build:          func(contract.Context, contract.Options) (engine.Policy, error) { return &EDF{}, nil },
	})
}

// FIFO runs jobs in submission order on their requested GPUs. Running jobs
// keep their GPUs; waiting jobs start in order while they fit. Without
// Backfill the first waiting job that does not fit blocks those behind it.
// Its tagged fields are its knobs (contract.Options.Decode); the zero
// value is the default.
type FIFO struct {
	Backfill bool `knob:"backfill"`
	// ends caches the predicted end of each running job (predictStarts)
	// while its allocation and launch stay the same, priced again at each
	// halving of the time it has left (refreshAt); a cache only, it
	// changes no decision.
	ends map[string]fifoEnd
	// kept is what the rounds planned from what changed read (issue 19).
	kept  roster.Roster
	queue fifoQueue
	run   []engine.Assignment // the last plan's Run: the engine is done with it by the next round
	order []*engine.Status    // scratch: a full round's order
	pool  alloc.Pool          // the greedy pass's, kept (alloc.Pool.Greedy)
	// snap is the round being planned while endAt may read it; endFn is
	// endAt, made once.
	snap  *engine.Snapshot
	endFn func(*engine.Status, engine.Assignment) float64
	why   fifoReasons // reasons worked out when read (fifo_reasons.go)
	// lazy works out, with backfill, the waiting jobs' reasons when read.
	lazy explain.Queue
}

type fifoEnd struct {
	typ          string // the GPU type it was priced on (the assignment's)
	gpus, starts int
	running      bool
	progress     float64
	at           float64 // the end when running, else the time to run
	due          float64 // running: from when the end is priced again (refreshAt)
}

// refreshAt is when a running job's end at, priced at now, is priced
// again: halfway there. The model's remaining time of a running job is
// from its progress and the packed allocation it asks for, with no
// restart cost: while the job pays its start cost, or runs on GPUs
// placed otherwise than packed, its end drifts from what was priced, by
// a share of the time it has left. Priced again at each halving of the
// time left, an end is at most twice as stale as one priced every round,
// and each launch is priced about log2(its run / a round) times, not once
// a round. An unknown end (+Inf) is never due. The time is always after
// now: a job is priced at most once a round.
func refreshAt(now, at float64) float64 {
	if math.IsInf(at, 1) {
		return at
	}
	if due := now + (at-now)/2; due > now {
		return due
	}
	return math.Nextafter(now, math.Inf(1))
}

// Name implements engine.Policy.
func (f *FIFO) Name() string { return "fifo" }

// Schedule implements engine.Policy.
func (f *FIFO) Schedule(s *engine.Snapshot) engine.Plan {
	defer func() { f.snap = nil }() // keep no snapshot past its round
	f.newRound(s.Round)
	f.lazy.Next(s.Round)
	if f.kept.Begin(s) {
		return f.keptRound(s) // fifo_kept.go
	}
	f.queue.invalidate()
	// Running jobs first (never preempted), then the queue in submit order.
	jobs := s.ActiveJobs()
	order := slices.Grow(f.order[:0], len(jobs))
	for _, st := range jobs {
		if len(st.GPUs) > 0 {
			order = append(order, st)
		}
	}
	for _, st := range jobs {
		if len(st.GPUs) == 0 {
			order = append(order, st)
		}
	}
	// The order's memory is kept for the next round, not its jobs.
	defer func() { clear(order); f.order = order[:0] }()
	plan := f.pool.Greedy(s, order, !f.Backfill, f.run)
	f.run = plan.Run
	if f.Backfill && lazyGreedy(s, &plan, &f.lazy, order, nil, fifoKeyTerms) {
		return plan
	}
	f.queue.why.PlanAppend(s, &plan, order, fifoTerms)
	if !f.Backfill {
		f.queue.why.PredictStarts(s, &plan, order, true, f.endOf(s, len(jobs)))
	}
	return plan
}

// endOf returns the cached end of a running job, computing it per launch
// and allocation and again when due (refreshAt); jobs that left are
// dropped once the cache holds more than twice the active jobs (active of
// them: the list itself is read only then, as a JobsOnDemand policy
// must).
func (f *FIFO) endOf(s *engine.Snapshot, active int) func(*engine.Status, engine.Assignment) float64 {
	if len(f.ends) > 2*active+16 {
		jobs := s.ActiveJobs()
		live := make(map[string]fifoEnd, len(jobs))
		for _, st := range jobs {
			if e, ok := f.ends[st.Job.ID]; ok {
				live[st.Job.ID] = e
			}
		}
		f.ends = live
	}
	if f.ends == nil {
		f.ends = map[string]fifoEnd{}
	}
	f.snap = s // Schedule lets it go as it returns
	if f.endFn == nil {
		f.endFn = f.endAt // made once: a closure made every round would be allocated every round
	}
	return f.endFn
}

// endAt is when st ends on a, from the cache when it holds st's end for
// its launch and allocation (endOf's) and the end is not due to be priced
// again (refreshAt), in the round being planned.
func (f *FIFO) endAt(st *engine.Status, a engine.Assignment) float64 {
	return f.end(st, a).at
}

// end is endAt's cache entry for st on a, priced now when the cache holds
// none that stands (at is the end, for a waiting job too).
func (f *FIFO) end(st *engine.Status, a engine.Assignment) fifoEnd {
	s := f.snap
	// A running job's end holds while it keeps its allocation, until it
	// is due; a waiting job's time to run holds while its progress does.
	running := len(st.GPUs) > 0
	if e, ok := f.ends[st.Job.ID]; ok && e.gpus == a.GPUs && e.typ == a.GPUType && e.starts == st.Starts && e.running == running {
		if running && s.Now < e.due {
			return e
		}
		if !running && e.progress == s.Progress(st) {
			e.at += s.Now
			return e
		}
	}
	at := explain.ModelEnd(s, st, a) // pulls a running job's progress (Snapshot.Remaining)
	e := fifoEnd{typ: a.GPUType, gpus: a.GPUs, starts: st.Starts, running: running, progress: s.Progress(st), at: at}
	if running {
		e.due = refreshAt(s.Now, at)
	} else {
		e.at = at - s.Now
	}
	if !running || len(st.GPUs) == a.GPUs {
		f.ends[st.Job.ID] = e
	}
	e.at = at
	return e
}

// Incremental implements engine.IncrementalPolicy: FIFO plans from what
// changed every round whose jobs all run on the GPUs they ask for, on
// one GPU type with none down (fifo_kept.go).
func (f *FIFO) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed
// (Plan.Keep) rather than in full: for tests and benchmarks.
func (f *FIFO) KeptRounds() int { return f.kept.Kept }

// JobsOnDemand implements engine.JobsOnDemand: a round planned from what
// changed reads the roster, not the list of the active jobs; a full round
// (and a rebuild of what FIFO keeps) asks for the list first
// (Snapshot.ActiveJobs).
func (f *FIFO) JobsOnDemand() bool { return true }

// ProgressFree implements engine.ProgressFree: with backfill FIFO predicts
// no starts, so it never reads progress; without, its predictions read the
// running jobs' remaining times.
func (f *FIFO) ProgressFree() bool { return f.Backfill }

// ProgressOnDemand implements engine.ProgressOnDemand: without backfill
// FIFO reads a running job's progress (Snapshot.Remaining) only to predict
// its end, at the first round in which some job waits while it runs and
// again at each halving of the time it has left (endOf's cache, refreshAt,
// fifoQueue); a simulator need not advance the other running jobs for it.
func (f *FIFO) ProgressOnDemand() bool { return true }

// startAll is the Run of a Keep plan that starts every job of waiting, in
// that order, each on the GPUs it asks for, in run's memory.
func startAll(run []engine.Assignment, waiting []*engine.Status) []engine.Assignment {
	run = run[:0]
	for _, st := range waiting {
		j := st.Job
		run = append(run, engine.Assignment{Job: j.ID, GPUs: j.GPUs, GPUType: j.GPUType})
	}
	return run
}

// SRTF runs the jobs with the least remaining time first, on their requested
// GPUs, preempting longer ones. Remaining time comes from the performance
// model, which in a simulation is the ground truth: an oracle.
type SRTF struct {
	// kept is what the rounds planned from what changed read (issue 19).
	kept  roster.Roster
	order srtfOrder // the waiting jobs by remaining time, kept across rounds (srtf_order.go)
	run   []engine.Assignment
	why   explain.Queue   // the waiting jobs' reasons, worked out when read
	full  explain.Scratch // the reasons' memory in rounds that write them all
	pool  alloc.Pool      // the greedy pass's, kept (alloc.Pool.Greedy)
	stops stopKeeper      // a congested round's plan as Keep and Stop (keep_stops.go)
	// The round's snapshot while it is planned (remaining reads it), and
	// the method values made once from it.
	snap  *engine.Snapshot
	rem   func(*engine.Status) float64
	key   func(int, *engine.Status) float64
	terms func([]byte, *engine.Status) []byte
}

// Name implements engine.Policy.
func (*SRTF) Name() string { return "srtf" }

// Incremental implements engine.IncrementalPolicy: SRTF plans a round in
// which every active job fits from what changed. Its order moves with the
// running jobs' progress, so any other round is planned in full.
func (p *SRTF) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed.
func (p *SRTF) KeptRounds() int { return p.kept.Kept }

// JobsOnDemand implements engine.JobsOnDemand: a round in which every job
// fits reads the roster; a full round asks for the active jobs first
// (Snapshot.ActiveJobs).
func (p *SRTF) JobsOnDemand() bool { return true }

// ProgressOnDemand implements engine.ProgressOnDemand: SRTF reads progress
// only through Snapshot.Remaining. A round planned from what changed reads
// the waiting jobs' alone (their progress stands still); a round planned in
// full reads every running job's, as its rule must: its order moves with
// each running job's remaining time.
func (p *SRTF) ProgressOnDemand() bool { return true }

// Schedule implements engine.Policy.
func (p *SRTF) Schedule(s *engine.Snapshot) engine.Plan {
	p.init()
	p.snap = s
	defer func() { p.snap = nil }() // keep no snapshot past its round
	p.why.Next(s.Round)
	if p.kept.Begin(s) && p.kept.Fits(s) {
		// Every job runs; the waiting ones start in the full pass's
		// order, which puts them by remaining time, then submission
		// (their progress stands still while they wait).
		p.kept.Kept++
		p.order.stop()
		p.run = startAll(p.run, alloc.SortByKey(p.kept.Waiting(), p.rem))
		return engine.Plan{Run: p.run, Keep: true}
	}
	s.ActiveJobs()
	order := p.order.order(s, p.rem)
	plan := p.pool.Greedy(s, order, false, p.run)
	p.run = plan.Run
	if lazyGreedy(s, &plan, &p.why, order, p.key, srtfTerms) {
		p.stops.keep(s, &plan, order) // the engine then touches only the jobs that change (keep_stops.go)
		return plan
	}
	p.full.PlanAppend(s, &plan, order, p.terms)
	return plan
}

// init makes SRTF's method values once (one made every round would be
// allocated every round).
func (p *SRTF) init() {
	if p.rem == nil {
		p.rem, p.key, p.terms = p.remaining, p.keyOf, p.appendTerms
	}
}

// remaining is st's remaining time on the GPUs it asks for, SRTF's key,
// in the round being planned.
func (p *SRTF) remaining(st *engine.Status) float64 {
	return p.snap.Remaining(st, st.Job.GPUs, "")
}

// keyOf is remaining as explain.Order's Key, for the job at index i of
// the round's order (srtfOrder.order's): the key the order read, not read
// again.
func (p *SRTF) keyOf(i int, st *engine.Status) float64 { return p.order.Key(i, st) }

// appendTerms appends st's remaining time (srtfTerms) to b, explain's
// terms in a round whose reasons are written in full.
func (p *SRTF) appendTerms(b []byte, st *engine.Status) []byte {
	return srtfTerms(b, st, p.remaining(st), [2]int{})
}

// srtfTerms states a job's remaining time (key), as the full pass's terms:
// "remaining 120 s on 4 GPUs" (fmt's %.0f and %d, without boxing them).
func srtfTerms(b []byte, st *engine.Status, rem float64, _ [2]int) []byte {
	b = append(b, "remaining "...)
	b = strconv.AppendFloat(b, rem, 'f', 0, 64)
	b = append(b, " s on "...)
	b = strconv.AppendInt(b, int64(st.Job.GPUs), 10)
	return append(b, " GPUs"...)
}

// lazyGreedy leaves the reasons of the jobs that plan, the greedy pass
// over order, leaves waiting to q (engine.Plan.Explain, explain.Queue)
// when s allows it, writing those of the jobs it preempts or shrinks;
// false when the reasons are to be written in full.
func lazyGreedy(s *engine.Snapshot, plan *engine.Plan, q *explain.Queue, order []*engine.Status,
	key func(int, *engine.Status) float64, terms func([]byte, *engine.Status, float64, [2]int) []byte) bool {
	if !explain.Lazy(s) {
		return false
	}
	given, ok := q.Given(order, plan.Run)
	if !ok || !q.Record(s, plan, &explain.Order{Jobs: order, Given: given, Key: key, Terms: terms}) {
		return false
	}
	plan.Explain = q
	return true
}

// EDF runs the jobs with the earliest deadlines first, preempting later ones.
type EDF struct {
	// kept is what the rounds planned from what changed read (issue 19).
	kept  roster.Roster
	order edfOrder // the active jobs by deadline, kept across rounds (edf_order.go)
	run   []engine.Assignment
	why   explain.Queue   // the waiting jobs' reasons, worked out when read
	full  explain.Scratch // the reasons' memory in rounds that write them all
	pool  alloc.Pool      // the greedy pass's, kept (alloc.Pool.Greedy)
	stops stopKeeper      // a congested round's plan as Keep and Stop (keep_stops.go)
}

// Name implements engine.Policy.
func (*EDF) Name() string { return "edf" }

// Incremental implements engine.IncrementalPolicy: EDF plans a round in
// which every active job fits from what changed; in the other rounds it
// keeps its order of the active jobs from the last (edf_order.go).
func (p *EDF) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed.
func (p *EDF) KeptRounds() int { return p.kept.Kept }

// JobsOnDemand implements engine.JobsOnDemand: a round in which every job
// fits reads the roster; a full round asks for the active jobs first
// (Snapshot.ActiveJobs).
func (p *EDF) JobsOnDemand() bool { return true }

// ProgressFree implements engine.ProgressFree: EDF orders by deadline.
func (p *EDF) ProgressFree() bool { return true }

// Schedule implements engine.Policy.
func (p *EDF) Schedule(s *engine.Snapshot) engine.Plan {
	p.why.Next(s.Round)
	if p.kept.Begin(s) && p.kept.Fits(s) {
		// Every job runs; the waiting ones start by deadline, as the
		// full pass orders them. The kept order misses this round.
		p.kept.Kept++
		p.order.stop()
		p.run = startAll(p.run, alloc.SortByKey(p.kept.Waiting(), edfKey))
		return engine.Plan{Run: p.run, Keep: true}
	}
	s.ActiveJobs()
	order := p.order.order(s)
	plan := p.pool.Greedy(s, order, false, p.run)
	p.run = plan.Run
	if lazyGreedy(s, &plan, &p.why, order, nil, appendDeadline) {
		p.stops.keep(s, &plan, order) // the engine then touches only the jobs that change (keep_stops.go)
		return plan
	}
	p.full.PlanAppend(s, &plan, order, deadlineTerms)
	return plan
}

// appendDeadline is deadlineTerms as explain.Order's Terms.
func appendDeadline(b []byte, st *engine.Status, _ float64, _ [2]int) []byte {
	return deadlineTerms(b, st)
}

// deadlineTerms appends a job's deadline to b: "deadline t=3600 s" (fmt's
// %.0f, without boxing it), or "no deadline".
func deadlineTerms(b []byte, st *engine.Status) []byte {
	if st.Job.Deadline > 0 {
		b = append(b, "deadline t="...)
		b = strconv.AppendFloat(b, st.Job.Deadline, 'f', 0, 64)
		return append(b, " s"...)
	}
	return append(b, "no deadline"...)
}
