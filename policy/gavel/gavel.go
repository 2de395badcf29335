package gavel

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/present"
	"github.com/tide-sched/tide/solver"
)

// Gavel (Narayanan et al., OSDI'20; stanford-futuredata/gavel) splits a
// scheduling policy in two:
//
//   - an allocation: X[m][k], the fraction of time job m should spend on GPU
//     type k, with X >= 0, sum_k X[m][k] <= 1 and sum_m GPUs_m X[m][k] <=
//     GPUs of type k, chosen by the policy (an LP for the fairness,
//     makespan and throughput objectives; FIFO's rule for FIFO);
//   - a round-based mechanism that realises it: each round (360 s in Gavel)
//     a job's priority on type k is X[m][k] divided by the share of type k's
//     time it has received since the allocation was last recomputed, and
//     the GPUs of each type, fastest type first, go greedily to the jobs of
//     highest priority that still fit (a job runs on one type per round).
//
// This file holds the mechanism; gavel_lp.go and fifoperf.go the allocators.
// The mechanism follows Gavel's simulator (scheduler/scheduler.py at
// c4fa4009):
//
//   - The allocation is recomputed when jobs arrived or left since the last
//     computation, but no sooner than MinReset seconds (Gavel's
//     minimum_time_between_allocation_resets, 1920 s) after the previous
//     one; until then new jobs have no allocation. When no job is running
//     the allocation is recomputed at once (Gavel does so only once its
//     trace has no arrivals left, and otherwise skips to the next arrival).
//   - At each recomputation every job's time on each type restarts from a
//     credit of half a round (Gavel's time_per_iteration / 2), and each
//     job's deficit (time it should have received minus time it received)
//     accumulates; priority ties go to the larger deficit, then the larger
//     allocation, then the earlier job.
//   - A job's share of type k is its time on k over the time all jobs spent
//     on k since the recomputation (credits included).
//   - Jobs with no allocation on a type may still run on it when GPUs of
//     that type would otherwise idle, except under FIFO (ZeroPriorityWaits).
//
// Rounds: the policy re-plans at most every Round seconds (360 s by
// default); when the engine asks in between (an arrival, a completion, a
// shorter engine round) it keeps its last plan minus the jobs that left, so
// new jobs wait for the next round and freed GPUs idle until then, as in
// Gavel — except that an idle cluster is planned at once. --preset gavel
// (--round 360 --on-events=false) makes the engine's rounds Gavel's. Time
// received is measured from engine.Status.TypeSeconds.
//
// The policy keeps per-job state between rounds (time received at the last
// recomputation, allocation, deficits): it is a deterministic function of
// the sequence of snapshots, as a simulation needs, but a restarted server
// starts it afresh.
type Gavel struct {
	name string
	// Alloc computes the allocation.
	Alloc gavelAllocator
	// Round is the round length, s, used for the half-round time credit.
	Round float64
	// MinReset is the shortest time between two recomputations, s.
	MinReset float64
	// ZeroPriorityWaits keeps a job off a type where its priority is 0
	// (Gavel applies it to its FIFO policies).
	ZeroPriorityWaits bool
	// Agnostic replaces every throughput by 1 where the job can run:
	// Gavel's heterogeneity-agnostic baselines. The mechanism then takes GPU
	// types in a random order each round, as Gavel does for them.
	Agnostic bool
	// Seed seeds that random order.
	Seed uint64
	// SpaceSharing lets the LP pack pairs of jobs on the same GPUs where
	// the model measured them (gavel_pairs.go). It takes effect only where
	// the executor runs pairs (engine.Snapshot.Sharing); elsewhere the policy
	// plans without packing.
	SpaceSharing bool
	// Classes, when > 0, solves the LP over classes of jobs whose
	// throughputs agree within this relative tolerance (gavel_classes.go).
	Classes float64

	rng  *rand.Rand
	pcg  *rand.PCG   // rng's source, saved with the state
	last engine.Plan // the plan of the last round
	// lastSt are the statuses of last.Run's jobs and their partners (two
	// per assignment, nil for none), found at the first keep after a plan.
	lastSt    []*engine.Status
	kept      []engine.Assignment // keep's last Run: the engine keeps no plan's memory
	present   present.Set
	why       explain.Scratch
	reasons   gavelReasons                             // reasons worked out when read (gavel_reasons.go)
	note      string                                   // explain's note for appendTerms
	terms     func(b []byte, st *engine.Status) []byte // appendTerms
	lastPlan  float64                                  // when it was made
	planned   bool
	jobs      map[string]*gavelJob
	pairState map[string]*gavelPairState // by pairKey
	incr      gavelKept                  // rounds between re-plans from what changed (gavel_kept.go)
	bins      alloc.Bins                 // each site's room, on a cluster of several sites (plan)
	types     []string                   // cluster GPU types, sorted
	capSeen   []float64                  // the capacity at the last re-plan (gavelCapacity); nil before the first
	typeTime  []float64
	gpus      []int // the cluster's GPUs by type index, then in all, at the last round (resized)
	lastReset float64
	stale     bool // jobs arrived or left, or the capacity changed, since the allocation was computed
	// Solves counts allocation computations; Failures those whose solver
	// failed (the policy then falls back to equal shares).
	Solves, Failures int
	LastErr          error
}

