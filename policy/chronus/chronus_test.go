package chronus

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver/solvertest"
)

// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

func opts(bv ...int) []leaseOption {
	var out []leaseOption
	for i := 0; i+1 < len(bv); i += 2 {
		out = append(out, leaseOption{Blocks: bv[i], Value: float64(bv[i+1])})
	}
	return out
}

func blocksOf(p *leasePlan, i int) []int {
	var out []int
	for t, b := range p.Blocks[i] {
		if b {
			out = append(out, t)
		}
	}
	return out
}

// TestLeaseMILP: small lease problems solved by hand. Each case lists the
// optimum's value and, where it is unique, the blocks of each job.
func TestLeaseMILP(t *testing.T) {
	solvertest.Require(t)
	cases := []struct {
		name     string
		jobs     []leaseJob
		capacity []int
		now      leaseNowWeight
		value    float64
		option   []int
		blocks   [][]int // nil entries: not checked
	}{
		{
			// A must run in block 0 (deadline after 1 block); B then takes
			// block 1. Both fit: 20.
			name:     "deadlines order the blocks",
			jobs:     []leaseJob{{Gpus: 2, Need: 1, Options: opts(1, 10)}, {Gpus: 2, Need: 1, Options: opts(2, 10)}},
			capacity: []int{2, 2}, value: 20, option: []int{0, 0}, blocks: [][]int{{0}, {1}},
		},
		{
			// One block of 2 GPUs: the 2-GPU job (10) or both 1-GPU jobs (20).
			name:     "two small beat one large",
			jobs:     []leaseJob{{Gpus: 2, Need: 1, Options: opts(1, 10)}, {Gpus: 1, Need: 1, Options: opts(1, 10)}, {Gpus: 1, Need: 1, Options: opts(1, 10)}},
			capacity: []int{2}, value: 20, option: []int{-1, 0, 0}, blocks: [][]int{nil, {0}, {0}},
		},
		{
			// Soft job A (2 blocks by block 2 earns 10, by block 3 earns 8);
			// strict B needs block 0. A on blocks 0-1 and B dropped: 10;
			// B on 0 and A on 1-2 (its second option): 18.
			name:     "soft job takes its later option",
			jobs:     []leaseJob{{Gpus: 1, Need: 2, Options: opts(2, 10, 3, 8)}, {Gpus: 1, Need: 1, Options: opts(1, 10)}},
			capacity: []int{1, 1, 1}, value: 18, option: []int{1, 0}, blocks: [][]int{{1, 2}, {0}},
		},
		{
			// Maximize runs the slack job now: 10 + 1 x 1/2 (block 0 term).
			name:     "maximize runs now",
			jobs:     []leaseJob{{Gpus: 1, Need: 1, Options: opts(2, 10)}},
			capacity: []int{2, 2}, now: 1, value: 10, option: []int{0}, blocks: [][]int{{0}},
		},
		{
			name:     "minimize leaves the current lease",
			jobs:     []leaseJob{{Gpus: 1, Need: 1, Options: opts(2, 10)}},
			capacity: []int{2, 2}, now: -1, value: 10, option: []int{0}, blocks: [][]int{{1}},
		},
		{
			// Capacity falls to 0 in block 1: the 2-block job needs blocks 0
			// and 2, skipping the empty one.
			name:     "capacity per block",
			jobs:     []leaseJob{{Gpus: 1, Need: 2, Options: opts(3, 10)}},
			capacity: []int{1, 0, 1}, value: 10, option: []int{0}, blocks: [][]int{{0, 2}},
		},
		{
			// Needs 3 blocks before block 2: impossible, nothing chosen.
			name:     "infeasible job gets nothing",
			jobs:     []leaseJob{{Gpus: 1, Need: 3, Options: opts(2, 10)}},
			capacity: []int{4, 4}, value: 0, option: []int{-1}, blocks: [][]int{{}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := solveLeaseMILP(tc.jobs, tc.capacity, tc.now, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.Value != tc.value || !slices.Equal(p.Option, tc.option) {
				t.Fatalf("value %v options %v, want %v %v", p.Value, p.Option, tc.value, tc.option)
			}
			for i, want := range tc.blocks {
				if want == nil {
					continue
				}
				if got := blocksOf(p, i); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Errorf("job %d blocks %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestPackLeases: the artifact's greedy packing by hand.
func TestPackLeases(t *testing.T) {
	// Latest blocks first: a 1-block job due by block 3 lands in block 2.
	p, ok := packLeases([]leaseJob{{Gpus: 1, Need: 1, Options: opts(3, 10)}}, []int{1, 1, 1})
	if !ok || !slices.Equal(blocksOf(p, 0), []int{2}) {
		t.Fatalf("got %v %v, want block [2]", ok, blocksOf(p, 0))
	}
	// Larger jobs first: the 2-GPU job (due by 2) takes blocks 1 and 0
	// (latest first), so the 1-GPU job due by 2 does not fit.
	p, ok = packLeases([]leaseJob{{Gpus: 1, Need: 1, Options: opts(2, 10)}, {Gpus: 2, Need: 2, Options: opts(2, 10)}}, []int{2, 2})
	if ok || p.Option[0] != -1 || !slices.Equal(blocksOf(p, 1), []int{0, 1}) {
		t.Fatalf("got ok=%v options %v blocks %v", ok, p.Option, blocksOf(p, 1))
	}
	// A soft job falls back to its second option when the first is full.
	p, ok = packLeases([]leaseJob{{Gpus: 1, Need: 1, Options: opts(1, 10)}, {Gpus: 1, Need: 1, Options: opts(1, 10, 2, 5)}}, []int{1, 1})
	if !ok || !slices.Equal(p.Option, []int{0, 1}) || p.Value != 15 {
		t.Fatalf("got ok=%v options %v value %v, want [0 1] 15", ok, p.Option, p.Value)
	}
}

// TestLeaseMILPBruteForce: on random tiny instances the MILP's value equals
// the best found by enumerating every choice of option and blocks, its plan
// keeps every block within capacity and every job before its chosen
// deadline, and it is never worse than the greedy packing.
func TestLeaseMILPBruteForce(t *testing.T) {
	solvertest.Require(t)
	r := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 60; it++ {
		nb := 1 + r.IntN(3)
		capacity := make([]int, nb)
		for t := range capacity {
			capacity[t] = r.IntN(4)
		}
		jobs := make([]leaseJob, 1+r.IntN(3))
		for i := range jobs {
			jobs[i] = leaseJob{Gpus: 1 + r.IntN(3), Need: 1 + r.IntN(2)}
			b, v := 1+r.IntN(nb), 10
			for range 1 + r.IntN(2) {
				jobs[i].Options = append(jobs[i].Options, leaseOption{Blocks: b, Value: float64(v)})
				b, v = min(b+1, nb), v-1-r.IntN(3)
			}
		}
		p, err := solveLeaseMILP(jobs, capacity, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		best := bruteLeases(jobs, capacity, make([]int, nb), 0)
		if p.Value != best {
			t.Fatalf("instance %d (%+v, cap %v): MILP %v, brute force %v", it, jobs, capacity, p.Value, best)
		}
		used := make([]int, nb)
		for i, j := range jobs {
			got := blocksOf(p, i)
			if p.Option[i] < 0 {
				if len(got) != 0 {
					t.Fatalf("instance %d: job %d has blocks %v and no option", it, i, got)
				}
				continue
			}
			if len(got) != j.Need || got[len(got)-1] >= j.Options[p.Option[i]].Blocks {
				t.Fatalf("instance %d: job %d blocks %v for need %d by %d", it, i, got, j.Need, j.Options[p.Option[i]].Blocks)
			}
			for _, b := range got {
				used[b] += j.Gpus
			}
		}
		for b := range used {
			if used[b] > capacity[b] {
				t.Fatalf("instance %d: block %d uses %d of %d", it, b, used[b], capacity[b])
			}
		}
		if g, _ := packLeases(jobs, capacity); g.Value > p.Value {
			t.Fatalf("instance %d: greedy %v beats the MILP %v", it, g.Value, p.Value)
		}
	}
}

// bruteLeases is the best total value for jobs[i:] given the GPUs used per
// block so far: each job takes nothing, or an option and any Need blocks
// before its deadline that have room.
func bruteLeases(jobs []leaseJob, capacity, used []int, i int) float64 {
	if i == len(jobs) {
		return 0
	}
	best := bruteLeases(jobs, capacity, used, i+1)
	j := jobs[i]
	for _, o := range j.Options {
		last := min(o.Blocks, len(capacity))
		for mask := 0; mask < 1<<last; mask++ {
			var bs []int
			fits := true
			for b := 0; b < last; b++ {
				if mask&(1<<b) != 0 {
					bs = append(bs, b)
					fits = fits && used[b]+j.Gpus <= capacity[b]
				}
			}
			if !fits || len(bs) != j.Need {
				continue
			}
			for _, b := range bs {
				used[b] += j.Gpus
			}
			best = max(best, o.Value+bruteLeases(jobs, capacity, used, i+1))
			for _, b := range bs {
				used[b] -= j.Gpus
			}
		}
	}
	return best
}

func slo(id string, submit float64, gpus int, seconds, deadline float64) policytest.JobState {
	return policytest.JobState{Job: enginetest.Job(id).At(submit).GPUs(gpus).Seconds(seconds).Deadline(deadline).Obj()}
}

// TestChronusPlans: admission, the lease problem and spot capacity on a
// 4-GPU cluster with lease=60, margin=1, overhead=0 (so a job of S seconds
// needs ceil(S/60) leases), at t=1000 (lease 16, which starts at 960; the
// deadline 1200 is 20 x 60, so 4 blocks).
func TestChronusPlans(t *testing.T) {
	solvertest.Require(t)
	spec := "chronus:margin=1:overhead=0:objective=maximize"
	cases := []policytest.PlanCase{
		{
			// Both SLO jobs fit before their deadlines and are admitted; the
			// MILP (maximize) runs both now; the best-effort job gets
			// nothing left.
			Name: "admitted SLO jobs hold the lease", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{slo("a", 0, 2, 120, 1200), slo("b", 1, 2, 120, 1200), policytest.Wait("be", 2, 1, 50)},
			Want: []string{"a:2", "b:2"},
		},
		{
			// c needs 4 GPUs for 4 leases by block 4, which a and b already
			// fill half of: c is not admitted and runs as spot capacity only,
			// after the admitted jobs hold theirs; be (least GPU-time) first.
			Name: "unadmitted job waits", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{slo("a", 0, 2, 120, 1200), slo("b", 1, 2, 120, 1200), slo("c", 2, 4, 240, 1200)},
			Want: []string{"a:2", "b:2"},
		},
		{
			// A job that cannot meet its deadline any more (1000 + 300 >
			// 1200) ranks after best-effort work.
			Name: "lost job last", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{slo("late", 0, 4, 300, 1200), policytest.Wait("be", 2, 2, 50)},
			Want: []string{"be:2"},
		},
	}
	fam.CheckPlans(t, spec, cases)
}

// TestChronusMinimizeLeavesSpot: with objective=minimize an SLO job with
// slack gives the current lease to best-effort work, and it still meets its
// deadline by the plan (blocks as late as possible).
func TestChronusMinimizeLeavesSpot(t *testing.T) {
	solvertest.Require(t)
	p := fam.Parse(t, "chronus:margin=1:overhead=0:objective=minimize", contract.Context{})
	s := policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), slo("a", 0, 4, 60, 1200), policytest.Wait("be", 2, 4, 500))
	plan := p.Schedule(s)
	if got := policytest.Runs(plan); !slices.Equal(got, []string{"be:4"}) {
		t.Fatalf("plan %v, want [be:4]", got)
	}
	if m := plan.Memo["a"]; int(m[chronusClass]) != chronusAdmitted || int(m[chronusHeld]) == 17 || int(m[chronusSolved]) != 17 {
		t.Fatalf("a's memo %v: want admitted, solved in lease 16, not holding it", m)
	}
	// The lease after next (t=1140, lease 19, the last block before 1200)
	// the job has no slack left and takes the lease from be.
	s2 := policytest.Snap(t, 1140, enginetest.Cluster("1x4:t4"), withMemo(slo("a", 0, 4, 60, 1200), plan.Memo["a"]), policytest.Hold("be", 2, 4, 500))
	if got := policytest.Runs(p.Schedule(s2)); !slices.Equal(got, []string{"a:4"}) {
		t.Fatalf("at 1140: plan %v, want [a:4]", got)
	}
}

func withMemo(x policytest.JobState, m engine.Memo) policytest.JobState { x.Memo = m; return x }

// TestChronusSoftDeadline: a soft job whose first deadline cannot be met in
// whole leases (70 s of work needs 2 leases; 1075 leaves one, lease 16) is
// still admitted on its second; the same job with only the first deadline
// is not admitted (yet not lost: 1000 + 70 <= 1075).
func TestChronusSoftDeadline(t *testing.T) {
	solvertest.Require(t)
	p := fam.Parse(t, "chronus:margin=1:overhead=0", contract.Context{})
	soft := slo("s", 0, 4, 70, 1075)
	soft.Job.Utility = &job.Utility{Deadlines: []float64{1075, 1500}, Values: []float64{10, 5}}
	plan := p.Schedule(policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), soft))
	if m := plan.Memo["s"]; int(m[chronusClass]) != chronusAdmitted || int(m[chronusOption]) != 2 {
		t.Fatalf("memo %v: want admitted on option 2", m)
	}
	strict := slo("s", 0, 4, 70, 1075)
	plan = p.Schedule(policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), strict))
	if m := plan.Memo["s"]; int(m[chronusClass]) != chronusUnadmitted {
		t.Fatalf("strict memo %v: want unadmitted", m)
	}
}

func TestChronusKnobs(t *testing.T) {
	for _, spec := range []string{"chronus:lease=0", "chronus:tolerate=0.5", "chronus:objective=most", "chronus:horizon=0", "chronus:maxjobs=1.5", "chronus:bogus=1"} {
		if _, err := fam(spec, contract.Context{}); err == nil {
			t.Errorf("%s: no error", spec)
		}
	}
}

// memoRecorder wraps a policy and keeps the latest memo each job was given.
type memoRecorder struct {
	engine.Policy
	memos map[string]engine.Memo
}

func (m *memoRecorder) Schedule(s *engine.Snapshot) engine.Plan {
	p := m.Policy.Schedule(s)
	for id, v := range p.Memo {
		m.memos[id] = v
	}
	return p
}

// TestChronusAdmittedMeetDeadlines: the promise behind admission. On random
// workloads on one 8-GPU node, with no restart cost and no padding, every
// job Chronus admits finishes by its deadline (admission packs it with the
// jobs admitted before; each lease's MILP keeps them all), the plan never
// asks for more GPUs than exist (the engine would refuse it), and the
// workload is tight enough that some jobs are refused.
func TestChronusAdmittedMeetDeadlines(t *testing.T) {
	solvertest.Require(t)
	refused := 0
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 9))
		var jobs []*job.Job
		for i := range 30 {
			dur := float64(30 + r.IntN(300))
			submit := float64(r.IntN(900))
			jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(submit).GPUs([]int{1, 2, 4}[r.IntN(3)]).
				Seconds(dur).Deadline(submit+dur*(1.2+2*r.Float64())).Obj())
		}
		rec := &memoRecorder{Policy: fam.Parse(t, "chronus:margin=1:overhead=0", contract.Context{}), memos: map[string]engine.Memo{}}
		run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x8:t4"), Model: perf.Duration{}, Policy: rec,
			Placer: policytest.FirstFree{}, Round: 60, OnEvents: true}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, j := range run.Jobs {
			m := rec.memos[j.ID]
			if int(m[chronusClass]) != chronusAdmitted && !(int(m[chronusClass]) == chronusLost && m[chronusSolved] > 0) {
				refused++
				continue
			}
			admitted++
			if j.Finish < 0 || j.Finish > j.Deadline+1e-6 {
				t.Errorf("seed %d: admitted job %s finished at %v, deadline %v", seed, j.ID, j.Finish, j.Deadline)
			}
		}
		if admitted == 0 {
			t.Errorf("seed %d: no job admitted", seed)
		}
	}
	if refused == 0 {
		t.Error("no job was ever refused: the workloads do not test admission")
	}
}

