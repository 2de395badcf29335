package chronus

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/solver"
)

// chronusPolicies registers the policies this file defines; Policies calls it.
func chronusPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "chronus",
		Summary: "Chronus (SoCC'21): SLO jobs admitted only if every admitted job still packs before its deadline; " +
			"each lease a MILP (GLPK) picks which admitted jobs hold the lease and which deadline option each meets; " +
			"leftover GPUs go to best-effort and unadmitted jobs, least remaining GPU-time first",
		Knobs: "lease=60: lease length, s (ElasticFlow's runs use 240); objective=adaptive: what the MILP does with the " +
			"current lease besides meeting deadlines (maximize: run SLO work early; minimize: leave it to best-effort jobs; " +
			"adaptive: minimize while unadmitted SLO jobs wait, else maximize; none); tolerate=1: admit a job that only fits " +
			"by tolerate x its last deadline (relative to submit); margin=1.1: safety factor on remaining time; " +
			"overhead=0.5: checkpoint+resume seconds per lease per (1 + log2 GPUs); value=10: a strict deadline's value " +
			"(soft jobs carry their own); horizon=30: leases the MILP looks ahead (jobs whose first deadline is further wait); " +
			"maxjobs=1200: admitted jobs in the MILP, the most urgent; the rest are packed greedily into what it leaves (the artifact's MAX_SEARCH_JOB); gap=0.01: MILP relative gap; decline=false: decline SLO jobs admission cannot fit instead of running them on spare GPUs",
		NeedsDeadlines: true,
		NeedsSolver:    true,
		Defaults:       DefaultKnobs,
		Build:          contract.Typed(DefaultKnobs, func(_ contract.Context, k Knobs) (*Chronus, error) { return New(k) }),
	})
}

// Knobs are Chronus' knobs (`tide policies chronus` explains them).
type Knobs struct {
	Lease     float64 `knob:"lease"`     // s, > 0
	Objective string  `knob:"objective"` // adaptive, maximize, minimize or none
	Tolerate  float64 `knob:"tolerate"`  // >= 1
	Margin    float64 `knob:"margin"`    // >= 1
	Overhead  float64 `knob:"overhead"`  // s per lease per (1 + log2 GPUs)
	Value     float64 `knob:"value"`     // value of meeting a strict deadline
	Horizon   int     `knob:"horizon"`   // leases, >= 1
	MaxJobs   int     `knob:"maxjobs"`   // >= 1
	Gap       float64 `knob:"gap"`       // MILP relative gap
	// Decline refuses (declines) an SLO job admission cannot fit, instead
	// of running it on spot capacity (ElasticFlow's comparisons).
	Decline bool `knob:"decline"`
}

// DefaultKnobs are Chronus' defaults: the artifact's, with a lease of 60 s.
var DefaultKnobs = Knobs{Lease: 60, Objective: "adaptive", Tolerate: 1, Margin: 1.1, Overhead: 0.5, Value: 10,
	Horizon: 30, MaxJobs: 1200, Gap: 0.01}