// gavelJob is the mechanism's state for one job.
type gavelJob struct {
	x        []float64 // allocation by type index; nil until computed
	deficit  []float64
	received []float64 // seconds on each type since the recomputation, credit included
	seen     []float64 // TypeExecuted at the last look, by type index
	present  bool
}

// gavelProblem is what an allocator sees: the active jobs and their
// throughputs on each GPU type.
type gavelProblem struct {
	now   float64
	jobs  []*engine.Status
	types []string
	cap   []float64   // GPUs of each type
	tput  [][]float64 // progress/s of job m alone on type k (0: cannot run)
	gpus  []float64   // GPUs each job needs (its scale factor)
	rem   []float64   // work left, model units
	age   []float64   // seconds since submission
	prev  [][]float64 // previous allocation (nil rows for new jobs)
	pairs []gavelPair // pairs that may share GPUs (space sharing); nil without
	// class, with the classes knob, is each job's class (gavel_classes.go);
	// nil: one allocation per job.
	class   []int
	classes int
	// snap and bins, on a cluster of several sites, let an allocator that
	// gives each job a type (FIFO's) count each site's room (siteBins).
	snap *engine.Snapshot
	bins *alloc.Bins
}

// siteBins is each site's room for the FIFO allocators, afresh: nil on a
// cluster of one site (not an edge site) or in a problem made without a
// snapshot, where a type's GPUs are one pool.
func (p *gavelProblem) siteBins() *alloc.Bins {
	if p.bins == nil || p.snap == nil || !p.bins.Reset(p.snap) {
		return nil
	}
	return p.bins
}

// gavelAllocator returns X[m][k], one row per job, followed by Y[q][k], one
// row per pair of p.pairs (LP allocators only; rows missing = 0). An error
// makes the mechanism fall back to equal shares.
type gavelAllocator interface {
	allocate(p *gavelProblem) ([][]float64, error)
}

// Name implements engine.Policy.
func (g *Gavel) Name() string { return g.name }

// gavelKnobs are the knobs every Gavel policy takes.
const gavelKnobs = "round=360: seconds between re-plans (the plan is kept in between; --preset gavel aligns the engine's rounds); " +
	"reset=1920: minimum seconds between two recomputations of the allocation (Gavel's simulator; 0 = at every arrival and completion); " +
	"agnostic=false: treat every GPU type as equally fast (Gavel's heterogeneity-agnostic baseline); seed=0: order of types when agnostic"

