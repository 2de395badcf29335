package elastic

import (
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/internal/alloc"
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

// elasticPools binds every active job to one GPU type and returns the jobs
// of each type, in the snapshot's order (submission, then ID), with the
// type's GPU count. A job asking for a type gets it; one that accepts any
// type keeps the type it runs on now, and a waiting one takes the type with
// the most GPUs left after the minimum counts of the jobs bound before it
// (the first type in the cluster's order on a tie). A job whose minimum
// exceeds its pool never runs and is left out.
func elasticPools(s *engine.Snapshot, oracle bool) (types []string, pools map[string][]*elasticJob, capacity map[string]int) {
	types = s.Cluster.GPUTypes()
	capacity = make(map[string]int, len(types))
	for _, t := range types {
		capacity[t] = s.Cluster.GPUsOfType(t)
	}
	est := &estimator{s: s, oracle: oracle}
	load := make(map[string]int, len(types))
	bound := make([]string, len(s.Jobs))
	// First the jobs whose type is settled, so waiting any-type jobs see
	// their load.
	for i, st := range s.Jobs {
		switch {
		case st.Job.GPUType != "":
			bound[i] = st.Job.GPUType
		case len(types) == 1:
			bound[i] = types[0]
		case st.Alloc.GPUType != "" && len(st.GPUs) > 0:
			bound[i] = st.Alloc.GPUType
		default:
			continue
		}
		load[bound[i]] += st.Job.MinGPUs
	}
	for i, st := range s.Jobs {
		if bound[i] != "" {
			continue
		}
		best := ""
		for _, t := range types {
			if capacity[t] >= st.Job.MinGPUs && (best == "" || capacity[t]-load[t] > capacity[best]-load[best]) {
				best = t
			}
		}
		if best == "" {
			continue
		}
		bound[i] = best
		load[best] += st.Job.MinGPUs
	}
	pools = make(map[string][]*elasticJob, len(types))
	for i, st := range s.Jobs {
		t := bound[i]
		if t == "" || st.Job.MinGPUs > capacity[t] {
			continue
		}
		e := &elasticJob{st: st, typ: t, min: st.Job.MinGPUs, est: est}
		e.max = min(alloc.MaxGPUs(s, st), capacity[t])
		pools[t] = append(pools[t], e)
	}
	return types, pools, capacity
}

// elasticPlan turns the GPU counts given into a plan: largest allocations
// first (they are the hardest to place), then by submission and ID. On a
// one-type cluster an assignment keeps the job's own (possibly empty) type,
// as greedy does; otherwise it names the pool's type.
func elasticPlan(types []string, pools map[string][]*elasticJob) engine.Plan {
	var given []*elasticJob
	for _, t := range types {
		for _, e := range pools[t] {
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
	var plan engine.Plan
	for _, e := range given {
		t := e.typ
		if len(types) == 1 {
			t = e.st.Job.GPUType
		}
		plan.Run = append(plan.Run, engine.Assignment{Job: e.st.Job.ID, GPUs: e.n, GPUType: t})
	}
	return plan
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