// Chronus is the deadline-aware lease scheduler of Chronus (SoCC'21),
// following ChronusArtifact's time_aware_with_lease scheduler:
//
//   - A job with a deadline (an SLO job) is admitted when it arrives if all
//     admitted jobs, it included, still pack into lease blocks before one
//     of their deadlines (the artifact's greedy packing); otherwise it runs
//     only on spare GPUs, like a best-effort job, and is not guaranteed.
//   - At the first round of each lease, a MILP over the admitted jobs
//     (solveLeaseMILP) picks for each one a deadline option (strict jobs
//     have one, soft jobs several of falling value) and the lease blocks it
//     runs in, maximising the options' total value under the GPUs per
//     block; the jobs given the current block hold their GPUs for the lease.
//   - The rest of the GPUs are spot capacity: best-effort and unadmitted
//     jobs first, least remaining GPU-time first; then admitted jobs not
//     holding this lease, least slack x GPUs first; then jobs that can no
//     longer meet any deadline. Between lease boundaries running spot jobs
//     keep their GPUs; new arrivals take only free ones.
//
// Remaining time is the performance model's (the trace's duration, as the
// artifact reads it), padded by Margin and the per-lease checkpoint cost.
// Jobs run on their requested GPU count.
type Chronus struct {
	Knobs
	name string
	// milp solves the lease problem (solveLeaseMILP when nil; tests force
	// failures through it).
	milp func(jobs []leaseJob, capacity []int, now leaseNowWeight, gap float64) (*leasePlan, error)

	// Scratch reused from round to round: the round's jobs, the reasons'
	// memory, and this round's classes and declined jobs, for appendTerms.
	buf      []chronusJob
	explain  explain.Scratch
	terms    func(b []byte, st *engine.Status) []byte
	class    map[*engine.Status]int
	declined []string
	// The round's lists, kept so that a steady round allocates nothing
	// (issue 19): the jobs, the admitted ones, those declined, the order
	// (as jobs and as statuses) and the last plan's Run (the engine keeps
	// none of a plan's slices).
	jobs, admitted, order []*chronusJob
	decline               []string
	sts                   []*engine.Status
	run                   []engine.Assignment
	// pool is the greedy pass's, kept (alloc.Pool.Greedy): GreedyInto's
	// sync.Pool drops its pools at a garbage collection.
	pool alloc.Pool
	// lazy works out the waiting jobs' reasons when read (explain.Queue),
	// from each one's class as the round took it; key takes it.
	lazy explain.Queue
	key  func(i int, st *engine.Status) float64
}

// Chronus' memo slots.
const (
	chronusClass  = 0 // one of the chronus* classes below
	chronusHeld   = 1 // lease index + 1 of the lease the job holds a guaranteed block in
	chronusSolved = 2 // lease index + 1 of the last lease MILP that saw the job
	chronusOption = 3 // option + 1 the last lease problem chose (0 none)
)

// Chronus' job classes (memo slot chronusClass).
const (
	chronusNew        = 0
	chronusAdmitted   = 1
	chronusUnadmitted = 2 // SLO job refused a guarantee: runs on spot capacity
	chronusBestEffort = 3
	chronusLost       = 4 // SLO job that can no longer meet any deadline
)

// New builds Chronus with knobs k, refusing values out of range; it needs
// GLPK (package solver).
func New(k Knobs) (*Chronus, error) {
	for _, f := range []struct {
		key      string
		v, least float64
	}{{"lease", k.Lease, 0}, {"tolerate", k.Tolerate, 1}, {"margin", k.Margin, 1}, {"overhead", k.Overhead, 0}, {"value", k.Value, 0}, {"gap", k.Gap, 0}} {
		if f.v < f.least || (f.key == "lease" && f.v == 0) {
			return nil, fmt.Errorf("policy chronus: %s=%v: want a number >= %v%s", f.key, f.v, f.least, map[bool]string{true: " (and > 0)"}[f.key == "lease"])
		}
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"horizon", k.Horizon}, {"maxjobs", k.MaxJobs}} {
		if f.v < 1 || f.v > 1e7 {
			return nil, fmt.Errorf("policy chronus: %s=%v: want a whole number >= 1", f.key, f.v)
		}
	}
	switch k.Objective {
	case "adaptive", "maximize", "minimize", "none":
	default:
		return nil, fmt.Errorf("policy chronus: objective=%q: want adaptive, maximize, minimize or none", k.Objective)
	}
	if err := solver.Available(); err != nil {
		return nil, fmt.Errorf("policy chronus: %w", err)
	}
	return &Chronus{Knobs: k, name: "chronus"}, nil
}

// Name implements engine.Policy.
func (c *Chronus) Name() string { return c.name }

// ProgressOnDemand implements engine.ProgressOnDemand: Chronus reads
// progress only through Snapshot.Remaining, every active job's every round
// (admission and the lease MILP weigh every job's remaining time, as its
// rule must), so a round pulls every running job.
func (c *Chronus) ProgressOnDemand() bool { return true }

// ExplainsWhenRead implements engine.ExplainsWhenRead: the reasons of the
// jobs a round leaves waiting are worked out when read (explain.Queue),
// every round: a waiting job's text states the jobs ahead of it and the
// GPUs free, which move as jobs are admitted, lose their deadlines or
// change places, so writing them costs a new string for each that moved
// (issue 19).
func (c *Chronus) ExplainsWhenRead() bool { return true }