// Knobs are the knobs every Gavel policy takes (gavelKnobs documents
// them).
type Knobs struct {
	Round    float64 `knob:"round"`    // seconds between re-plans, > 0
	Reset    float64 `knob:"reset"`    // minimum seconds between recomputations, >= 0
	Agnostic bool    `knob:"agnostic"` // every GPU type equally fast
	Seed     int     `knob:"seed"`     // >= 0
}

// LPKnobs are the knobs of Gavel's LP policies.
type LPKnobs struct {
	Knobs
	SpaceSharing bool    `knob:"space_sharing"`
	Classes      float64 `knob:"classes"` // relative tolerance, >= 0; 0 = per job
}

// DefaultKnobs and DefaultLPKnobs hold the defaults: Gavel's simulator's.
var (
	DefaultKnobs   = Knobs{Round: 360, Reset: 1920}
	DefaultLPKnobs = LPKnobs{Knobs: DefaultKnobs}
)

// newGavel builds a Gavel policy with allocator a and knobs k; an LP
// policy (needsSolver) may also share GPUs between measured pairs.
func newGavel(name string, a gavelAllocator, k Knobs, needsSolver, spaceSharing bool) (*Gavel, error) {
	if needsSolver {
		if err := solver.Available(); err != nil {
			return nil, fmt.Errorf("policy %s solves an LP: %w", name, err)
		}
	}
	g := &Gavel{name: name, Alloc: a, jobs: map[string]*gavelJob{}, pairState: map[string]*gavelPairState{}}
	g.Round, g.MinReset, g.Agnostic = k.Round, k.Reset, k.Agnostic
	if !(g.Round > 0) || g.MinReset < 0 {
		return nil, fmt.Errorf("policy %s: want round > 0 and reset >= 0 seconds, got %v and %v", name, g.Round, g.MinReset)
	}
	if k.Seed < 0 {
		return nil, fmt.Errorf("policy %s: seed=%v: want an integer >= 0", name, k.Seed)
	}
	g.Seed = uint64(k.Seed)
	if g.Agnostic {
		g.name += ":agnostic=true"
	}
	g.SpaceSharing = spaceSharing
	if g.SpaceSharing && g.Agnostic {
		return nil, fmt.Errorf("policy %s: space_sharing needs the measured throughputs; agnostic=true ignores them", name)
	}
	if g.SpaceSharing {
		g.name += ":space_sharing=true"
	}
	g.pcg = rand.NewPCG(g.Seed, 0x9a7e1)
	g.rng = rand.New(g.pcg)
	return g, nil
}

// Schedule implements engine.Policy.
func (g *Gavel) Schedule(s *engine.Snapshot) engine.Plan {
	if g.types == nil || !sameTypes(g.types, s.Cluster.GPUTypes()) {
		g.newTypes(s.Cluster.GPUTypes())
	}
	resized := g.resized(s.Cluster)
	g.reasons.lazy.Next(s.Round)
	followed := g.incr.follow(g, s)
	idle := true
	if followed {
		idle = g.incr.roster.Running() == 0
	} else {
		for _, st := range s.ActiveJobs() {
			idle = idle && len(st.GPUs) == 0
		}
	}
	if g.planned && !idle && !resized && s.Now < g.lastPlan+g.Round-1e-6 {
		if followed {
			if out, ok := g.keepKept(s); ok {
				return out
			}
		}
		s.ActiveJobs() // keep and its reasons read Snapshot.Jobs (JobsOnDemand)
		out := g.keep(s)
		g.explain(s, &out, noteBetween)
		return out
	}
	s.ActiveJobs()  // a re-plan reads Snapshot.Jobs throughout (JobsOnDemand)
	g.replanning(s) // the last round's reasons, before the allocations change
	p := g.problem(s)
	g.account(s)
	var warn []engine.Warning
	if g.stale && (s.Now-g.lastReset >= g.MinReset || g.lastReset == 0 || idle) {
		if err := g.reset(s, p); err != nil {
			warn = append(warn, engine.Warning{Kind: engine.WarnFallback,
				Reason: fmt.Sprintf("%s: allocation LP failed, equal shares used until the next solve: %v", g.name, err)})
		}
	}
	g.last = g.plan(s, p)
	g.lastSt = g.lastSt[:0] // its jobs are found at the next keep
	g.incr.planned(g, s, followed)
	g.planned, g.lastPlan = true, s.Now
	out := g.last
	out.Warnings = warn
	g.explain(s, &out, "")
	return out
}

