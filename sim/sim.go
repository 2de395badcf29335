// Package sim is tide's discrete-event simulator: the executor that replays
// a trace on a virtual clock, advancing each job with the performance model.
//
// A run is a pure function of its inputs: the same trace, cluster, model,
// policy and seed give the same report, byte for byte. Events at the same
// instant are handled in a fixed order: job boundaries and completions
// (by job index), then arrivals (in submission order), then one scheduling
// round if one is due.
package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/internal/minheap"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/report"
)

// Config is one simulation.
type Config struct {
	Cluster *cluster.Cluster
	Model   perf.Model
	Policy  engine.Policy
	Placer  engine.Placer
	// Round is the time between scheduling rounds, s (default 60). Rounds
	// fall on multiples of Round from time 0.
	Round float64
	// OnEvents also runs a round at every arrival and completion. Off, jobs
	// wait for the next round to start and freed GPUs stay idle until then,
	// as in the Pollux artifact simulator.
	OnEvents bool
	Seed     int64
	// WholeSeconds emulates the Pollux artifact simulator's time keeping:
	// it advances in steps of Round seconds and, when a job crosses a rate
	// boundary (an epoch) inside a step, rounds the time to reach it from
	// the step's start (or the previous boundary) to whole seconds, half to
	// even, as Python's round() does. Only for fidelity checks.
	WholeSeconds bool
	// Agents runs a job agent for every job (when the model is a
	// perf.Observer): it fits the job's goodput model from what the job
	// measures, reports hints to the engine and, for adaptive jobs, picks
	// the batch size. Elastic policies need it; it costs time otherwise.
	Agents bool
	// Sites, when set, makes capacity change over time (availability,
	// diurnal waves, faults) and prices moves between and inside sites
	// (sites.go).
	Sites *Sites
	// Trace names the trace in the report.
	Trace string
	// Progress, when set, is called now and then with the simulated time and
	// the number of jobs finished so far.
	Progress func(now float64, done, total int)
	// Handover, when > 0, checks a policy's persisted state
	// (engine.Stateful): after every Handover-th round the engine's policy
	// state is saved to bytes, and the following rounds are scheduled by
	// Fresh(), a new instance of the same policy, with those bytes loaded
	// (memos and round count included), as a live executor does after a
	// restart. A policy that declares all its state gives the same run,
	// byte for byte.
	Handover int
	Fresh    func() (engine.Policy, error)
}

type clock struct{ t float64 }

func (c *clock) Now() float64 { return c.t }

// running is the simulator's view of a job holding GPUs.
type running struct {
	idx      int
	st       *engine.Status
	last     float64 // progress and GPU time counted up to here
	delay    float64 // start/restart/resize seconds still to pay
	rate     float64 // progress per second once the delay is paid
	until    float64 // progress at which rate changes
	progress float64
	gen      int             // bumped on every change; stale events are ignored
	gpus     int             // GPUs held; the engine may have released them already
	held     []cluster.GPUID // which (the engine's slice, read only)
	alloc    perf.Alloc      // shape and batch configuration the job runs with
	pos      int             // index in simulator.live
	began    float64         // time of this (re)start
	from     float64         // progress at this (re)start
	site     int             // site index (multi-site runs), else -1
	partner  string          // the job sharing its GPUs, as rated now (share.go)
	part     float64         // the part of each GPU a fractional job holds, 0 for whole GPUs (fraction.go)
	// lazy says the rounds since synced (an index into the simulator's
	// round instants) have not been applied to it yet (lazy.go).
	lazy   bool
	synced int
}

type event struct {
	t   float64
	idx int
	gen int
	// late marks, under WholeSeconds, a boundary that the artifact reaches
	// zero seconds into the step starting at a round: after that round, not
	// before it (see push).
	late bool
}

// eventFirst is the order of the simulator's events (a heap:
// internal/minheap): by time, a boundary that is not late first, then by
// run.
func eventFirst(a, b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.late != b.late {
		return !a.late
	}
	return a.idx < b.idx
}