// chronusJob is one job during a round.
type chronusJob struct {
	st   *engine.Status
	memo engine.Memo
	rem  float64 // remaining seconds on its GPUs, unpadded
	// startCost is the seconds a (re)start would cost it now: 0 while it
	// runs.
	startCost float64
}

// options are the job's deadline options as lease blocks from lease k.
func (c *Chronus) options(j *chronusJob, k int) []leaseOption {
	jb := j.st.Job
	if u := jb.Utility; u != nil {
		out := make([]leaseOption, len(u.Deadlines))
		for i, d := range u.Deadlines {
			out[i] = leaseOption{Blocks: leaseBlocks(d, c.Lease, k), Value: u.Values[i]}
		}
		return out
	}
	return []leaseOption{{Blocks: leaseBlocks(jb.Deadline, c.Lease, k), Value: c.Value}}
}

// lastDeadline is the job's latest deadline, s.
func lastDeadline(j *chronusJob) float64 {
	if u := j.st.Job.Utility; u != nil {
		return u.Deadlines[len(u.Deadlines)-1]
	}
	return j.st.Job.Deadline
}

// need is the lease blocks the job still needs: remaining time padded by
// the margin and the checkpoint/resume cost each lease may add
// (ChronusArtifact: estimate = duration x 1.1 x (1 + (1 + log2 n) x
// 0.5 / lease)).
// A job not running now also pays its (re)start cost (the model's).
// ahead is the seconds before the first block starts (admission between
// boundaries), during which a running job keeps running: they count as done.
func (c *Chronus) need(j *chronusJob, ahead float64) int {
	n := float64(j.st.Job.GPUs)
	rem := j.rem
	if len(j.st.GPUs) > 0 {
		rem = max(0, rem-ahead)
	}
	est := rem*c.Margin*(1+(1+math.Log2(n))*c.Overhead/c.Lease) + j.startCost
	return int(math.Ceil(est/c.Lease - 1e-9))
}

// leaseJobOf is the job as the lease problem sees it from lease k, with
// horizon h: options past the horizon are cut to it (conservative).
func (c *Chronus) leaseJobOf(j *chronusJob, k, h int, ahead float64) leaseJob {
	lj := leaseJob{Gpus: j.st.Job.GPUs, Need: c.need(j, ahead)}
	for _, o := range c.options(j, k) {
		o.Blocks = max(min(o.Blocks, h), 0)
		lj.Options = append(lj.Options, o) // kept when too tight, so indexes match the job's options
	}
	return lj
}

// feasible reports whether any option leaves room for the blocks needed.
func (l *leaseJob) feasible() bool {
	for _, o := range l.Options {
		if o.Blocks >= l.Need {
			return true
		}
	}
	return false
}