// resized reports whether c has other GPU counts, by type, than the
// cluster of the last round (none before the first round, or since a
// restored state): the plan kept between re-plans may then ask more GPUs
// of a type than c has, which the engine refuses. tide kube rebuilds its
// engine on a new cluster when nodes come and go (a simulated cluster
// keeps its GPUs; faults take them down): a node removed failed every
// round until the next re-plan, for every job.
func (g *Gavel) resized(c *cluster.Cluster) bool {
	n := len(g.types) + 1
	if len(g.gpus) != n {
		changed := g.gpus != nil
		g.gpus = make([]int, n)
		for k, t := range g.types {
			g.gpus[k] = c.GPUsOfType(t)
		}
		g.gpus[n-1] = c.TotalGPUs()
		return changed
	}
	changed := false
	for k, t := range g.types {
		if m := c.GPUsOfType(t); m != g.gpus[k] {
			g.gpus[k], changed = m, true
		}
	}
	if m := c.TotalGPUs(); m != g.gpus[n-1] {
		g.gpus[n-1], changed = m, true
	}
	return changed
}

// sameTypes: have (sorted) and types hold the same GPU types.
func sameTypes(have, types []string) bool {
	if len(have) != len(types) {
		return false
	}
	for _, t := range types {
		if _, ok := slices.BinarySearch(have, t); !ok {
			return false
		}
	}
	return true
}

// newTypes starts the mechanism afresh on a cluster of these GPU types:
// every allocation, deficit and time received is by type index. The types
// were read once, at the first round: a cluster whose types change (tide
// kube rebuilds its engine when nodes come and go, keeping the policy;
// a state restored from elsewhere) kept the first cluster's, so a type
// added later was never given to any job, and jobs that fit only there, or
// all of them once the first type's nodes were gone, waited for ever
// ("allocation 0") on idle GPUs.
func (g *Gavel) newTypes(types []string) {
	g.types = slices.Sorted(slices.Values(types))
	g.typeTime = make([]float64, len(g.types))
	if g.capSeen == nil && len(g.jobs) == 0 && !g.planned {
		return // the first round
	}
	clear(g.jobs)
	clear(g.pairState)
	g.capSeen, g.last, g.lastSt, g.kept = nil, engine.Plan{}, nil, nil
	g.planned, g.stale, g.lastReset = false, true, 0
	g.incr.planOK = false
	if f, ok := g.Alloc.(*gavelFIFO); ok {
		clear(f.types) // type indices of the old types
	}
}

// explain gives each job left out its allocation: the share of time on each
// type the LP (or rule) gave it, against what it received. It runs every
// round, plan or keep, so it writes into reused memory (explain.Scratch)
// and keeps a job's string while its text does not change.
func (g *Gavel) explain(s *engine.Snapshot, plan *engine.Plan, note string) {
	g.setNote(note)
	g.why.PlanAppend(s, plan, nil, g.terms)
}

// noteBetween is explain's note for the rounds between re-plans.
const noteBetween = "between rounds the last round's plan stands"

// setNote readies g.terms to explain with note.
func (g *Gavel) setNote(note string) {
	g.note = note
	if g.terms == nil { // made once: a closure made every round would be allocated every round
		g.terms = g.appendTerms
	}
}