type simulator struct {
	// warnings are the policy's warnings by kind and reason, drained from
	// the engine after every round (countWarnings).
	warnings []report.WarningCount
	warnAt   map[[2]string]int
	cfg      Config
	clk      *clock
	eng      *engine.Engine
	jobs     []*job.Job // trace order
	recs     []report.JobRecord
	held     []float64  // by job index: seconds spent holding GPUs
	left     []float64  // by job index: when it finished or was declined, -1 before
	runs     []*running // by job index; nil when not running
	gens     []int      // by job index: bumped at every start and stop
	agents   []*agent   // by job index, when the model is a perf.Observer
	obs      perf.Observer
	live     []*running // the non-nil entries of runs, in no particular order
	slotIdx  []int32    // engine.Status.Slot -> job index, for the active jobs
	sharing  bool       // the model rates pairs (perf.Sharer): only then may the engine pack jobs
	livelock livelock   // the check that a run still moves (livelock.go)
	events   []event
	out      *report.Run
	alloc    int // GPUs held
	useful   int // GPUs held by jobs past their delay
	active   int // jobs submitted and not terminal
	nrun     int // jobs holding GPUs
	nShared  int // jobs holding GPUs they share with a partner
	nParts   int // fractional jobs running (fraction.go)
	gpuMarks []uint8
	done     int
	nEvents  int
	st       *sites // multi-site state; nil without Config.Sites

	// multiTenant is 0 until known, then 1 (one tenant) or 2 (several):
	// per-tenant GPUs are sampled only for several (fairness.go).
	multiTenant int
	// tenants indexes the trace's tenants: job index -> tenant index, the
	// names, and the GPUs each holds now (fairness.go).
	tenantOf   []int32
	tenantName []string
	tenantGPUs []int
	// tenantsChanged says tenantGPUs changed since the last sample.
	tenantsChanged bool
	// tenantLogged are the GPUs per tenant the tenant log says now;
	// tenantHalves the scratch for counting shared GPUs (fairness.go).
	tenantLogged, tenantHalves []int
	// frag is what the fragmentation sample keeps between samples
	// (fairness.go).
	frag frag

	// Lazy advance (lazy.go): lazy says rounds leave jobs past their
	// delay behind; instants are the rounds' times from the instBase-th
	// on; delayed the running jobs still paying a delay; eager turns it
	// all off (tests).
	lazy     bool
	instants []float64
	instBase int
	// lastOdd is the index (counted from the first instant ever logged)
	// of the last instant that is not a whole number of seconds, or is
	// below the one before it; -1 when none (syncWhole).
	lastOdd int
	delayed []*running
	eager   bool
	// lazyRounds counts the rounds that left running jobs behind, pulls
	// the jobs a policy's read brought up to date (PullProgress): for
	// tests.
	lazyRounds, pulls int
}

// Run replays jobs (in trace order; they are started in submission order)
// and returns what happened. A job the cluster or the model cannot run is an
// error naming the job; nothing is skipped.
func Run(cfg Config, jobs []*job.Job) (*report.Run, error) {
	run, _, err := runSim(cfg, jobs, false)
	return run, err
}

// Fits says why cluster c could never hold job j, or returns nil: the
// engine's rule (engine.Fits), which it applies at submission too.
func Fits(c *cluster.Cluster, j *job.Job) error { return engine.Fits(c, j) }

// runSim is Run, with every running job advanced at every round when eager
// (lazy.go); it returns the simulator too (for its counts).
func runSim(cfg Config, jobs []*job.Job, eager bool) (*report.Run, *simulator, error) {
	s, err := newSim(cfg, jobs, eager)
	if err != nil {
		return nil, nil, err
	}
	if err := s.loop(); err != nil {
		return nil, nil, err
	}
	s.finishRecords()
	return s.out, s, nil
}

