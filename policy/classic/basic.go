package classic

import (
	"fmt"

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
	// while its allocation and launch stay the same; a cache only, it
	// changes no decision.
	ends map[string]fifoEnd
	// kept is what the rounds planned from what changed read (issue 19).
	kept  roster.Roster
	queue fifoQueue
	run   []engine.Assignment // the last kept plan's Run
	why   fifoReasons         // reasons worked out when read (fifo_reasons.go)
	// lazy works out, with backfill, the waiting jobs' reasons when read.
	lazy explain.Queue
}

type fifoEnd struct {
	gpus, starts int
	running      bool
	progress     float64
	at           float64 // the end when running, else the time to run
}

// Name implements engine.Policy.
func (f *FIFO) Name() string { return "fifo" }

// Schedule implements engine.Policy.
func (f *FIFO) Schedule(s *engine.Snapshot) engine.Plan {
	f.newRound(s.Round)
	f.lazy.Next(s.Round)
	if f.kept.Begin(s) {
		return f.keptRound(s) // fifo_kept.go
	}
	f.queue.invalidate()
	// Running jobs first (never preempted), then the queue in submit order.
	order := make([]*engine.Status, 0, len(s.Jobs))
	for _, st := range s.Jobs {
		if len(st.GPUs) > 0 {
			order = append(order, st)
		}
	}
	for _, st := range s.Jobs {
		if len(st.GPUs) == 0 {
			order = append(order, st)
		}
	}
	plan := alloc.Greedy(s, order, !f.Backfill)
	if f.Backfill && lazyGreedy(s, &plan, &f.lazy, order, nil, fifoKeyTerms) {
		return plan
	}
	f.queue.why.PlanAppend(s, &plan, order, fifoTerms)
	if !f.Backfill && len(s.Cluster.GPUTypes()) == 1 {
		explain.PredictStarts(s, &plan, order, true, f.endOf(s))
	}
	return plan
}

// endOf returns the cached end of a running job, computing it once per
// launch and allocation; jobs that left are dropped.
func (f *FIFO) endOf(s *engine.Snapshot) func(*engine.Status, engine.Assignment) float64 {
	if len(f.ends) > 2*len(s.Jobs)+16 {
		live := make(map[string]fifoEnd, len(s.Jobs))
		for _, st := range s.Jobs {
			if e, ok := f.ends[st.Job.ID]; ok {
				live[st.Job.ID] = e
			}
		}
		f.ends = live
	}
	if f.ends == nil {
		f.ends = map[string]fifoEnd{}
	}
	return func(st *engine.Status, a engine.Assignment) float64 {
		// A running job's end holds while it keeps its allocation; a
		// waiting job's time to run holds while its progress does.
		running := len(st.GPUs) > 0
		if e, ok := f.ends[st.Job.ID]; ok && e.gpus == a.GPUs && e.starts == st.Starts && e.running == running && (running || e.progress == s.Progress(st)) {
			if running {
				return e.at
			}
			return s.Now + e.at
		}
		at := explain.ModelEnd(s, st, a) // pulls a running job's progress (Snapshot.Remaining)
		e := fifoEnd{gpus: a.GPUs, starts: st.Starts, running: running, progress: s.Progress(st), at: at}
		if !running {
			e.at = at - s.Now
		}
		if !running || len(st.GPUs) == a.GPUs {
			f.ends[st.Job.ID] = e
		}
		return at
	}
}

// Incremental implements engine.IncrementalPolicy: FIFO plans from what
// changed every round whose jobs all run on the GPUs they ask for, on
// one GPU type with none down (fifo_kept.go).
func (f *FIFO) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed
// (Plan.Keep) rather than in full: for tests and benchmarks.
func (f *FIFO) KeptRounds() int { return f.kept.Kept }

// ProgressFree implements engine.ProgressFree: with backfill FIFO predicts
// no starts, so it never reads progress; without, its predictions read the
// running jobs' remaining times.
func (f *FIFO) ProgressFree() bool { return f.Backfill }