// appendTerms appends st's allocation to b (explain's terms).
func (g *Gavel) appendTerms(b []byte, st *engine.Status) []byte {
	gj := g.jobs[st.Job.ID]
	if gj == nil || gj.x == nil {
		b = append(b, "not yet in the allocation (it is recomputed at most every "...)
		b = strconv.AppendFloat(b, g.MinReset, 'f', 0, 64)
		return append(b, " s)"...)
	}
	b = append(b, "allocation "...)
	n := len(b)
	for k, t := range g.types {
		if gj.x[k] > 0 {
			if len(b) > n {
				b = append(b, ", "...)
			}
			b = strconv.AppendFloat(b, gj.x[k], 'f', 2, 64)
			b = append(b, " of "...)
			b = append(b, t...)
		}
	}
	if len(b) == n {
		b = append(b, '0')
	}
	b = append(b, "; jobs furthest below their allocation run first"...)
	if g.note != "" {
		b = append(b, "; "...)
		b = append(b, g.note...)
	}
	return b
}

// keep returns the last round's plan without the jobs that have left: between
// rounds nothing moves, and GPUs freed by finished jobs wait for the next
// round, as in Gavel. The jobs are found by their slots (present.Set):
// keep runs most rounds, and a map of every active job each time was most
// of its cost.
func (g *Gavel) keep(s *engine.Snapshot) engine.Plan {
	if len(g.lastSt) != 2*len(g.last.Run) { // new plan or restored state: find its jobs once
		byID := make(map[string]*engine.Status, len(s.Jobs))
		for _, st := range s.Jobs {
			byID[st.Job.ID] = st
		}
		g.lastSt = g.lastSt[:0]
		for _, a := range g.last.Run {
			g.lastSt = append(g.lastSt, byID[a.Job], byID[a.PackWith])
		}
	}
	out := engine.Plan{Run: g.kept[:0]}
	if g.present.Mark(s.Jobs) {
		for i, a := range g.last.Run {
			if g.present.Has(g.lastSt[2*i]) {
				if !g.present.Has(g.lastSt[2*i+1]) {
					a.PackWith = "" // its partner finished: it runs on alone
				}
				out.Run = append(out.Run, a)
			}
		}
	} else { // statuses not from one engine (a test's): by ID
		active := make(map[string]bool, len(s.Jobs))
		for _, st := range s.Jobs {
			active[st.Job.ID] = true
		}
		for _, a := range g.last.Run {
			if active[a.Job] {
				if !active[a.PackWith] {
					a.PackWith = ""
				}
				out.Run = append(out.Run, a)
			}
		}
	}
	g.kept = out.Run
	return out
}

// problem gathers the jobs' throughputs on each type. A job that cannot
// run on a type (another type asked for, more GPUs than one job can hold
// there: gavelCapacity, or a part of a GPU its GPUs have not the memory
// for) has throughput 0 on it.
func (g *Gavel) problem(s *engine.Snapshot) *gavelProblem {
	n, K := len(s.Jobs), len(g.types)
	p := &gavelProblem{now: s.Now, jobs: s.Jobs, types: g.types, snap: s, bins: &g.bins,
		tput: make([][]float64, n), gpus: make([]float64, n), rem: make([]float64, n), age: make([]float64, n), prev: make([][]float64, n)}
	var fit, mem []float64 // mem: each type's GPU memory, once a job asks for part of a GPU
	p.cap, fit = gavelCapacity(s, g.types)
	if g.capSeen != nil && !slices.Equal(g.capSeen, p.cap) {
		g.stale = true // GPUs came or went (edge servers, inference, faults on several sites): Gavel recomputes when workers join or leave
	}
	g.capSeen = p.cap
	for m, st := range s.Jobs {
		j := st.Job
		p.gpus[m] = float64(j.GPUs)
		progress := s.Progress(st)
		p.rem[m] = math.Max(st.Work-progress, 0)
		p.age[m] = math.Max(s.Now-j.Submit, 0)
		p.tput[m] = make([]float64, K)
		for k, t := range g.types {
			if (j.GPUType != "" && j.GPUType != t) || float64(j.GPUs) > fit[k] {
				continue
			}
			if j.Fractional() {
				if mem == nil {
					mem = make([]float64, K)
					for k, t := range g.types {
						mem[k] = alloc.TypeMem(s.Cluster, t)
					}
				}
				if !alloc.PartFits(j, mem[k]) {
					continue
				}
			}
			r, _ := s.Model.Rate(j, perf.Packed(t, j.GPUs, s.GPUsPerNode[t]), progress)
			if r > 0 && g.Agnostic {
				r = 1
			}
			p.tput[m][k] = r
		}
		if gj := g.jobs[j.ID]; gj != nil {
			p.prev[m] = gj.x
		}
	}
	p.pairs = g.pairs(s, p)
	if g.Classes > 0 && len(p.pairs) == 0 {
		rem, age := gavelClassKeys(g.Alloc)
		p.classify(g.Classes, rem, age)
	}
	return p
}