// Schedule implements engine.Policy.
func (c *Chronus) Schedule(s *engine.Snapshot) engine.Plan {
	c.lazy.Next(s.Round)
	k := int(math.Floor(s.Now/c.Lease + 1e-9))
	capTotal := s.Cluster.TotalGPUs()
	jobs := slices.Grow(c.jobs[:0], len(s.Jobs))[:len(s.Jobs)]
	c.buf = slices.Grow(c.buf[:0], len(s.Jobs))[:len(s.Jobs)]
	admitted := c.admitted[:0]
	defer func() {
		// The statuses are the engine's: let ended jobs go.
		clear(c.buf)
		clear(c.jobs)
		clear(c.admitted)
		clear(c.order)
		clear(c.sts)
	}()
	for i, st := range s.Jobs {
		j := &c.buf[i]
		*j = chronusJob{st: st, memo: st.Memo, rem: s.Remaining(st, st.Job.GPUs, "")}
		if len(st.GPUs) == 0 {
			cost := s.Model.Costs(st.Job)
			j.startCost = cost.Start
			if st.Starts > 0 {
				j.startCost = cost.Restart
			}
		}
		jobs[i] = j
		if int(j.memo[chronusClass]) == chronusAdmitted {
			admitted = append(admitted, j)
		}
	}
	// Admission, in submission order. Admission looks as far as the job's
	// own deadlines (no horizon): it is the promise made to the user. It
	// counts whole leases from the next boundary (the current one when Now
	// is on it), as the artifact does: the rest of a lease already under way
	// is promised to no one.
	next := int(math.Ceil(s.Now/c.Lease - 1e-9))
	declined := c.decline[:0]
	var adm *admitter // made at the first newcomer
	for _, j := range jobs {
		if int(j.memo[chronusClass]) != chronusNew {
			continue
		}
		if j.st.Job.Deadline == 0 {
			j.memo[chronusClass] = chronusBestEffort
			continue
		}
		if adm == nil {
			adm = c.newAdmitter(next, capTotal, float64(next)*c.Lease-s.Now)
			for _, a := range admitted {
				adm.add(a)
			}
		}
		if now, ok := adm.try(j); ok {
			j.memo[chronusClass] = chronusAdmitted
			if now && next == k {
				// Admitted on a boundary and its packing needs this lease.
				j.memo[chronusHeld] = float64(k + 1)
			}
			admitted = append(admitted, j)
			adm.add(j)
		} else {
			j.memo[chronusClass] = chronusUnadmitted
			if c.Decline {
				declined = append(declined, j.st.Job.ID)
			}
		}
	}
	// A job that can no longer meet its last deadline even running from now
	// on ranks last (the artifact's LOWEST queue).
	unadmitted := false
	for _, j := range jobs {
		cl := int(j.memo[chronusClass])
		if (cl == chronusAdmitted || cl == chronusUnadmitted) && s.Now+j.rem > lastDeadline(j) {
			j.memo[chronusClass] = chronusLost
		}
		unadmitted = unadmitted || int(j.memo[chronusClass]) == chronusUnadmitted
	}
	admitted = slices.DeleteFunc(admitted, func(j *chronusJob) bool { return int(j.memo[chronusClass]) != chronusAdmitted })
	// The lease problem, once per lease: when no admitted job has been seen
	// by a solve in lease k yet.
	boundary := len(admitted) > 0
	for _, j := range admitted {
		if int(j.memo[chronusSolved]) == k+1 {
			boundary = false
			break
		}
	}
	var warn []engine.Warning
	if boundary {
		if err := c.solve(admitted, k, capTotal, unadmitted); err != nil {
			warn = append(warn, engine.Warning{Kind: engine.WarnFallback,
				Reason: fmt.Sprintf("%s: lease MILP failed, admitted jobs packed greedily for the lease: %v", c.name, err)})
		}
	}
	// Order: guaranteed jobs, then (between boundaries) the spot jobs running
	// now, then the rest by spot priority.
	rank := func(j *chronusJob) int {
		switch int(j.memo[chronusClass]) {
		case chronusBestEffort, chronusUnadmitted:
			return 0
		case chronusAdmitted:
			return 1
		}
		return 2
	}
	key := func(j *chronusJob) float64 {
		if rank(j) == 1 {
			return (j.st.Job.Deadline - s.Now - j.rem*c.Margin) * float64(j.st.Job.GPUs)
		}
		return j.rem * float64(j.st.Job.GPUs)
	}
	group := func(j *chronusJob) int {
		switch {
		case int(j.memo[chronusClass]) == chronusAdmitted && int(j.memo[chronusHeld]) == k+1:
			return 0
		case !boundary && len(j.st.GPUs) > 0:
			return 1
		}
		return 2
	}
	order := slices.DeleteFunc(append(c.order[:0], jobs...), func(j *chronusJob) bool { return slices.Contains(declined, j.st.Job.ID) })
	slices.SortStableFunc(order, func(a, b *chronusJob) int {
		if ga, gb := group(a), group(b); ga != gb {
			return cmp.Compare(ga, gb)
		}
		if ra, rb := rank(a), rank(b); ra != rb {
			return cmp.Compare(ra, rb)
		}
		return cmp.Compare(key(a), key(b)) // stable: submission order on ties
	})
	sts := slices.Grow(c.sts[:0], len(order))[:len(order)]
	for i, j := range order {
		sts[i] = j.st
	}
	c.jobs, c.admitted, c.order, c.sts = jobs, admitted, order, sts
	plan := c.pool.Greedy(s, sts, false, c.run)
	c.run = plan.Run
	if len(declined) > 0 {
		plan.Decline = declined
	}
	c.decline = declined
	plan.Warnings = warn
	if c.terms == nil { // made once: a closure made every round is allocated every round
		c.terms = c.appendTerms
		c.key = func(i int, _ *engine.Status) float64 { return c.order[i].memo[chronusClass] }
	}
	if explain.Lazy(s) {
		// The waiting jobs' reasons are worked out when read; a plan
		// that declines jobs is explained in full (Record says false).
		if given, ok := c.lazy.Given(sts, plan.Run); ok &&
			c.lazy.Record(s, &plan, &explain.Order{Jobs: sts, Given: given, Key: c.key, Terms: chronusTerms}) {
			plan.Explain = &c.lazy
			c.memos(&plan)
			return plan
		}
	}
	if c.class == nil {
		c.class = make(map[*engine.Status]int, len(jobs))
	}
	for _, j := range jobs {
		c.class[j.st] = int(j.memo[chronusClass])
	}
	c.declined = declined
	c.explain.PlanAppend(s, &plan, sts, c.terms)
	c.declined = nil
	// The statuses are the engine's. Key by key: clear draws a new hash
	// seed, under which the map refilled next round may grow again.
	for st := range c.class {
		delete(c.class, st)
	}
	c.memos(&plan)
	return plan
}