// TestChronusDecline: with decline=true the job admission refuses (the
// "unadmitted job waits" case of TestChronusPlans) is declined and not
// planned; without, it is kept.
func TestChronusDecline(t *testing.T) {
	solvertest.Require(t)
	jobs := []policytest.JobState{slo("a", 0, 2, 120, 1200), slo("b", 1, 2, 120, 1200), slo("c", 2, 4, 240, 1200)}
	for _, tc := range []struct {
		spec string
		want []string
	}{{"chronus:margin=1:overhead=0:decline=true", []string{"c"}}, {"chronus:margin=1:overhead=0", nil}} {
		plan := fam.Parse(t, tc.spec, contract.Context{}).Schedule(policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), jobs...))
		if !slices.Equal(plan.Decline, tc.want) {
			t.Errorf("%s: declined %v, want %v", tc.spec, plan.Decline, tc.want)
		}
		for _, a := range plan.Run {
			if slices.Contains(plan.Decline, a.Job) {
				t.Errorf("%s: declined job %s is planned", tc.spec, a.Job)
			}
		}
	}
}

func failingMILP([]leaseJob, []int, leaseNowWeight, float64) (*leasePlan, error) {
	return nil, errors.New("forced failure")
}

// TestChronusFallbackReported: with its MILP forced to fail Chronus packs
// admitted jobs greedily, and the run's report says so.
func TestChronusFallbackReported(t *testing.T) {
	solvertest.Require(t)
	fam.Fallbacks(t, []policytest.FallbackCase{
		{Spec: "chronus", Force: func(p engine.Policy) { p.(*Chronus).milp = failingMILP }, Want: "lease MILP failed, admitted jobs packed greedily"},
	})
}
