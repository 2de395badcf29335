package elastic

import (
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// What the elastic policies Optimus and AFS share: one estimate of a job's
// remaining time on n GPUs, the GPU limits a fixed-batch job may use, the
// split of the cluster into one GPU pool per type, and the plan they emit.
//
// Both policies hand out GPUs one at a time inside a pool (a GPU type) and
// never mix types within a job, so each pool is solved on its own.

// elasticOracleKnob documents the estimator knob both policies take.
const elasticOracleKnob = "oracle=false: predict remaining times with the performance model " +
	"(the simulator's ground truth) instead of the goodput model jobs report in their hints; " +
	"jobs without fitted hints always use the performance model"

// elasticJob is one job while an elastic policy hands out GPUs.
type elasticJob struct {
	st       *engine.Status
	typ      string // the GPU type it is planned on (a cluster type)
	min, max int    // GPUs it may hold when it runs
	n        int    // GPUs given so far
	bin      int    // on a cluster of several sites, where it runs (alloc.Bins)
	est      *estimator
	rem      []float64 // remaining seconds by GPU count, NaN = not computed yet
}

// remaining is the job's predicted remaining seconds on n GPUs of its type
// (+Inf for n < 1), memoised.
func (e *elasticJob) remaining(n int) float64 {
	if n < 1 {
		return math.Inf(1)
	}
	for len(e.rem) <= n {
		e.rem = append(e.rem, math.NaN())
	}
	if math.IsNaN(e.rem[n]) {
		e.rem[n] = e.est.remaining(e.st, n, e.typ)
	}
	return e.rem[n]
}

// estimator predicts remaining times for one snapshot.
//
// With Oracle unset (the default) a job that reports fitted hints is
// predicted from them, as a deployed scheduler would: the remaining
// progress (Status.Work less Snapshot.Progress) divided by the progress per
// second its goodput model predicts for n packed GPUs. A fixed-batch job
// runs its own batch size, split into per-GPU batches and accumulation
// steps by the rule the Pollux artifact's simulator uses
// (Job.update_local_bsz), so its throughput changes with n (and its
// efficiency only through the rounding of the batch); a job that
// adapts its batch runs the goodput-optimal batch (goodput.Function.Optimize).
// Goodput counts initial-batch samples per second and the models that
// report hints (perf.Observer, the Pollux profiles) count progress in
// samples / InitBatch, so progress per second is goodput / InitBatch.
//
// A job without fitted hints (it has not run yet), and every job with
// Oracle set, is predicted by the snapshot's performance model
// (engine.Snapshot.Remaining): in a simulation that is the ground truth,
// close to what the Pollux artifact's Optimus reads (the applications'
// measured step times at the job's batch; see Optimus).
type estimator struct {
	s      *engine.Snapshot
	oracle bool
}

func (e *estimator) remaining(st *engine.Status, n int, t string) float64 {
	if n < 1 {
		return math.Inf(1)
	}
	if h := st.Hints; !e.oracle && h != nil && h.Fitted && h.Limits.InitBatch > 0 {
		left := st.Work - e.s.Progress(st)
		if left <= 0 {
			return 0
		}
		a := perf.Packed(t, n, e.s.GPUsPerNode[t])
		g := elasticGoodput(h.Function(), st.Job, a.Nodes(), n)
		if !(g > 0) {
			return math.Inf(1)
		}
		return left * float64(h.Limits.InitBatch) / g
	}
	return e.s.Remaining(st, n, t)
}

// elasticGoodput is j's predicted goodput on nodes x replicas: at its own batch
// size for a fixed-batch job, at the best batch for an adaptive one.
func elasticGoodput(f goodput.Function, j *job.Job, nodes, replicas int) float64 {
	if j.AdaptBatch {
		return f.Optimize(nodes, replicas).Goodput
	}
	l := f.L
	minLocal := max(l.MinLocal, 1)
	maxLocal := l.MaxLocal
	if maxLocal <= 0 {
		maxLocal = max(l.MaxBatch, l.InitBatch)
	}
	batch := j.BatchSize
	if batch <= 0 {
		batch = max(l.InitBatch, minLocal*replicas)
	}
	// The artifact's Job.update_local_bsz (and perf/pollux's computeConfig):
	// ceil(batch / replicas) samples per GPU in as few accumulation steps as
	// the largest per-GPU batch allows, at least one on a single GPU above
	// the initial batch, capped at the largest validated batch.
	local := elasticDivUp(batch, replicas)
	accum := elasticDivUp(local, maxLocal) - 1
	if replicas == 1 && batch > l.InitBatch {
		accum = max(accum, 1)
	}
	atomic := elasticDivUp(local, accum+1)
	if l.MaxBatch > 0 {
		atomic = min(atomic, l.MaxBatch/(replicas*(accum+1)))
	}
	if atomic <= 0 {
		return 0
	}
	return f.Goodput(nodes, replicas, atomic, accum)
}

func elasticDivUp(a, b int) int { return (a + b - 1) / b }

// elasticRound is the memory Optimus and AFS keep from round to round, so
// that a round allocates nothing once it has grown to the cluster's types
// and the snapshot's jobs: the jobs of the round and their memoised
// remaining times, the pools, the orders the rules sort, the plan's
// assignments and the reasons' scratch. A round overwrites all of it; the
// engine reads a plan (its Run and Reasons) during its round and keeps
// neither, so reusing them at the next round is safe.
type elasticRound struct {
	est      estimator
	jobs     []elasticJob    // the pooled jobs; cap fixed within a round, so pointers into it hold
	capacity []int           // GPUs of each type up for training, by index in the cluster's types
	largest  []int           // the most GPUs of each type one job can hold (Snapshot.Largest)
	load     []int           // minimum GPUs bound to each type so far
	bound    []int           // each snapshot job's type index, or unbound / outside
	pools    [][]*elasticJob // each type's jobs in the snapshot's order
	order    []*elasticJob   // the rule's sorted copy of a pool
	counts   []int           // Optimus' counting sort's counts (optimusByMin)
	cands    []*elasticJob   // AFS' jobs that may take one more GPU
	given    []*elasticJob   // elasticPlan's jobs given GPUs
	run      []engine.Assignment
	explain  explain.Scratch
	// bins, when sites, is each site's (or edge server's) room: a job
	// never spans sites (alloc.Bins).
	bins  alloc.Bins
	sites bool
}

// Type indexes of elasticRound.bound besides the cluster's own.
const (
	elasticUnbound = -1 // not bound yet
	elasticOutside = -2 // bound to a type the cluster lacks, or no type holds its minimum now: does not run
)

// elasticPools binds every active job to one GPU type and returns the jobs
// of each type, in the snapshot's order (submission, then ID), with the
// type's GPUs up for training, as maps by type (see elasticRound.pool, which
// it runs).
func elasticPools(s *engine.Snapshot, oracle bool) (types []string, pools map[string][]*elasticJob, capacity map[string]int) {
	r := new(elasticRound)
	r.pool(s, oracle)
	types = s.Cluster.GPUTypes()
	pools = make(map[string][]*elasticJob, len(types))
	capacity = make(map[string]int, len(types))
	for i, t := range types {
		capacity[t] = r.capacity[i]
		if len(r.pools[i]) > 0 {
			pools[t] = r.pools[i]
		}
	}
	return types, pools, capacity
}

// pool binds every active job to one GPU type and fills r.pools (by index
// in s.Cluster.GPUTypes()) with the jobs of each type, in the snapshot's
// order (submission, then ID), and r.capacity with the type's GPUs that are
// up (Snapshot.Available: those taken by inference or down are not). A
// job asking for a type gets it; one that accepts any type keeps the type
// it runs on now, and a waiting one takes the type with the most GPUs left
// after the minimum counts of the jobs bound before it (the first type in
// the cluster's order on a tie) among those where one job could hold its
// minimum. A job's maximum is capped at the most GPUs of its type one job
// can hold now (r.largest: a job never spans sites, and never runs on a
// GPU that is down). A job whose minimum exceeds that, or whose type the
// cluster lacks, cannot run now and is left out.
//
// The pool sums a type's GPUs over sites; on a cluster of several sites
// the policies also keep each site's room (take, grow), so that jobs that
// each fit a site but not together are not all planned.
func (r *elasticRound) pool(s *engine.Snapshot, oracle bool) {
	types := s.Cluster.GPUTypes()
	r.capacity = resize(r.capacity, len(types))
	r.largest = resize(r.largest, len(types))
	r.load = resize(r.load, len(types))
	// Counting every GPU of the cluster planned jobs on GPUs inference had
	// taken, or across sites, which the placer cannot honour: such a job
	// waited while GPUs it could use sat idle, forever on a cloud beside an
	// inference site. alloc.Pool counts the same way. With every GPU up on
	// one site these are the cluster's counts, so such runs are unchanged.
	multiSite := len(s.Cluster.Sites()) > 1
	for i, t := range types {
		r.capacity[i] = s.Available("", t)
		r.largest[i] = r.capacity[i]
		if multiSite {
			r.largest[i] = s.Largest(t)
		}
		r.load[i] = 0
	}
	capacity, largest, load := r.capacity, r.largest, r.load
	r.est = estimator{s: s, oracle: oracle}
	r.bound = resize(r.bound, len(s.Jobs))
	bound := r.bound
	// First the jobs whose type is settled, so waiting any-type jobs see
	// their load.
	for i, st := range s.Jobs {
		bound[i] = elasticUnbound
		switch {
		case st.Job.GPUType != "":
			bound[i] = typeIndex(types, st.Job.GPUType)
		case len(types) == 1:
			bound[i] = 0
		case st.Alloc.GPUType != "" && len(st.GPUs) > 0:
			bound[i] = typeIndex(types, st.Alloc.GPUType)
		default:
			continue
		}
		if bound[i] >= 0 {
			load[bound[i]] += st.Job.MinGPUs
		}
	}
	for i, st := range s.Jobs {
		if bound[i] != elasticUnbound {
			continue
		}
		best := -1
		for t := range types {
			if largest[t] >= st.Job.MinGPUs && (best < 0 || capacity[t]-load[t] > capacity[best]-load[best]) {
				best = t
			}
		}
		if best < 0 {
			bound[i] = elasticOutside
			continue
		}
		bound[i] = best
		load[best] += st.Job.MinGPUs
	}
	if len(r.pools) < len(types) {
		r.pools = append(r.pools, make([][]*elasticJob, len(types)-len(r.pools))...)
	}
	r.pools = r.pools[:len(types)]
	for t := range r.pools {
		r.pools[t] = r.pools[t][:0]
	}
	// Every pooled job's elasticJob lives in r.jobs, whose capacity is set
	// before the first pointer into it is taken; a reused one keeps its
	// memo's memory.
	if cap(r.jobs) < len(s.Jobs) {
		r.jobs = append(r.jobs[:cap(r.jobs)], make([]elasticJob, len(s.Jobs)-cap(r.jobs))...)
	}
	jobs := r.jobs[:0]
	for i, st := range s.Jobs {
		t := bound[i]
		if t < 0 || st.Job.MinGPUs > largest[t] {
			continue
		}
		jobs = jobs[:len(jobs)+1]
		e := &jobs[len(jobs)-1]
		*e = elasticJob{st: st, typ: types[t], min: st.Job.MinGPUs, est: &r.est, rem: e.rem[:0], bin: -1}
		e.max = min(alloc.MaxGPUs(s, st), largest[t])
		r.pools[t] = append(r.pools[t], e)
	}
	r.jobs = jobs
}

// typeIndex is t's index in types, elasticOutside when types lacks it.
func typeIndex(types []string, t string) int {
	for i, u := range types {
		if u == t {
			return i
		}
	}
	return elasticOutside
}

// resize is xs with length n, reusing its memory when it has room (the
// values are left as they were: the caller sets them).
func resize[T any](xs []T, n int) []T {
	return slices.Grow(xs[:0], n)[:n]
}

// schedule is a round of AFS or Optimus: the jobs pooled by GPU type, each
// pool's free GPUs handed out by the policy's allocate, the plan and its
// reasons (terms), all in r's memory.
func (r *elasticRound) schedule(s *engine.Snapshot, oracle bool, allocate func(r *elasticRound, jobs []*elasticJob, free int), terms func([]byte, *engine.Status) []byte) engine.Plan {
	r.pool(s, oracle)
	r.sites = r.bins.Reset(s)
	types := s.Cluster.GPUTypes()
	for t := range types {
		allocate(r, r.pools[t], r.capacity[t])
	}
	plan := r.plan(types)
	r.explain.PlanAppend(s, &plan, nil, terms)
	return plan
}

// plan turns the GPU counts given into a plan: largest allocations first
// (they are the hardest to place), then by submission and ID. On a
// one-type cluster an assignment keeps the job's own (possibly empty)
// type, as greedy does; otherwise it names the pool's type. The plan's Run
// is r's memory, valid until r's next round.
func (r *elasticRound) plan(types []string) engine.Plan {
	given := r.given[:0]
	for t := range types {
		for _, e := range r.pools[t] {
			if e.n > 0 {
				given = append(given, e)
			}
		}
	}
	slices.SortStableFunc(given, func(a, b *elasticJob) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return elasticLess(a.st, b.st)
	})
	r.given = given
	run := r.run[:0]
	for _, e := range given {
		t := e.typ
		if len(types) == 1 {
			t = e.st.Job.GPUType
		}
		a := engine.Assignment{Job: e.st.Job.ID, GPUs: e.n, GPUType: t}
		if r.sites {
			r.bins.Name(&a, e.bin)
		}
		run = append(run, a)
	}
	r.run = run
	var plan engine.Plan
	if len(run) > 0 {
		plan.Run = run
	}
	return plan
}