// memos lists in plan the memos of the round's jobs that changed.
func (c *Chronus) memos(plan *engine.Plan) {
	for _, j := range c.jobs {
		if j.memo != j.st.Memo {
			if plan.Memo == nil {
				plan.Memo = map[string]engine.Memo{}
			}
			plan.Memo[j.st.Job.ID] = j.memo
		}
	}
}

// appendTerms appends a job's standing in this round to b (its class,
// its deadline).
func (c *Chronus) appendTerms(b []byte, st *engine.Status) []byte {
	if c.class[st] == chronusUnadmitted && slices.Contains(c.declined, st.Job.ID) {
		b = strconv.AppendFloat(append(b, "deadline t="...), st.Job.Deadline, 'f', 0, 64)
		return append(b, " s does not pack into the leases with the admitted jobs"...)
	}
	return chronusTerms(b, st, float64(c.class[st]), [2]int{})
}

// chronusTerms appends the standing of a job of class class (one of the
// chronus* classes) that the round does not decline to b: its class, its
// deadline.
func chronusTerms(b []byte, st *engine.Status, class float64, _ [2]int) []byte {
	deadline := func(b []byte) []byte { return strconv.AppendFloat(b, st.Job.Deadline, 'f', 0, 64) }
	switch int(class) {
	case chronusAdmitted:
		b = deadline(append(b, "admitted (deadline t="...))
		return append(b, " s) but holds no block of this lease; runs on spot GPUs left"...)
	case chronusUnadmitted:
		b = deadline(append(b, "not admitted (deadline t="...))
		return append(b, " s does not pack with the admitted jobs); spot GPUs, least GPU-time first"...)
	case chronusLost:
		return append(b, "can no longer meet its deadline; ranks last"...)
	}
	return append(b, "best effort on spot GPUs, least remaining GPU-time first"...)
}

// admitter admits newcomers one after another: try reports whether a
// newcomer packs with the admitted jobs (packLeases over all of them),
// first with its own deadlines, then, with Tolerate > 1, with its last
// deadline stretched up to Tolerate x its relative value, and whether its
// packing uses the current lease; add admits a job.
//
// packLeases packs jobs one at a time in a fixed order, each on the blocks
// the jobs before it left; so a newcomer's packing with the admitted jobs
// is the admitted jobs' packing up to the newcomer's place in that order,
// then the newcomer and the jobs after it. The admitter keeps the blocks
// left free before each place (checkpoints) and packs only the newcomer and
// the jobs behind it, and builds the admitted jobs' lease problems once per
// round instead of once per newcomer. No job takes a block past its
// options, so the checkpoints cover only the admitted jobs' options (the
// blocks after are all free).
type admitter struct {
	c           *Chronus
	k, capTotal int
	ahead       float64
	jobs        []leaseJob // the admitted jobs, in admission order (packLeases' tie-break)
	order       []int      // packLeases' order, indexes into jobs
	stride      int        // blocks per checkpoint, at least every admitted option's
	free        []int      // checkpoint q (free[q*stride:][:stride]): blocks free before order[q] packs
	fits        []bool     // fits[q]: every job before order[q] packed
	packed      int        // checkpoints valid up to this place
	trial, got  []int
}