// gavelCapacity returns, for each of types, the GPUs the allocation may
// hand out (capacity) and the most one job can hold (fit).
//
// Gavel's cluster is one fixed pool, and on a one-site cluster both are
// the GPUs of the type, up or not, as in Gavel's simulator (a failed node
// comes back). On a cluster of several sites a job never spans sites, and
// on an edge site it uses one server (engine.Assignment), while edge
// servers come and go and an inference site takes its GPUs back and lends
// them again: there the capacity is the GPUs of the type up now
// (Snapshot.Available) and the fit the most of them one job could hold
// now (Snapshot.Largest), as alloc.Pool counts them. Without that a job
// could be given a type whose GPUs it could only get across sites (four
// A100s, two in the cloud and two lent by an inference site), or on one-GPU
// edge servers, or on GPUs all down, and gavel-fifo, where a job keeps its
// type, or any Gavel policy, whose allocation gives the job only that type,
// would leave it waiting for ever on an idle cluster. The capacity still
// pools the sites (the allocation is a share of time per type, as in
// Gavel), but each round plans every job into one site (or edge server)
// beside the jobs of higher priority (plan, alloc.Bins), and the FIFO
// allocators give a job a type only where one site has room for it beside
// the jobs holding a type (fifoperf.go). Before, a round gave a type to
// more jobs than its sites could place at once (two three-GPU jobs running
// on two sites of four GPUs, and a waiting job of two planned on the 1 + 1
// left): the placer left that job waiting, round after round, and the jobs
// behind it waited beside the idle GPUs.
func gavelCapacity(s *engine.Snapshot, types []string) (capacity, fit []float64) {
	capacity, fit = make([]float64, len(types)), make([]float64, len(types))
	multiSite := len(s.Cluster.Sites()) > 1
	for k, t := range types {
		if !multiSite {
			capacity[k] = float64(s.Cluster.GPUsOfType(t))
			fit[k] = capacity[k]
			continue
		}
		capacity[k] = float64(s.Available("", t))
		fit[k] = float64(s.Largest(t))
	}
	return capacity, fit
}

// ProgressOnDemand implements engine.ProgressOnDemand: Gavel reads
// progress (Snapshot.Progress) only in problem, at its re-plans (every
// Round seconds), where every job's throughput and remaining work enter the
// allocation: a re-plan reads every running job's progress, as the
// mechanism must; the rounds between re-plans (keep) read none.
func (g *Gavel) ProgressOnDemand() bool { return true }

