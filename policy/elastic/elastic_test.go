package elastic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// ---------------------------------------------------------------------------
// Helpers for the elastic policies (Optimus, AFS).
// ---------------------------------------------------------------------------

// rateModel is a performance model given as a table: job ID -> progress per
// second on 1, 2, 3... GPUs (0, or beyond the table: cannot run). Work is
// the job's Work, so with Seconds(w) a job's remaining time on n GPUs is
// (w - progress) / rates[n-1]: easy to work out by hand.
type rateModel map[string][]float64

// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

func (rateModel) Name() string            { return "rates" }
func (rateModel) Check(*job.Job) error    { return nil }
func (rateModel) Work(j *job.Job) float64 { return j.Work }
func (rateModel) Costs(*job.Job) perf.Costs {
	return perf.Costs{}
}

func (m rateModel) Rate(j *job.Job, a perf.Alloc, _ float64) (float64, float64) {
	r := m[j.ID]
	if n := a.GPUs(); n >= 1 && n <= len(r) {
		return r[n-1], math.Inf(1)
	}
	return 0, math.Inf(1)
}

// linear is a rate table of n on n GPUs, up to max.
func linear(max int) []float64 {
	r := make([]float64, max)
	for i := range r {
		r[i] = float64(i + 1)
	}
	return r
}

// ej is an elastic job of w seconds (at one GPU under perf.Duration, or of
// rate-model work) submitted at submit, on [lo, hi] GPUs.
func ej(id string, submit float64, lo, hi int, w float64) policytest.JobState {
	return policytest.JobState{Job: enginetest.Job(id).At(submit).Elastic(lo, lo, hi).Seconds(w).Obj()}
}

// typed restricts an elastic job to a GPU type.
func typed(x policytest.JobState, t string) policytest.JobState { x.Job.GPUType = t; return x }

// elasticCase is one hand-worked scenario: jobs on a cluster, predicted by
// rates (nil: perf.Duration, linear in the GPU count), optional hints by job
// ID, and the plan expected ("id:gpus[:type]", largest first).
type elasticCase struct {
	name    string
	cluster string
	rates   rateModel
	hints   map[string]*goodput.Hints
	jobs    []policytest.JobState
	want    []string
}

func elasticSnap(t *testing.T, tc elasticCase) *engine.Snapshot {
	t.Helper()
	s := policytest.Snap(t, 1000, enginetest.Cluster(tc.cluster), tc.jobs...)
	if tc.rates != nil {
		s.Model = tc.rates
	}
	for _, st := range s.Jobs {
		if h, ok := tc.hints[st.Job.ID]; ok {
			st.Hints = h
		}
	}
	return s
}

func checkElastic(t *testing.T, spec string, cases []elasticCase) {
	t.Helper()
	p := fam.Parse(t, spec, contract.Context{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := elasticSnap(t, tc)
			plan := p.Schedule(s)
			got := policytest.Runs(plan)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: plan %v, want %v", spec, got, tc.want)
			}
			checkPlanValid(t, s, plan)
			if again := policytest.Runs(p.Schedule(s)); !slices.Equal(again, got) {
				t.Errorf("%s: second plan %v differs from first %v", spec, again, got)
			}
		})
	}
}