func (c *Chronus) newAdmitter(k, capTotal int, ahead float64) *admitter {
	return &admitter{c: c, k: k, capTotal: capTotal, ahead: ahead, stride: 1}
}

// add adds an admitted job.
func (a *admitter) add(x *chronusJob) {
	l := a.c.leaseJobOf(x, a.k, math.MaxInt32, a.ahead)
	if !l.feasible() {
		// An admitted job already behind its plan still takes its
		// blocks, as early as it can.
		l.Options = []leaseOption{{Blocks: l.Need, Value: a.c.Value}}
	}
	a.jobs = append(a.jobs, l)
	at := a.place(len(a.jobs) - 1)
	a.order = slices.Insert(a.order, at, len(a.jobs)-1)
	a.packed = min(a.packed, at)
	if h := maxBlocks(l); h > a.stride {
		a.widen(max(h, 2*a.stride))
	}
}

// maxBlocks is the latest of l's options, in blocks.
func maxBlocks(l leaseJob) int {
	h := 0
	for _, o := range l.Options {
		h = max(h, o.Blocks)
	}
	return h
}

// place is where job i of a.jobs goes in packLeases' order among a.order.
func (a *admitter) place(i int) int {
	at, _ := slices.BinarySearchFunc(a.order, i, func(o, i int) int { return packCompare(a.jobs, o, i) })
	return at
}

// widen makes the checkpoints stride blocks long: the blocks added are free.
func (a *admitter) widen(stride int) {
	if len(a.free) > 0 {
		free := make([]int, 0, (len(a.order)+1)*stride)
		for q := range a.packed + 1 {
			free = append(free, a.free[q*a.stride:(q+1)*a.stride]...)
			for range stride - a.stride {
				free = append(free, a.capTotal)
			}
		}
		a.free = free
	}
	a.stride = stride
}

// pack brings the checkpoints up to date up to place upto.
func (a *admitter) pack(upto int) {
	if len(a.free) == 0 {
		for range a.stride {
			a.free = append(a.free, a.capTotal)
		}
		a.fits = append(a.fits[:0], true)
		a.packed = 0
	}
	if upto <= a.packed {
		return
	}
	a.free = slices.Grow(a.free[:(a.packed+1)*a.stride], (upto-a.packed)*a.stride)[:(upto+1)*a.stride]
	a.fits = slices.Grow(a.fits[:a.packed+1], upto-a.packed)[:upto+1]
	for q := a.packed; q < upto; q++ {
		next := a.free[(q+1)*a.stride : (q+2)*a.stride]
		copy(next, a.free[q*a.stride:(q+1)*a.stride])
		var opt int
		opt, a.got = packOne(a.jobs[a.order[q]], next, a.got[:0])
		a.fits[q+1] = a.fits[q] && opt >= 0
	}
	a.packed = upto
}

// try reports whether j packs with the admitted jobs (admit's contract);
// it does not add it.
func (a *admitter) try(j *chronusJob) (now, ok bool) {
	l := a.c.leaseJobOf(j, a.k, math.MaxInt32, a.ahead)
	if !l.feasible() {
		return false, false
	}
	if now, ok := a.trial1(l); ok {
		return now, true
	}
	if a.c.Tolerate <= 1 {
		return false, false
	}
	last := lastDeadline(j)
	stretched := leaseBlocks(j.st.Job.Submit+(last-j.st.Job.Submit)*a.c.Tolerate, a.c.Lease, a.k)
	l.Options = []leaseOption{{Blocks: stretched, Value: a.c.Value}}
	now, ok = a.trial1(l)
	return ok && now, ok
}