// Sites. A job never spans sites, and on an edge site it uses one server
// (engine.Assignment). The pools counted a type's GPUs over every site, so
// on a cluster of several sites they planned counts that each fit a site
// but not together (jobs of 3 GPUs on two sites of 4: a third job's 2 GPUs
// counted from the 1 + 1 left), and the placer left the job that came last
// in the plan unplaced for the round while its GPUs idled. So there each
// job is also planned into one site (or edge server) as the placer will
// place it (alloc.Bins), on its minimum (take): a running job where it
// runs while that has room for its maximum, any other (or one that would
// find more room elsewhere) in the site (or server) with the most room,
// where it may grow (first fit, the placer's choice, packed every minimum
// into the first site); a further GPU goes only to
// a job whose site has one left (grow), and the GPUs it cannot take go to
// the others, by the policy's own rule. The plan names each job's site (and
// server). On one site there are no bins and nothing changes.

// take puts e, about to get its minimum, in a site with room for it; false
// when no site has.
func (r *elasticRound) take(e *elasticJob) bool {
	if !r.sites {
		return true
	}
	e.bin = r.bins.TakeSpread(e.st, e.typ, e.min, e.max)
	return e.bin >= 0
}

// full reports whether e's site has no GPU left for it.
func (r *elasticRound) full(e *elasticJob) bool {
	return r.sites && r.bins.Room(e.bin) == 0
}

// grow gives e one GPU more, in its site.
func (r *elasticRound) grow(e *elasticJob) {
	e.n++
	if r.sites {
		r.bins.Grow(e.bin, 1)
	}
}

// appendMinTerm appends the start of both policies' reason terms: "jobs
// start on their minimum (N GPUs)".
func appendMinTerm(b []byte, st *engine.Status) []byte {
	b = append(b, "jobs start on their minimum ("...)
	b = strconv.AppendInt(b, int64(st.Job.MinGPUs), 10)
	return append(b, " GPUs)"...)
}

// elasticLess orders jobs by submission time, then ID.
func elasticLess(a, b *engine.Status) int {
	ja, jb := a.Job, b.Job
	switch {
	case ja.Submit < jb.Submit:
		return -1
	case ja.Submit > jb.Submit:
		return 1
	case ja.ID < jb.ID:
		return -1
	case ja.ID > jb.ID:
		return 1
	}
	return 0
}