// account adds the time each job received since the last look, and notes
// arrivals and departures.
func (g *Gavel) account(s *engine.Snapshot) {
	for _, gj := range g.jobs {
		gj.present = false
	}
	for _, st := range s.Jobs {
		s.Sync(st) // its TypeSeconds, under lazy counters (engine.Config.LazyCounters)
		gj := g.jobs[st.Job.ID]
		if gj == nil {
			gj = &gavelJob{received: make([]float64, len(g.types)), seen: make([]float64, len(g.types)), deficit: make([]float64, len(g.types))}
			for k := range gj.received {
				gj.received[k] = g.Round / 2
			}
			g.jobs[st.Job.ID] = gj
			g.stale = true
		}
		gj.present = true
		// A job packed now has been so since the last round (pairs change
		// only at rounds, or end when a member finishes): its time goes to
		// the pair, counted once for the type.
		ps := g.pairState[alloc.PairKey(st.Job.ID, st.PackedWith)]
		for k, t := range g.types {
			exec := st.TypeSeconds(t)
			if d := exec - gj.seen[k]; d > 0 {
				switch {
				case st.PackedWith == "" || ps == nil:
					gj.received[k] += d
					g.typeTime[k] += d
				case st.Job.ID < st.PackedWith:
					ps.received[k] += d
					g.typeTime[k] += d
				}
			}
			gj.seen[k] = exec
		}
	}
	for id, gj := range g.jobs {
		if !gj.present {
			delete(g.jobs, id)
			g.stale = true
		}
	}
}

// reset recomputes the allocation and restarts the time shares. An error
// says the solver failed and equal shares stand in (equalShares).
func (g *Gavel) reset(s *engine.Snapshot, p *gavelProblem) error {
	elapsed := s.Now - g.lastReset
	for k := range g.typeTime {
		g.typeTime[k] = 0
	}
	for _, st := range s.Jobs {
		gj := g.jobs[st.Job.ID]
		g.restart(gj.x, gj.deficit, gj.received, elapsed)
	}
	g.resetPairs(p, elapsed)
	x, err := g.allocate(p)
	for m, st := range s.Jobs {
		g.jobs[st.Job.ID].x = x[m]
	}
	for q, pr := range p.pairs {
		if len(x) > len(s.Jobs)+q {
			g.pairState[pr.key].x = x[len(s.Jobs)+q]
		}
	}
	g.LastErr = err
	g.lastReset = s.Now
	g.stale = false
	return err
}

// restart adds to deficit, per type, the time an entry (a job or a pair)
// should have received under allocation x over elapsed seconds minus what
// it received, and restarts its time received at the half-round credit.
func (g *Gavel) restart(x, deficit, received []float64, elapsed float64) {
	for k := range g.types {
		should := 0.0
		if x != nil {
			should = x[k] * elapsed
		}
		deficit[k] += should - (received[k] - g.Round/2)
		received[k] = g.Round / 2
		g.typeTime[k] += g.Round / 2
	}
}

func (g *Gavel) allocate(p *gavelProblem) ([][]float64, error) {
	g.Solves++
	if len(p.jobs) == 0 {
		return nil, nil
	}
	x, err := g.Alloc.allocate(p)
	if err != nil {
		g.Failures++
		return equalShares(p), err
	}
	for m := range x {
		for k := range x[m] {
			x[m][k] = min(max(x[m][k], 0), 1) // solver round-off
		}
	}
	return x, nil
}

// equalShares is each job's "1/n of the cluster": n active jobs get
// total/n GPUs' worth of time each, so a job on g GPUs runs a fraction
// min(1, total/(n g)) of the time, spread over the types it can use in
// proportion to their size. It stands for Gavel's isolated allocation (the
// heterogeneity-agnostic max-min LP), normalises throughputs, and is the
// fallback when a solve fails.
func equalShares(p *gavelProblem) [][]float64 {
	x := make([][]float64, len(p.jobs))
	share := 0.0
	for _, c := range p.cap {
		share += c
	}
	share /= float64(max(len(p.jobs), 1))
	for m := range x {
		x[m] = make([]float64, len(p.types))
		usable := 0.0
		for k := range p.types {
			if p.tput[m][k] > 0 {
				usable += p.cap[k]
			}
		}
		if usable == 0 {
			continue
		}
		f := min(1, share/p.gpus[m])
		for k := range p.types {
			if p.tput[m][k] > 0 {
				x[m][k] = f * p.cap[k] / usable
			}
		}
	}
	return x
}