// checkPlanValid checks what the engine would refuse: a job twice, a count
// outside the job's limits, a type it does not accept, more GPUs of a type
// (or in all) than the cluster has.
func checkPlanValid(t *testing.T, s *engine.Snapshot, p engine.Plan) {
	t.Helper()
	byID := map[string]*engine.Status{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	seen := map[string]bool{}
	perType := map[string]int{}
	total := 0
	for _, a := range p.Run {
		st := byID[a.Job]
		if st == nil || seen[a.Job] {
			t.Fatalf("plan %v: job %s unknown or listed twice", policytest.Runs(p), a.Job)
		}
		seen[a.Job] = true
		j := st.Job
		if a.GPUs < j.MinGPUs || a.GPUs > j.MaxGPUs {
			t.Errorf("plan %v: %s gets %d GPUs outside [%d, %d]", policytest.Runs(p), a.Job, a.GPUs, j.MinGPUs, j.MaxGPUs)
		}
		typ := a.GPUType
		if j.GPUType != "" && typ != "" && typ != j.GPUType {
			t.Errorf("plan %v: %s asks for %s, planned on %s", policytest.Runs(p), a.Job, j.GPUType, typ)
		}
		if typ == "" {
			typ = j.GPUType
		}
		if typ == "" && len(s.Cluster.GPUTypes()) == 1 {
			typ = s.Cluster.GPUTypes()[0]
		}
		if typ == "" {
			t.Errorf("plan %v: %s has no GPU type on a mixed cluster", policytest.Runs(p), a.Job)
		}
		perType[typ] += a.GPUs
		total += a.GPUs
	}
	for typ, n := range perType {
		if n > s.Cluster.GPUsOfType(typ) {
			t.Errorf("plan %v: %d %s GPUs, the cluster has %d", policytest.Runs(p), n, typ, s.Cluster.GPUsOfType(typ))
		}
	}
	if total > s.Cluster.TotalGPUs() {
		t.Errorf("plan %v: %d GPUs, the cluster has %d", policytest.Runs(p), total, s.Cluster.TotalGPUs())
	}
	for i := 1; i < len(p.Run); i++ {
		if p.Run[i].GPUs > p.Run[i-1].GPUs {
			t.Errorf("plan %v: not largest allocation first", policytest.Runs(p))
		}
	}
}

// Hand-made hints. Gamma 1 (no overlap), no gradient noise (Var 0), and the
// job's batch equal to the initial batch 64, so efficiency is 1 and the
// remaining time on n GPUs is left progress x the iteration time:
//
//	iter(n) = AlphaC + BetaC x local(n) + (n > 1: AlphaR + BetaR x max(n-2, 0))
//
// with local = 64, 32, 21, 16 samples on 1-4 GPUs (64/3 rounds up to 22,
// capped at 64 / 3 = 21 by the largest batch). At most 64 / 16 = 4 GPUs.
var testLimits = goodput.Limits{InitBatch: 64, MaxBatch: 64, MinLocal: 16, MaxLocal: 64, Accumulation: true}

func testHints(alphaC, betaC, alphaR, betaR float64) *goodput.Hints {
	return &goodput.Hints{
		Perf:   goodput.Params{AlphaC: alphaC, BetaC: betaC, AlphaN: alphaR, BetaN: betaR, AlphaR: alphaR, BetaR: betaR, Gamma: 1},
		Grad:   goodput.Grad{Sqr: 1, Var: 0},
		Limits: testLimits, MaxReplicas: 1, Fitted: true,
	}
}

var (
	// Scales well: iter = 1, 0.6, 0.428125, 0.35 on 1-4 GPUs.
	hintsGood = testHints(0, 1.0/64, 0.1, 0)
	// Scales poorly: iter = 1, 0.85, 0.7640625, 0.725.
	hintsPoor = testHints(0.5, 0.5/64, 0.1, 0)
)

// withBatch sets a job's (fixed) batch size.
func withBatch(x policytest.JobState, b int) policytest.JobState { x.Job.BatchSize = b; return x }

// ---------------------------------------------------------------------------
// The shared estimator.
// ---------------------------------------------------------------------------

func TestElasticRemainingFromHints(t *testing.T) {
	s := policytest.Snap(t, 0, enginetest.Cluster("1x4:t4"),
		policytest.WithProgress(withBatch(ej("a", 0, 1, 4, 150), 64), 50), // 100 progress left
		withBatch(ej("b", 1, 1, 4, 80), 64))
	a, b := s.Jobs[0], s.Jobs[1]
	a.Hints = hintsGood
	est := &estimator{s: s}
	// Remaining = left x iter(n) (see testLimits): 100 x 1, 0.6, 0.428125, 0.35.
	for n, want := range map[int]float64{1: 100, 2: 60, 3: 42.8125, 4: 35} {
		if got := est.remaining(a, n, "t4"); math.Abs(got-want) > 1e-5 {
			t.Errorf("hints: remaining on %d GPUs = %v, want %v", n, got, want)
		}
	}
	if got := est.remaining(a, 0, "t4"); !math.IsInf(got, 1) {
		t.Errorf("remaining on 0 GPUs = %v, want +Inf", got)
	}
	// b reports no hints: the duration model, 80 s at 1 GPU, linear.
	if got := est.remaining(b, 2, "t4"); got != 40 {
		t.Errorf("no hints: remaining on 2 GPUs = %v, want 40", got)
	}
	// Unfitted hints are ignored too.
	b.Hints = &goodput.Hints{Limits: testLimits}
	if got := est.remaining(b, 2, "t4"); got != 40 {
		t.Errorf("unfitted hints: remaining on 2 GPUs = %v, want 40", got)
	}
	// The oracle reads the model (150 - 50 = 100 s at 1 GPU, linear) even
	// with hints.
	oracle := &estimator{s: s, oracle: true}
	if got := oracle.remaining(a, 4, "t4"); got != 25 {
		t.Errorf("oracle: remaining on 4 GPUs = %v, want 25", got)
	}
	// A finished job needs nothing.
	a.Progress = a.Work
	if got := est.remaining(a, 2, "t4"); got != 0 {
		t.Errorf("finished: remaining = %v, want 0", got)
	}
}

func TestElasticGoodputFixedBatch(t *testing.T) {
	f := goodput.Function{
		P: goodput.Params{AlphaC: 0, BetaC: 1.0 / 64, AlphaR: 0.1, AlphaN: 0.1, Gamma: 1},
		G: goodput.Grad{Sqr: 1, Var: 1},
		L: goodput.Limits{InitBatch: 64, MaxBatch: 256, MinLocal: 16, MaxLocal: 64},
	}
	for _, tc := range []struct {
		batch, nodes, replicas int
		want                   float64
	}{
		// Batch 64 on 1 GPU: one pass of 64 (1 s), efficiency 1: 64/s.
		{batch: 64, nodes: 1, replicas: 1, want: 64},
		// Batch 128 on 1 GPU: 2 passes of 64 (one accumulation policytest.Step), 2 s:
		// 64 samples/s. Scale 2: gain (1+1)/(1/2+1) = 4/3, efficiency
		// 4/3/2 = 2/3: goodput 128/3.
		{batch: 128, nodes: 1, replicas: 1, want: 128.0 / 3},
		// Batch 128 on 2 GPUs: 64 each, 1 s + 0.1 s sync: 128/1.1 x 2/3.
		{batch: 128, nodes: 1, replicas: 2, want: 128 / 1.1 * 2 / 3},
		// No batch: the artifact's default, max(64, 16 x 8) = 128 on 8 GPUs
		// (16 each: 0.25 s + 0.1 s).
		{batch: 0, nodes: 2, replicas: 8, want: 128 / 0.35 * 2 / 3},
		// Batch 256 on 3 GPUs: 86 per GPU, 2 passes of 43, capped at
		// 256 / 6 = 42: 252 samples in 2 x 42/64 + 0.1 s.
		{batch: 256, nodes: 1, replicas: 3, want: 252 / (2*42.0/64 + 0.1) * (2 / (64.0/252 + 1)) / (252.0 / 64)},
	} {
		j := enginetest.Job("j").Seconds(1).Obj()
		j.BatchSize = tc.batch
		if got := elasticGoodput(f, j, tc.nodes, tc.replicas); math.Abs(got-tc.want) > 1e-4*tc.want {
			t.Errorf("batch %d on %dx%d: goodput %v, want %v", tc.batch, tc.nodes, tc.replicas, got, tc.want)
		}
	}
	// An adaptive job gets the best batch: Optimize's goodput.
	j := enginetest.Job("j").Seconds(1).Obj()
	j.AdaptBatch = true
	if got, want := elasticGoodput(f, j, 1, 2), f.Optimize(1, 2).Goodput; got != want {
		t.Errorf("adaptive: goodput %v, want Optimize's %v", got, want)
	}
}

func TestElasticMaxGPUs(t *testing.T) {
	adapt := ej("adapt", 6, 1, 8, 10)
	adapt.Job.AdaptBatch = true
	s := policytest.Snap(t, 0, enginetest.Cluster("1x8:t4"),
		withBatch(ej("b64", 0, 1, 8, 10), 64),
		withBatch(ej("b256", 1, 1, 8, 10), 256),
		ej("b0", 2, 1, 8, 10),
		withBatch(ej("small", 3, 1, 2, 10), 256),
		withBatch(ej("min3", 4, 3, 8, 10), 32),
		ej("nohints", 5, 1, 6, 10),
		adapt)
	h := &goodput.Hints{Limits: goodput.Limits{InitBatch: 64, MaxBatch: 96, MinLocal: 16}}
	want := map[string]int{
		"b64":     4, // 64 / 16
		"b256":    8, // 256 / 16 = 16, capped by MaxGPUs
		"b0":      4, // the initial batch, 64 / 16
		"small":   2, // MaxGPUs
		"min3":    3, // 32 / 16 = 2, but never below MinGPUs
		"nohints": 6, // no limits known (the duration model is no Observer)
		"adapt":   6, // an adaptive job: MaxBatch 96 / 16
	}
	for _, st := range s.Jobs {
		if st.Job.ID != "nohints" {
			st.Hints = h
		}
		if got := alloc.MaxGPUs(s, st); got != want[st.Job.ID] {
			t.Errorf("%s: max GPUs %d, want %d", st.Job.ID, got, want[st.Job.ID])
		}
	}
}

// TestElasticPools: typed jobs go to their type; a running any-type job stays
// on its type; a waiting one takes the type with the most GPUs left after
// the jobs bound before it; a job whose minimum exceeds every pool is out.
func TestElasticPools(t *testing.T) {
	s := policytest.Snap(t, 0, enginetest.Cluster("1x2:a,1x4:b"),
		typed(ej("x", 0, 1, 4, 10), "a"),
		typed(ej("y", 1, 2, 4, 10), "b"),
		ej("z", 2, 1, 4, 10),             // a: 2-1 = 1 left, b: 4-2 = 2: b
		ej("w", 3, 1, 4, 10),             // a: 1, b: 4-3 = 1: the first type, a
		ej("v", 4, 3, 4, 10),             // only b holds 3
		ej("u", 5, 5, 5, 10),             // no pool holds 5
		typed(ej("t", 6, 1, 1, 10), "c")) // no such type
	types, pools, capacity := elasticPools(s, false)
	if !slices.Equal(types, []string{"a", "b"}) || capacity["a"] != 2 || capacity["b"] != 4 {
		t.Fatalf("types %v capacity %v", types, capacity)
	}
	got := map[string][]string{}
	for typ, p := range pools {
		for _, e := range p {
			got[typ] = append(got[typ], fmt.Sprintf("%s[%d,%d]", e.st.Job.ID, e.min, e.max))
		}
	}
	// Maxima are capped at the pool's size.
	want := map[string][]string{"a": {"x[1,2]", "w[1,2]"}, "b": {"y[2,4]", "z[1,4]", "v[3,4]"}}
	for _, typ := range types {
		if !slices.Equal(got[typ], want[typ]) {
			t.Errorf("pool %s = %v, want %v", typ, got[typ], want[typ])
		}
	}
	// A running any-type job keeps its type even when the other has more room.
	s = policytest.Snap(t, 0, enginetest.Cluster("1x1:a,1x4:b"), policytest.JobState{Job: enginetest.Job("r").Elastic(1, 1, 4).Seconds(10).Obj(), Held: 1})
	if s.Jobs[0].Alloc.GPUType != "a" {
		t.Fatalf("bad test: r runs on %q", s.Jobs[0].Alloc.GPUType)
	}
	if _, pools, _ := elasticPools(s, false); len(pools["a"]) != 1 {
		t.Errorf("running job moved: pools %v", pools)
	}
}

// TestElasticInvariants: on random clusters, jobs and rate tables, both
// policies give plans the engine accepts, use no more GPUs than a pool has,
// and are deterministic; AFS leaves a GPU idle only when no job in its pool
// can take one more.
func TestElasticInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clusters := []string{"1x4:t4", "2x4:t4", "1x2:a,1x4:b", "3x2:a,1x1:b"}
	for iter := range 300 {
		shorthand := clusters[iter%len(clusters)]
		c := enginetest.Cluster(shorthand)
		types := c.GPUTypes()
		rates := rateModel{}
		var jobs []policytest.JobState
		for i := range 1 + rng.IntN(7) {
			id := fmt.Sprintf("j%d", i)
			lo := 1 + rng.IntN(3)
			hi := lo + rng.IntN(6)
			x := ej(id, float64(rng.IntN(4)), lo, hi, 10+float64(rng.IntN(1000)))
			if rng.IntN(3) == 0 {
				x = typed(x, types[rng.IntN(len(types))])
			}
			x.Progress = float64(rng.IntN(10))
			r := make([]float64, 1+rng.IntN(10))
			for k := range r {
				r[k] = 0.2 + 2*rng.Float64() // not monotone: more GPUs may slow a job
			}
			if rng.IntN(5) == 0 {
				r[len(r)-1] = 0 // cannot run on its largest count
			}
			rates[id] = r
			jobs = append(jobs, x)
		}
		s := policytest.Snap(t, 0, c, jobs...)
		s.Model = rates
		for _, spec := range []string{"optimus", "afs"} {
			p := fam.Parse(t, spec, contract.Context{})
			plan := p.Schedule(s)
			checkPlanValid(t, s, plan)
			// The plan's Run is the policy's memory, reused by its next
			// round: read it before planning again.
			first := policytest.Runs(plan)
			if again := policytest.Runs(p.Schedule(s)); !slices.Equal(again, first) {
				t.Errorf("%s on %s: plans differ: %v then %v", spec, shorthand, first, again)
			}
			if spec != "afs" {
				continue
			}
			_, pools, capacity := elasticPools(s, false)
			given := map[string]int{}
			for _, a := range plan.Run {
				given[a.Job] = a.GPUs
			}
			for typ, pool := range pools {
				used, canGrow := 0, false
				for _, e := range pool {
					n, r := given[e.st.Job.ID], rates[e.st.Job.ID]
					used += n
					// It could take one more: below its maximum and able
					// to run on n+1 GPUs (rate r[n] > 0).
					if n > 0 && n < e.max && n < len(r) && r[n] > 0 {
						canGrow = true
					}
				}
				if used < capacity[typ] && canGrow {
					t.Errorf("afs on %s: pool %s uses %d of %d GPUs while a job could grow: %v", shorthand, typ, used, capacity[typ], policytest.Runs(plan))
				}
			}
		}
	}
}

// TestElasticThroughEngine runs both policies in a real engine: a lone job
// takes all it may use; an arrival makes the policy shrink it.
func TestElasticThroughEngine(t *testing.T) {
	for _, spec := range []string{"optimus", "afs"} {
		a := enginetest.Job("a").At(0).Elastic(1, 1, 4).Seconds(1000).Obj()
		b := enginetest.Job("b").At(10).Elastic(1, 1, 4).Seconds(100).Obj()
		c := enginetest.Job("c").At(20).Elastic(2, 2, 2).Seconds(100).Obj()
		fam.Play(t, spec, "1x4:t4", []policytest.Step{
			{At: 0, Submit: []*job.Job{a}, Running: []string{"a"}},
			{At: 10, Submit: []*job.Job{b}, Running: []string{"a", "b"}},
			{At: 20, Submit: []*job.Job{c}, Running: []string{"a", "b", "c"}},
		})
	}
}