// ProgressOnDemand implements engine.ProgressOnDemand: without backfill
// FIFO reads a running job's progress (Snapshot.Remaining) only to predict
// its end, once per launch, at the first round in which some job waits
// while it runs (endOf's cache, fifoQueue); a simulator need not advance
// the other running jobs for it.
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
	why   explain.Queue // the waiting jobs' reasons, worked out when read
}

// Name implements engine.Policy.
func (*SRTF) Name() string { return "srtf" }

// Incremental implements engine.IncrementalPolicy: SRTF plans a round in
// which every active job fits from what changed. Its order moves with the
// running jobs' progress, so any other round is planned in full.
func (p *SRTF) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed.
func (p *SRTF) KeptRounds() int { return p.kept.Kept }

// ProgressOnDemand implements engine.ProgressOnDemand: SRTF reads progress
// only through Snapshot.Remaining. A round planned from what changed reads
// the waiting jobs' alone (their progress stands still); a round planned in
// full reads every running job's, as its rule must: its order moves with
// each running job's remaining time.
func (p *SRTF) ProgressOnDemand() bool { return true }

// Schedule implements engine.Policy.
func (p *SRTF) Schedule(s *engine.Snapshot) engine.Plan {
	rem := func(st *engine.Status) float64 { return s.Remaining(st, st.Job.GPUs, "") }
	p.why.Next(s.Round)
	if p.kept.Begin(s) && p.kept.Fits(s) {
		// Every job runs; the waiting ones start in the full pass's
		// order, which puts them by remaining time, then submission
		// (their progress stands still while they wait).
		p.kept.Kept++
		p.order.stop()
		p.run = startAll(p.run, alloc.SortByKey(p.kept.Waiting(), rem))
		return engine.Plan{Run: p.run, Keep: true}
	}
	order := p.order.order(s, rem)
	plan := alloc.GreedyInto(s, order, false, p.run)
	p.run = plan.Run
	if lazyGreedy(s, &plan, &p.why, order, func(_ int, st *engine.Status) float64 { return rem(st) }, srtfTerms) {
		return plan
	}
	explain.Plan(s, &plan, order, func(st *engine.Status) string {
		return fmt.Sprintf("remaining %.0f s on %d GPUs", rem(st), st.Job.GPUs)
	})
	return plan
}

// srtfTerms states a job's remaining time (key), as the full pass's terms.
func srtfTerms(b []byte, st *engine.Status, rem float64, _ [2]int) []byte {
	return fmt.Appendf(b, "remaining %.0f s on %d GPUs", rem, st.Job.GPUs)
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
	why   explain.Queue // the waiting jobs' reasons, worked out when read
}

// Name implements engine.Policy.
func (*EDF) Name() string { return "edf" }

// Incremental implements engine.IncrementalPolicy: EDF plans a round in
// which every active job fits from what changed; in the other rounds it
// keeps its order of the active jobs from the last (edf_order.go).
func (p *EDF) Incremental() bool { return true }

// KeptRounds is how many rounds this instance planned from what changed.
func (p *EDF) KeptRounds() int { return p.kept.Kept }

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
	order := p.order.order(s)
	plan := alloc.GreedyInto(s, order, false, p.run)
	p.run = plan.Run
	if lazyGreedy(s, &plan, &p.why, order, nil, appendDeadline) {
		return plan
	}
	explain.Plan(s, &plan, order, deadlineTerms)
	return plan
}

// appendDeadline appends deadlineTerms(st) to b.
func appendDeadline(b []byte, st *engine.Status, _ float64, _ [2]int) []byte {
	return append(b, deadlineTerms(st)...)
}

// deadlineTerms states a job's deadline.
func deadlineTerms(st *engine.Status) string {
	if st.Job.Deadline > 0 {
		return fmt.Sprintf("deadline t=%.0f s", st.Job.Deadline)
	}
	return "no deadline"
}