// newSim checks cfg and jobs and makes the simulator that replays them.
func newSim(cfg Config, jobs []*job.Job, eager bool) (*simulator, error) {
	if cfg.Round == 0 {
		cfg.Round = 60
	}
	if cfg.Round < 0 || math.IsNaN(cfg.Round) {
		return nil, fmt.Errorf("sim: round must be > 0 seconds, got %v", cfg.Round)
	}
	// A job no placement could ever hold would wait to the end of the run
	// and fail it there, blaming the policy; say so at the start instead.
	for _, j := range jobs {
		if err := Fits(cfg.Cluster, j); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	s := &simulator{cfg: cfg, clk: &clock{}, jobs: jobs, eager: eager, lastOdd: -1}
	_, sharing := cfg.Model.(perf.Sharer)
	// The engine forgets jobs that ended: the simulator keeps their
	// records, and a replay of millions of jobs holds only the active ones.
	eng, err := engine.New(engine.Config{Cluster: cfg.Cluster, Model: cfg.Model, Policy: cfg.Policy, Placer: cfg.Placer, Clock: s.clk,
		Sharing: sharing, ForgetEnded: true, LazyCounters: true, Progress: s})
	s.sharing = sharing
	if err != nil {
		return nil, err
	}
	s.eng = eng
	s.frag.init(cfg.Cluster)
	s.recs = make([]report.JobRecord, len(jobs))
	s.held = make([]float64, len(jobs))
	s.left = make([]float64, len(jobs))
	for i := range s.left {
		s.left[i] = -1
	}
	s.runs = make([]*running, len(jobs))
	s.gens = make([]int, len(jobs))
	if o, ok := cfg.Model.(perf.Observer); ok && cfg.Agents {
		s.obs = o
		s.agents = make([]*agent, len(jobs))
	}
	byID := make(map[string]bool, len(jobs)) // only to refuse duplicates
	for i, j := range jobs {
		if err := j.Validate(); err != nil {
			return nil, err
		}
		if byID[j.ID] {
			return nil, fmt.Errorf("job %s: id appears twice in the trace", j.ID)
		}
		if err := cfg.Model.Check(j); err != nil {
			return nil, err
		}
		byID[j.ID] = true
		s.recs[i] = report.JobRecord{ID: j.ID, Tenant: j.Tenant, Model: j.Model, GPUs: j.GPUs,
			Submit: j.Submit, Start: -1, Finish: -1, Deadline: j.Deadline, State: string(job.Pending), Priority: j.Priority}
	}
	if cfg.Sites != nil {
		if s.st, err = newSites(*cfg.Sites, cfg.Cluster, len(jobs)); err != nil {
			return nil, err
		}
	}
	byID = nil
	s.out = &report.Run{Policy: cfg.Policy.Name(), Trace: cfg.Trace, Cluster: cfg.Cluster.String(),
		TotalGPUs: cfg.Cluster.TotalGPUs(), Seed: cfg.Seed}
	return s, nil
}

func (s *simulator) loop() error {
	order := make([]int, len(s.jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.jobs[order[a]].Submit < s.jobs[order[b]].Submit })
	next := 0 // next arrival in order
	round := s.cfg.Round
	tick := int64(1) // next round at tick*round
	lastReport := 0
	idle := 0 // consecutive rounds that left jobs waiting on an idle cluster with nothing to come
	for s.done < len(s.jobs) {
		// Choose the next instant.
		t := math.Inf(1)
		if next < len(order) {
			t = s.jobs[order[next]].Submit
		}
		if len(s.events) > 0 {
			t = math.Min(t, s.events[0].t)
		}
		if s.st != nil {
			t = math.Min(t, s.st.next())
		}
		if s.active > 0 {
			t = math.Min(t, float64(tick)*round)
		} else if !math.IsInf(t, 1) {
			// Idle cluster: skip the empty rounds before the next arrival.
			tick = max(tick, int64(math.Ceil(t/round)))
		}
		if math.IsInf(t, 1) {
			break // nothing can ever happen again
		}
		if t > horizon {
			return s.beyond(t)
		}
		s.clk.t = t
		// 1. Job boundaries and completions (late ones wait for step 4).
		finished := s.boundaries(t, false)
		// 1b. Capacity changes (multi-site runs).
		capChanged, err := s.capacity(t)
		if err != nil {
			return err
		}
		// 2. Arrivals.
		arrived := false
		for next < len(order) && s.jobs[order[next]].Submit <= t {
			if err := s.arrive(order[next]); err != nil {
				return err
			}
			next++
			arrived = true
		}
		// 3. A round, when due.
		due := float64(tick)*round <= t
		if due {
			// At least one tick on: t/round can come out just under the
			// tick that produced t (3*0.7/0.7 = 2.999...), and the next
			// round would fall on this instant again, forever.
			tick = max(tick+1, int64(math.Floor(t/round))+1)
		}
		if s.active > 0 && (due || (s.cfg.OnEvents && (arrived || finished || capChanged))) {
			if err := s.schedule(t); err != nil {
				return err
			}
			if s.nrun == 0 && len(s.events) == 0 && next == len(order) && s.active > 0 &&
				(s.st == nil || !s.st.anyDown() || math.IsInf(s.st.next(), 1)) {
				// A policy may wait for time alone to pass (Pollux's
				// restart factor is 0 for a job of age 0), so it gets
				// stuckRounds more periodic rounds before the run fails.
				if idle++; idle > stuckRounds {
					return s.stuck(t)
				}
			} else {
				idle = 0
			}
		}
		// 4. Boundaries the artifact reaches just after this instant's round.
		if s.cfg.WholeSeconds && s.boundaries(t, true) && s.cfg.OnEvents && s.active > 0 {
			if err := s.schedule(t); err != nil {
				return err
			}
		}
		s.sample(t)
		if err := s.checkLivelock(t, next); err != nil {
			return err
		}
		if s.cfg.Progress != nil && s.done-lastReport >= 1+len(s.jobs)/200 {
			lastReport = s.done
			s.cfg.Progress(t, s.done, len(s.jobs))
		}
	}
	if s.lazy {
		s.syncAll() // jobs left running when nothing more can happen
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(s.clk.t, s.done, len(s.jobs))
	}
	return nil
}

// arrive submits job idx (in trace order) to the engine.
func (s *simulator) arrive(idx int) error {
	j := s.jobs[idx]
	st, err := s.eng.Submit(j)
	if err != nil {
		return err
	}
	if st.Slot >= len(s.slotIdx) {
		s.slotIdx = slices.Grow(s.slotIdx, st.Slot+1-len(s.slotIdx))[:st.Slot+1]
	}
	s.slotIdx[st.Slot] = int32(idx)
	s.frag.wait(j, 1)
	s.active++
	s.nEvents++
	return nil
}

// boundaries handles the job boundaries due by t, late ones only when late
// is set; it reports whether a job finished.
func (s *simulator) boundaries(t float64, late bool) bool {
	finished := false
	for len(s.events) > 0 && (s.events[0].t < t || (s.events[0].t == t && (late || !s.events[0].late))) {
		ev := minheap.Pop(&s.events, eventFirst)
		r := s.runs[ev.idx]
		if r == nil || r.gen != ev.gen {
			continue
		}
		s.nEvents++
		if s.boundary(r, t) {
			finished = true
		}
	}
	return finished
}

// horizon is the latest simulated time a run may reach, in seconds: twice
// the latest a job may arrive or be due (job.MaxTime, about 317 years).
// Past it float64 seconds grow too coarse for the loop's instants, and a
// run that gets there is one whose work no GPU could do in any useful time
// (a work count with zeros too many), which would otherwise run for hours
// or never end.
const horizon = 2 * job.MaxTime

// beyond reports a run that would go past the horizon at t.
func (s *simulator) beyond(t float64) error {
	ids := s.firstActive()
	return fmt.Errorf("sim: the run would go on to t=%.3g s, past %.0f simulated years, with %d job(s) active (first: %v): "+
		"is a job's work far more than its GPUs can do (a work count or model with a unit too many)?",
		t, horizon/(365*86400), s.active, ids)
}

// stuckRounds is how many rounds in a row a policy may leave jobs waiting
// on an idle cluster, with nothing else to come, before the run fails.
const stuckRounds = 3

// firstActive is the IDs of the first five active jobs, for errors.
func (s *simulator) firstActive() []string {
	var ids []string
	for _, st := range s.eng.Active() {
		ids = append(ids, st.Job.ID)
		if len(ids) == 5 {
			break
		}
	}
	return ids
}

// stuck reports jobs that can never start: nothing runs, nothing will arrive.
func (s *simulator) stuck(t float64) error {
	ids := s.firstActive()
	return fmt.Errorf("sim: at t=%.0f s the policy %s leaves %d job(s) waiting on an idle cluster with nothing left to happen (first: %v)",
		t, s.cfg.Policy.Name(), s.active, ids)
}

// handover replaces the engine's policy by a fresh instance holding the
// old one's saved state (Config.Handover).
func (s *simulator) handover() error {
	b, err := s.eng.PolicyState()
	if err != nil {
		return fmt.Errorf("sim: handover: %w", err)
	}
	p, err := s.cfg.Fresh()
	if err != nil {
		return fmt.Errorf("sim: handover: %w", err)
	}
	if err := s.eng.RestorePolicyState(p, b); err != nil {
		return fmt.Errorf("sim: handover: %w", err)
	}
	s.cfg.Policy = p
	return nil
}

// schedule runs one round and applies its changes.
func (s *simulator) schedule(t float64) error {
	s.advanceAll(t)
	changes, err := s.eng.Schedule()
	s.countWarnings(s.eng.DrainWarnings())
	if err != nil {
		return err
	}
	s.out.Rounds++
	if s.cfg.Handover > 0 && s.out.Rounds%s.cfg.Handover == 0 {
		if err := s.handover(); err != nil {
			return err
		}
	}
	for _, ch := range changes {
		idx := s.index(ch.Status)
		rec := &s.recs[idx]
		r := s.runs[idx]
		if r != nil && r.lazy {
			s.sync(r)
			s.eng.ReportStatus(r.st, r.progress) // as a round reports it
		}
		switch ch.Kind {
		case engine.Decline:
			s.frag.wait(ch.Status.Job, -1)
			rec.State = string(job.Declined)
			s.left[idx] = t
			noteReason(rec, ch.Status.WaitReason())
			noteReason(rec, ch.Status.Reason())
			s.active--
			s.done++
			continue
		case engine.Preempt:
			s.stoppedRun(r, t)
			s.stop(r)
			s.frag.wait(ch.Status.Job, 1)
			rec.Preemptions++
			continue
		case engine.Resize:
			s.stoppedRun(r, t)
			s.stop(r)
			rec.Resizes++
			rec.Restarts++
		case engine.Restart:
			rec.Restarts++
			noteReason(rec, ch.Status.WaitReason())
		case engine.Start:
			rec.Start = t
			noteReason(rec, ch.Status.WaitReason())
		}
		if ch.Kind != engine.Resize {
			s.frag.wait(ch.Status.Job, -1)
		}
		costs := s.cfg.Model.Costs(ch.Status.Job)
		delay := costs.Start
		switch ch.Kind {
		case engine.Restart:
			delay = costs.Restart
		case engine.Resize:
			delay = costs.Resize
		}
		delay += s.move(idx, ch)
		progress := ch.Status.Progress
		if r != nil {
			progress = r.progress
		}
		// Generations count per job over the whole run, across
		// preemptions, so an event pushed before one never fires after.
		s.gens[idx]++
		r = &running{idx: idx, st: ch.Status, last: t, delay: delay, progress: progress, gen: s.gens[idx], pos: len(s.live), gpus: len(ch.To),
			began: t, from: progress, site: -1}
		if s.st != nil {
			r.site = s.st.siteOf[s.cfg.Cluster.NodeOf(ch.To[0]).ID]
		}
		if r.part = ch.Status.Share; r.part > 0 {
			s.nParts++
		}
		r.held = ch.To
		s.frag.hold(r.held, 1)
		s.runs[idx] = r
		s.live = append(s.live, r)
		s.alloc += len(ch.To)
		s.tenantHeld(idx, len(ch.To))
		s.nrun++
		if delay <= 0 {
			s.useful += len(ch.To)
		}
		r.alloc = r.st.Alloc
		s.tune(r)
		r.rate, r.until = s.rate(r)
		s.push(r)
		s.started(r)
		s.startedRun(r)
	}
	if s.sharing {
		s.repack(t) // without a perf.Sharer the engine packs no jobs
	}
	return nil
}

// index is the job index of st, an active job's status.
func (s *simulator) index(st *engine.Status) int { return int(s.slotIdx[st.Slot]) }

// noteReason keeps the policy's latest explanation for a job it did not
// run (JobRecord.Reason): the engine's Status.WaitReason as a job starts
// or restarts and at the end of the run, the reason a job is declined
// with; records change only as jobs do, not every round.
func noteReason(rec *report.JobRecord, r engine.Reason) {
	if r != (engine.Reason{}) {
		rec.Reason, rec.QueuePosition, rec.PredictedStart = r.Text, r.Position, r.PredictedStart
	}
}

// countWarnings folds the engine's warnings by kind and reason, in the order
// first seen.
func (s *simulator) countWarnings(ws []engine.RoundWarning) {
	for _, w := range ws {
		k := [2]string{w.Kind, w.Reason}
		i, ok := s.warnAt[k]
		if !ok {
			i = len(s.warnings)
			if s.warnAt == nil {
				s.warnAt = map[[2]string]int{}
			}
			s.warnAt[k] = i
			s.warnings = append(s.warnings, report.WarningCount{Kind: w.Kind, Reason: w.Reason, First: w.Time})
		}
		s.warnings[i].Rounds++
	}
}

// stop takes a running job off its GPUs.
func (s *simulator) stop(r *running) {
	s.gens[r.idx]++
	r.gen = s.gens[r.idx]
	last := s.live[len(s.live)-1]
	s.live[r.pos], last.pos = last, r.pos
	s.live = s.live[:len(s.live)-1]
	s.runs[r.idx] = nil
	s.frag.hold(r.held, -1)
	r.held = nil
	gpus := r.gpus
	s.alloc -= gpus
	s.tenantHeld(r.idx, -gpus)
	if r.delay <= 0 {
		s.useful -= gpus
	}
	s.nrun--
	if r.part > 0 {
		s.nParts--
	}
	if r.partner != "" {
		r.partner = ""
		s.nShared--
	}
}

// advance counts r's progress and GPU time up to t.
func (s *simulator) advance(r *running, t float64) {
	dt := t - r.last
	if dt <= 0 {
		return
	}
	gpus := charged(r)
	rec := &s.recs[r.idx]
	s.held[r.idx] += dt
	rec.GPUSeconds += dt * gpus
	rec.SharedGPUSeconds += dt * (float64(r.gpus) - gpus)
	s.countSite(r, dt*gpus)
	if r.delay > 0 {
		d := math.Min(r.delay, dt)
		r.delay -= d
		dt -= d
		rec.RestartSeconds += d
		if r.delay <= 1e-9 {
			r.delay = 0
			s.useful += r.gpus
		}
	}
	if dt > 0 {
		if r.progress == r.from {
			// Its first work since it (re)started: not the end of its
			// delay, which may fall on the round that stops it.
			s.paidCost()
		}
		r.progress += r.rate * dt
		rec.UsefulGPUSeconds += dt * gpus
	}
	r.last = t
}

// push schedules r's next boundary: the end of its delay, the end of its
// current rate segment, or its completion.
func (s *simulator) push(r *running) {
	var t float64
	late := false
	if r.delay > 0 {
		t = r.last + r.delay
	} else {
		if !(r.rate > 0) {
			return // cannot progress on this allocation; the policy must move it
		}
		target := math.Min(r.until, r.st.Work)
		t = r.last + math.Max(0, target-r.progress)/r.rate
		if s.cfg.WholeSeconds {
			// The step in which the boundary falls starts at the last round
			// strictly before it, or where this segment started.
			step := math.Max(r.last, (math.Ceil(t/s.cfg.Round)-1)*s.cfg.Round)
			p := r.progress + r.rate*(step-r.last)
			t = step + math.RoundToEven(math.Max(0, target-p)/r.rate)
			// A boundary zero seconds into a step that starts at a round
			// comes after that round: the artifact steps jobs only after
			// scheduling, so a job that finishes there holds its GPUs
			// until the next round, and one preempted there does not
			// finish.
			late = t == step && math.Mod(step, s.cfg.Round) == 0
		}
	}
	minheap.Push(&s.events, event{t: t, idx: r.idx, gen: r.gen, late: late}, eventFirst)
}

// boundary handles r's event at t; it reports whether r finished.
func (s *simulator) boundary(r *running, t float64) bool {
	s.sync(r)
	inDelay := r.delay > 0
	s.advance(r, t)
	if !inDelay {
		// Snap to the boundary exactly: the event time was computed from it.
		r.progress = math.Min(r.until, r.st.Work)
	}
	if r.progress >= r.st.Work {
		s.complete(r, t)
		return true
	}
	if !inDelay {
		s.tune(r)
		r.rate, r.until = s.rate(r)
	}
	s.push(r)
	return false
}

func (s *simulator) complete(r *running, t float64) {
	s.stop(r)
	id, partner := r.st.Job.ID, r.st.PackedWith
	_ = s.eng.Report(id, r.progress)
	_ = s.eng.Finish(id)
	s.alone(partner, t)
	s.recs[r.idx].Finish = t
	s.recs[r.idx].State = string(job.Finished) // the engine forgets it
	s.left[r.idx] = t
	s.active--
	s.done++
}

// sample appends the cluster state at t to the timeline when it changed.
func (s *simulator) sample(t float64) {
	alloc, useful := s.occupancy()
	smp := report.Sample{T: t, Allocated: int32(alloc), Useful: int32(useful), Queued: int32(s.active - s.nrun), Running: int32(s.nrun)}
	s.fairSample(&smp)
	tl := s.out.Timeline
	if n := len(tl); n > 0 {
		last := tl[n-1]
		if last.Same(&smp) {
			return
		}
		if last.T == t {
			tl[n-1] = smp
			return
		}
	}
	s.out.Timeline = append(tl, smp)
}

// finishRecords fills the final states and each job's no-contention bound.
func (s *simulator) finishRecords() {
	s.finishSites()
	s.out.Events = s.nEvents
	s.out.Warnings = s.warnings
	perNode := map[string]int{}
	for _, n := range s.cfg.Cluster.Nodes {
		perNode[n.GPUType] = max(perNode[n.GPUType], n.GPUs)
	}
	for i, j := range s.jobs {
		rec := &s.recs[i]
		if st := s.eng.Job(j.ID); st != nil {
			rec.State = string(st.State)
			if len(st.GPUs) == 0 && !st.State.Terminal() {
				noteReason(rec, st.WaitReason()) // still waiting
			}
		}
		rec.LowerBound = LowerBound(s.cfg.Model, s.cfg.Cluster, perNode, j)
		end := s.left[i]
		if end < 0 {
			end = s.clk.t
		}
		rec.WaitSeconds = max(0, end-j.Submit-s.held[i])
	}
	s.out.Jobs = s.recs
}

// LowerBound is j's completion time alone on the cluster, a time no
// schedule can beat: its start cost plus its run time at the best
// allocation. With a perf.Bounder model (the Pollux profiles, Gavel's
// tables) that is, for each stretch of progress over which the model's
// rate holds, the best of every GPU count in [MinGPUs, MaxGPUs], every GPU
// type, every placement on the type's nodes (perNode GPUs at most on each)
// and, for an adaptive job, every batch configuration its agent may choose
// (with Gavel's tables also the rate beside a partner sharing its GPUs): a
// job may change any of them as it goes, and a spread placement can beat a
// packed one. With any other model (or a wrapper of one, whose MaxRate is
// not ok), it is the best GPU count and type packed on as few nodes as
// possible, held throughout.
func LowerBound(m perf.Model, c *cluster.Cluster, perNode map[string]int, j *job.Job) float64 {
	types := c.GPUTypes()
	if j.GPUType != "" {
		types = []string{j.GPUType}
	}
	if t, ok := boundedLowerBound(m, c, perNode, j, types); ok {
		return t
	}
	best := math.Inf(1)
	var buf []int
	for _, t := range types {
		// perf.Packed(t, n, perNode[t]) for each n, grown by one GPU at a
		// time in one buffer: a job that may take every GPU of a large
		// cluster would otherwise build thousands of slices of hundreds of
		// nodes (models keep no Alloc's PerNode, perf.Model).
		a := perf.Packed(t, j.MinGPUs, perNode[t])
		a.PerNode = append(buf[:0], a.PerNode...)
		per := perNode[t]
		for n := j.MinGPUs; n <= min(j.MaxGPUs, c.GPUsOfType(t)); n++ {
			if n > j.MinGPUs {
				if k := len(a.PerNode); k > 0 && (per <= 0 || a.PerNode[k-1] < per) {
					a.PerNode[k-1]++
				} else {
					a.PerNode = append(a.PerNode, 1)
				}
			}
			best = math.Min(best, perf.Remaining(m, j, a, 0))
		}
		buf = a.PerNode
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best + m.Costs(j).Start
}

// boundedLowerBound is LowerBound with a perf.Bounder: at each stretch of
// progress the highest MaxRate over the types' spans; ok is false when m
// has no bound for j (perf.MaxRate).
func boundedLowerBound(m perf.Model, c *cluster.Cluster, perNode map[string]int, j *job.Job, types []string) (float64, bool) {
	if _, ok := m.(perf.Bounder); !ok {
		return 0, false
	}
	spans := make([]perf.Span, 0, len(types))
	for _, t := range types {
		s := perf.Span{GPUType: t, MinGPUs: j.MinGPUs, MaxGPUs: min(j.MaxGPUs, c.GPUsOfType(t)), PerNode: perNode[t]}
		for _, n := range c.Nodes {
			if n.GPUType == t && n.GPUs > 0 {
				s.Nodes++
			}
		}
		if s.MaxGPUs >= max(s.MinGPUs, 1) {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		return 0, false // nothing holds j: the packed prices say so too
	}
	work := m.Work(j)
	t, p := 0.0, 0.0
	for p < work {
		r, until := 0.0, math.Inf(1)
		for _, s := range spans {
			sr, su, ok := perf.MaxRate(m, j, s, p)
			if !ok {
				return 0, false
			}
			r, until = math.Max(r, sr), math.Min(until, su)
		}
		if !(r > 0) {
			return 0, true
		}
		end := math.Min(until, work)
		t += (end - p) / r
		p = end
	}
	return t + m.Costs(j).Start, true
}