// trial1 packs the admitted jobs with l (one packLeases): whether every job
// packs, and whether l's packing uses the current lease.
func (a *admitter) trial1(l leaseJob) (now, ok bool) {
	a.jobs = append(a.jobs, l) // packCompare needs it in a.jobs
	self := len(a.jobs) - 1
	defer func() { a.jobs = a.jobs[:self] }()
	at := a.place(self)
	a.pack(at)
	if !a.fits[at] {
		return false, false
	}
	width := max(a.stride, maxBlocks(l))
	a.trial = append(a.trial[:0], a.free[at*a.stride:(at+1)*a.stride]...)
	for len(a.trial) < width {
		a.trial = append(a.trial, a.capTotal)
	}
	opt, got := packOne(l, a.trial, a.got[:0])
	a.got = got
	if opt < 0 {
		return false, false
	}
	now = slices.Contains(got, 0)
	for _, i := range a.order[at:] {
		if opt, a.got = packOne(a.jobs[i], a.trial, a.got[:0]); opt < 0 {
			return now, false
		}
	}
	return now, true
}

// solve runs the lease problem for lease k and records in the memos which
// admitted jobs hold the current lease and which option each was given. An
// error says the MILP failed and the jobs were packed greedily instead (the
// artifact's fallback).
func (c *Chronus) solve(admitted []*chronusJob, k, capTotal int, unadmitted bool) error {
	var lj []leaseJob
	var idx []*chronusJob
	for _, j := range admitted {
		j.memo[chronusSolved] = float64(k + 1)
		j.memo[chronusOption] = 0
		if int(j.memo[chronusHeld]) == k+1 {
			j.memo[chronusHeld] = 0 // the MILP decides who holds this lease
		}
		l := c.leaseJobOf(j, k, c.Horizon, 0)
		if !l.feasible() || l.Need == 0 {
			continue // first deadline past the horizon, or nothing left to run
		}
		lj = append(lj, l)
		idx = append(idx, j)
	}
	if len(lj) == 0 {
		return nil
	}
	capacity := make([]int, c.Horizon)
	for t := range capacity {
		capacity[t] = capTotal
	}
	var now leaseNowWeight
	switch c.Objective {
	case "maximize":
		now = 1
	case "minimize":
		now = -1
	case "adaptive":
		now = 1
		if unadmitted {
			now = -1
		}
	}
	// Past MaxJobs, the most urgent jobs (least slack) go to the MILP and
	// the rest are packed greedily into what it leaves (the artifact's
	// MAX_SEARCH_JOB, where jobs past the limit keep their cached plans).
	order := make([]int, len(lj))
	for i := range order {
		order[i] = i
	}
	slack := func(i int) int { return lj[i].Options[0].Blocks - lj[i].Need }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(slack(a), slack(b)) })
	nm := min(len(order), c.MaxJobs)
	head := make([]leaseJob, nm)
	for i := range head {
		head[i] = lj[order[i]]
	}
	p := &leasePlan{Option: make([]int, len(lj)), Blocks: make([][]bool, len(lj))}
	milp := c.milp
	if milp == nil {
		milp = solveLeaseMILP
	}
	hp, err := milp(head, capacity, now, c.Gap)
	if err != nil {
		hp, _ = packLeases(head, capacity) // GLPK failed: the artifact's fallback
	}
	for i := range head {
		p.Option[order[i]], p.Blocks[order[i]] = hp.Option[i], hp.Blocks[i]
		for t, b := range hp.Blocks[i] {
			if b {
				capacity[t] -= head[i].Gpus
			}
		}
	}
	if nm < len(order) {
		tail := make([]leaseJob, len(order)-nm)
		for i := range tail {
			tail[i] = lj[order[nm+i]]
		}
		tp, _ := packLeases(tail, capacity)
		for i := range tail {
			p.Option[order[nm+i]], p.Blocks[order[nm+i]] = tp.Option[i], tp.Blocks[i]
		}
	}
	for i, j := range idx {
		j.memo[chronusOption] = float64(p.Option[i] + 1)
		if p.runsNow(i) {
			j.memo[chronusHeld] = float64(k + 1)
		}
	}
	return err
}