type gavelEntry struct {
	m                    int
	prio, deficit, alloc float64
	k                    int
	pair                 int // index in gavelProblem.pairs, -1 for a job alone
}

// plan runs one round of Gavel's mechanism.
func (g *Gavel) plan(s *engine.Snapshot, p *gavelProblem) engine.Plan {
	order := g.typeOrder(p)
	var queue []gavelEntry
	for _, k := range order {
		start := len(queue)
		for m, st := range s.Jobs {
			gj := g.jobs[st.Job.ID]
			e := gavelEntry{m: m, k: k, deficit: gj.deficit[k], pair: -1}
			if gj.x != nil && p.tput[m][k] > 0 {
				e.alloc, e.prio = g.priority(gj.x[k], gj.received[k], k)
			}
			queue = append(queue, e)
		}
		queue = g.pairEntries(queue, p, k)
		part := queue[start:]
		slices.SortStableFunc(part, func(a, b gavelEntry) int {
			if c := cmp.Compare(b.prio, a.prio); c != 0 {
				return c
			}
			if c := cmp.Compare(b.deficit, a.deficit); c != 0 {
				return c
			}
			return cmp.Compare(b.alloc, a.alloc)
		})
	}
	left := slices.Clone(p.cap)
	done := make([]bool, len(s.Jobs))
	sites := g.bins.Reset(s)
	var plan engine.Plan
	for _, e := range queue {
		if e.pair >= 0 {
			plan.Run = g.placePair(plan.Run, e, p, left, done, sites)
			continue
		}
		if left[e.k] == 0 || done[e.m] || p.tput[e.m][e.k] <= 0 {
			continue
		}
		if g.ZeroPriorityWaits && e.prio <= 0 {
			continue
		}
		if p.gpus[e.m] > left[e.k] {
			continue
		}
		st := s.Jobs[e.m]
		a := engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: g.types[e.k]}
		if sites {
			// A job never spans sites (on an edge site it takes one
			// server): it runs this round where one site has room for it
			// beside the jobs ahead of it, as the placer will put it
			// (alloc.Bins); else it waits, and the GPUs left go to the
			// jobs behind it, as for a job the type has no room for.
			i := g.bins.Take(st, a.GPUType, a.GPUs)
			if i < 0 {
				continue
			}
			g.bins.Name(&a, i)
		}
		left[e.k] -= p.gpus[e.m]
		done[e.m] = true
		plan.Run = append(plan.Run, a)
	}
	return plan
}

// priority is an entry's allocation on type k and its priority: the
// allocation over the share of k's time received since the recomputation.
func (g *Gavel) priority(alloc, received float64, k int) (float64, float64) {
	share := 0.0
	if g.typeTime[k] > 0 {
		share = received / g.typeTime[k]
	}
	switch {
	case alloc == 0:
		return 0, 0
	case share > 0:
		return alloc, alloc / share
	default:
		return alloc, alloc * 1e9
	}
}

// typeOrder is the order in which types are filled: fastest first (by the
// active jobs' mean throughput there relative to their best type; Gavel's
// fixed v100, p100, k80), or a random order each round when agnostic.
func (g *Gavel) typeOrder(p *gavelProblem) []int {
	order := make([]int, len(p.types))
	for k := range order {
		order[k] = k
	}
	if g.Agnostic {
		g.rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		return order
	}
	speed := make([]float64, len(p.types))
	for m := range p.jobs {
		best := slices.Max(p.tput[m])
		if best <= 0 {
			continue
		}
		for k := range p.types {
			speed[k] += p.tput[m][k] / best
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(speed[b], speed[a]) })
	return order
}
