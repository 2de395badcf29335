package gavel

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver/solvertest"
)

// problem builds an allocation problem: one GPU of each type in caps (the
// counts), throughputs tput[m][k], remaining work rem[m] and ages age[m].
// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

func problem(caps []float64, tput [][]float64, rem, age []float64) *gavelProblem {
	p := &gavelProblem{cap: caps, tput: tput, rem: rem, age: age}
	for k := range caps {
		p.types = append(p.types, string(rune('a'+k)))
	}
	for m := range tput {
		j := &job.Job{ID: string(rune('p' + m)), GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 1, Unit: job.Seconds}
		p.jobs = append(p.jobs, &engine.Status{Job: j})
		p.gpus = append(p.gpus, 1)
	}
	if p.rem == nil {
		p.rem = make([]float64, len(tput))
	}
	if p.age == nil {
		p.age = make([]float64, len(tput))
	}
	return p
}

func wantX(t *testing.T, got, want [][]float64) {
	t.Helper()
	for m := range want {
		for k := range want[m] {
			if math.Abs(got[m][k]-want[m][k]) > 1e-6 {
				t.Fatalf("X = %v, want %v", got, want)
			}
		}
	}
}

// The optima below are worked by hand in the comments.
func TestGavelAllocations(t *testing.T) {
	solvertest.Require(t)

	// Types a and b, one GPU each. Job p runs at 2 on a and 1 on b; job q at
	// 1 on both. Equal shares: each job half of each type, so p's isolated
	// throughput is 1.5 and q's 1. q can never exceed 1 (its shares sum to at
	// most 1), so max-min is 1; with q on b, p on a reaches 2/1.5 > 1, and
	// the secondary objective gives it all of a.
	t.Run("max-min", func(t *testing.T) {
		x, err := gavelMaxMin{}.allocate(problem([]float64{1, 1}, [][]float64{{2, 1}, {1, 1}}, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{1, 0}, {0, 1}})
	})

	// One GPU, three jobs at rate 1 with 100, 200 and 300 left: all finish
	// together at 600 s only with shares 1/6, 2/6, 3/6 (the GPU is never
	// idle and no job finishes earlier than the last).
	t.Run("makespan", func(t *testing.T) {
		x, err := gavelMakespan{}.allocate(problem([]float64{1}, [][]float64{{1}, {1}, {1}}, []float64{100, 200, 300}, nil))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{1.0 / 6}, {2.0 / 6}, {3.0 / 6}})
	})

	// p runs at 4 on a and 1 on b, q at 1 on a and 2 on b; 100 left each,
	// age 0. Isolated throughputs 2.5 and 1.5, so rho_p = 40/thr_p and
	// rho_q = 66.7/thr_q... precisely rho = (100/thr) / (100/iso). q's
	// throughput is at most 2 (all of b), so rho_q >= 0.75, reached with q
	// on b; p on a then has rho_p = 0.625.
	t.Run("finish-time fairness", func(t *testing.T) {
		p := problem([]float64{1, 1}, [][]float64{{4, 1}, {1, 2}}, []float64{100, 100}, []float64{0, 0})
		x, err := gavelFTF{}.allocate(p)
		if err != nil {
			t.Fatal(err)
		}
		thrQ := x[1][0]*1 + x[1][1]*2
		if rho := (100 / thrQ) / (100 / 1.5); math.Abs(rho-0.75) > 0.75*2*ftfTolerance {
			t.Fatalf("rho of q = %v, want 0.75 (X = %v)", rho, x)
		}
		wantX(t, x, [][]float64{{1, 0}, {0, 1}})
	})

	// Same jobs: each on its best type counts 1 + 1 = 2, the most possible.
	t.Run("max throughput", func(t *testing.T) {
		x, err := gavelMaxThroughput{}.allocate(problem([]float64{1, 1}, [][]float64{{4, 1}, {1, 2}}, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{1, 0}, {0, 1}})
	})

	// Capacity and share constraints hold on a larger random-looking case.
	t.Run("feasible", func(t *testing.T) {
		var tput [][]float64
		var rem []float64
		for m := range 12 {
			tput = append(tput, []float64{float64(1 + m%3), float64(1 + (m*7)%5), 0.5})
			rem = append(rem, float64(100*(m+1)))
		}
		for name, a := range map[string]gavelAllocator{"las": gavelMaxMin{}, "makespan": gavelMakespan{}, "ftf": gavelFTF{}, "throughput": gavelMaxThroughput{}} {
			p := problem([]float64{3, 2, 4}, tput, rem, rem)
			x, err := a.allocate(p)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			perType := make([]float64, 3)
			for m := range x {
				sum := 0.0
				for k, v := range x[m] {
					if v < -1e-9 {
						t.Errorf("%s: X[%d][%d] = %v < 0", name, m, k, v)
					}
					sum += v
					perType[k] += v
				}
				if sum > 1+1e-6 {
					t.Errorf("%s: job %d gets %v of the time", name, m, sum)
				}
			}
			for k, n := range perType {
				if n > p.cap[k]+1e-6 {
					t.Errorf("%s: type %d committed %v of %v GPUs", name, k, n, p.cap[k])
				}
			}
		}
	})
}

func TestFIFOAllocations(t *testing.T) {
	// Types a (fast) and b, one GPU each; three jobs faster on a.
	p := problem([]float64{1, 1}, [][]float64{{3, 1}, {2, 1}, {2, 1}}, nil, nil)
	x, _ := fifoPerf{}.allocate(p)
	// In arrival order: p takes a, q takes b (the best with room), r waits.
	wantX(t, x, [][]float64{{1, 0}, {0, 1}, {0, 0}})

	// Gavel's pick: types a, b, c with one GPU each and four jobs. The
	// first job gets c, the last listed type, whatever is drawn; c fills and
	// the drawn type is unlisted. When that was a or b, c stays listed and
	// the next job, which fits only on the remaining free type, is put on c
	// all the same: c is over-committed.
	overcommitted := false
	for seed := range uint64(20) {
		f := newGavelFIFO(true, seed)
		x, _ = f.allocate(problem([]float64{1, 1, 1}, [][]float64{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, nil, nil))
		if x[0][2] != 1 {
			t.Fatalf("gavel pick, seed %d: X = %v: want the first job on c", seed, x)
		}
		onC := 0.0
		for m := range x {
			onC += x[m][2]
		}
		overcommitted = overcommitted || onC > 1
	}
	if !overcommitted {
		t.Error("gavel pick never over-commits the last type in 20 seeds")
	}
	// A job that leaves hands its type to the head of the queue.
	f2 := newGavelFIFO(false, 1)
	x, _ = f2.allocate(problem([]float64{1}, [][]float64{{1}, {1}}, nil, nil))
	wantX(t, x, [][]float64{{1}, {0}})
	p3 := problem([]float64{1}, [][]float64{{1}, {1}}, nil, nil)
	p3.jobs = p3.jobs[1:] // p finished; q is first in line
	p3.tput, p3.gpus, p3.rem, p3.age = p3.tput[1:], p3.gpus[1:], p3.rem[1:], p3.age[1:]
	x, _ = f2.allocate(p3)
	wantX(t, x, [][]float64{{1}})

	// Gavel hands a departed job's type over on the free count at that
	// point of its walk in arrival order. Type a (one GPU) is held by p
	// (first to arrive, still here) and by "gone" (arrived second, over-
	// committed, now left); q waits. Walking p leaves a no free GPU, so
	// gone's GPU is not q's; q goes to b, the only listed type.
	f3 := newGavelFIFO(true, 0)
	f3.types["p"], f3.types["gone"] = 0, 0
	f3.seq["p"], f3.seq["gone"], f3.nextQ = 0, 1, 2
	x, _ = f3.allocate(problem([]float64{1, 1}, [][]float64{{1, 1}, {1, 1}}, nil, nil))
	wantX(t, x, [][]float64{{1, 0}, {0, 1}})
}

// runGavel replays jobs on c with Gavel's rounds (360 s, no scheduling at
// events) and returns the records by job ID.
func runGavel(t *testing.T, spec string, c string, m perf.Model, jobs ...*job.Job) map[string]report.JobRecord {
	t.Helper()
	return fam.Records(t, spec, c, m, 360, false, jobs...)
}

func TestGavelRounds(t *testing.T) {
	solvertest.Require(t)
	d := perf.Duration{}
	a := enginetest.Job("a").Seconds(1800).Obj()
	b := enginetest.Job("b").Seconds(1800).Obj()

	// One GPU, two equal jobs, the first round at 360 s: max-min gives
	// each half, and the priority rule (allocation / share received)
	// alternates them round by round; both finish near 360 + 3600 s. FIFO
	// runs a to the end first.
	las := runGavel(t, "gavel-las", "1x1:v100", d, a, b)
	if las["a"].Finish < 3960-360 || las["b"].Finish < 3960-360 {
		t.Errorf("LAS: a ends at %v, b at %v; want both near 3960 s (time-shared)", las["a"].Finish, las["b"].Finish)
	}
	if las["a"].Preemptions+las["b"].Preemptions < 4 {
		t.Errorf("LAS: the jobs did not take turns (preemptions a %d, b %d)", las["a"].Preemptions, las["b"].Preemptions)
	}
	fifo := runGavel(t, "fifo-perf", "1x1:v100", d, a, b)
	if fifo["a"].Finish != 2160 || fifo["b"].Finish != 3960 {
		t.Errorf("fifo-perf: a ends at %v, b at %v; want 2160 and 3960", fifo["a"].Finish, fifo["b"].Finish)
	}

	// The allocation is recomputed at most every reset seconds (Gavel's
	// 1920): c, arriving at 400 on a cluster with a free GPU, waits for the
	// first round 1920 s after the recomputation at 360 that admitted a and
	// b: 2520.
	long := enginetest.Job("a").Seconds(20000).Obj()
	b2 := enginetest.Job("b").At(100).Seconds(20000).Obj()
	c := enginetest.Job("c").At(400).Seconds(100).Obj()
	for _, x := range []struct {
		spec  string
		start float64
	}{{"fifo-perf", 2520}, {"fifo-perf:reset=0", 720}} {
		got := runGavel(t, x.spec, "3x1:v100", d, long, b2, c)
		if got["c"].Start != x.start {
			t.Errorf("%s: c starts at %v, want %v", x.spec, got["c"].Start, x.start)
		}
	}

	// Heterogeneity: fast runs jobs twice as fast as slow. fifo-perf puts
	// a on fast and b on slow, and moves b to fast when a leaves.
	sp := perf.SpeedFactors{Base: d, Speed: map[string]float64{"fast": 2, "slow": 1}}
	a3 := enginetest.Job("a").Seconds(1440).Obj() // 720 s on fast
	b3 := enginetest.Job("b").Seconds(7200).Obj()
	got := runGavel(t, "fifo-perf:reset=0", "1x1:fast,1x1:slow", sp, a3, b3)
	// Both start at 360; a ends at 1080. b: 720 s on slow (720 s of work),
	// then fast from the round at 1080: 6480 s of work at 2 = 3240 s,
	// ending at 4320.
	if got["a"].Finish != 1080 || got["b"].Finish != 4320 {
		t.Errorf("fifo-perf on fast+slow: a ends at %v, b at %v; want 1080 and 4320", got["a"].Finish, got["b"].Finish)
	}
	agn := runGavel(t, "gavel-las:agnostic=true", "1x1:fast,1x1:slow", sp, a3, b3)
	aware := runGavel(t, "gavel-las", "1x1:fast,1x1:slow", sp, a3, b3)
	if aware["a"].Finish+aware["b"].Finish > agn["a"].Finish+agn["b"].Finish {
		t.Errorf("heterogeneity-aware LAS (%v + %v) slower than agnostic (%v + %v)",
			aware["a"].Finish, aware["b"].Finish, agn["a"].Finish, agn["b"].Finish)
	}
}

func TestGavelKnobs(t *testing.T) {
	solvertest.Require(t)
	for _, bad := range []string{"gavel-las:round=0", "gavel-las:reset=-1", "gavel-las:seed=1.5", "gavel-fifo:pick=first", "fifo-perf:agnostic=true", "gavel-las:bogus=1",
		"gavel-las:classes=-0.1", "gavel-ftf:classes=2", "fifo-perf:classes=0.05"} {
		if _, err := fam(bad, contract.Context{}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for spec, name := range map[string]string{"gavel-las:classes=0": "gavel-las", "gavel-makespan:classes=0.05": "gavel-makespan:classes=0.05"} {
		if got := fam.Parse(t, spec, contract.Context{}).Name(); got != name {
			t.Errorf("%s: Name() = %q, want %q", spec, got, name)
		}
	}
}

// Property: on random problems every allocation is feasible and at least
// as good, by its own objective, as equal shares (which are feasible).
func TestGavelAllocationsBeatEqualShares(t *testing.T) {
	solvertest.Require(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 25 {
		K, n := 1+rng.IntN(4), 1+rng.IntN(30)
		caps := make([]float64, K)
		for k := range caps {
			caps[k] = float64(1 + rng.IntN(8))
		}
		tput := make([][]float64, n)
		rem, age := make([]float64, n), make([]float64, n)
		for m := range tput {
			tput[m] = make([]float64, K)
			for k := range tput[m] {
				tput[m][k] = 0.5 + rng.Float64()*10
			}
			rem[m], age[m] = 100+rng.Float64()*1e5, rng.Float64()*1e4
		}
		p := problem(caps, tput, rem, age)
		eq := equalShares(p)
		thr := func(x [][]float64, m int) float64 {
			s := 0.0
			for k := range x[m] {
				s += x[m][k] * p.tput[m][k]
			}
			return s
		}
		iso := isolated(p)
		for name, a := range map[string]gavelAllocator{"las": gavelMaxMin{}, "makespan": gavelMakespan{}, "ftf": gavelFTF{}, "throughput": gavelMaxThroughput{}} {
			x, err := a.allocate(p)
			if err != nil {
				t.Fatalf("trial %d %s: %v", trial, name, err)
			}
			perType := make([]float64, K)
			for m := range x {
				sum := 0.0
				for k, v := range x[m] {
					sum += v
					perType[k] += v * p.gpus[m]
				}
				if sum > 1+1e-6 {
					t.Fatalf("trial %d %s: job %d gets %v of the time", trial, name, m, sum)
				}
			}
			for k := range perType {
				if perType[k] > caps[k]+1e-6 {
					t.Fatalf("trial %d %s: type %d committed %v of %v", trial, name, k, perType[k], caps[k])
				}
			}
			var got, base float64 // objective to maximise: got must reach base
			switch name {
			case "las": // smallest normalised throughput
				got, base = math.Inf(1), math.Inf(1)
				for m := range x {
					got, base = math.Min(got, thr(x, m)/iso[m]), math.Min(base, thr(eq, m)/iso[m])
				}
			case "makespan": // minus the makespan
				for m := range x {
					got, base = math.Min(got, -rem[m]/thr(x, m)), math.Min(base, -rem[m]/thr(eq, m))
				}
			case "ftf": // minus the largest rho
				for m := range x {
					d := age[m] + rem[m]/iso[m]
					got = math.Min(got, -(age[m]+rem[m]/thr(x, m))/d)
					base = math.Min(base, -(age[m]+rem[m]/thr(eq, m))/d)
				}
			case "throughput":
				for m := range x {
					best := slices.Max(p.tput[m])
					got, base = got+thr(x, m)/best, base+thr(eq, m)/best
				}
			}
			if got < base-1e-3*math.Abs(base) {
				t.Errorf("trial %d %s: objective %v, worse than equal shares' %v", trial, name, got, base)
			}
		}
	}
}

// A simulation under a Gavel policy is a pure function of its inputs: the
// policy's state between rounds must not depend on map order.
func TestGavelDeterministic(t *testing.T) {
	solvertest.Require(t)
	sp := perf.SpeedFactors{Base: perf.Duration{}, Speed: map[string]float64{"v100": 1, "p100": 0.6, "k80": 0.3}}
	var jobs []*job.Job
	for i := range 30 {
		jobs = append(jobs, enginetest.Job(string(rune('A'+i))).At(float64(i*200)).GPUs(1+i%3).Seconds(float64(1000+(i*7919)%9000)).Obj())
	}
	for _, spec := range []string{"gavel-las", "gavel-ftf", "gavel-fifo", "gavel-fifo:pick=gavel", "fifo-perf"} {
		a := runGavel(t, spec, "2x2:v100,2x2:p100,2x2:k80", sp, jobs...)
		b := runGavel(t, spec, "2x2:v100,2x2:p100,2x2:k80", sp, jobs...)
		for id, ra := range a {
			if rb := b[id]; ra.Finish != rb.Finish || ra.Preemptions != rb.Preemptions {
				t.Errorf("%s: job %s ends at %v then %v", spec, id, ra.Finish, rb.Finish)
			}
		}
	}
}

// Between its rounds a Gavel policy keeps its plan, even when the engine
// asks more often: with engine rounds every 60 s and at every event, b,
// arriving at 100 s while a runs, starts at the policy's next round, 360 s.
// On an idle cluster a job starts at once.
func TestGavelKeepsPlanBetweenRounds(t *testing.T) {
	pl, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*job.Job{
		enginetest.Job("a").Seconds(1000).Obj(),
		enginetest.Job("b").At(100).Seconds(100).Obj(),
	}
	r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("2x1:v100"), Model: perf.Duration{},
		Policy: fam.Parse(t, "fifo-perf:reset=0", contract.Context{}), Placer: pl, Round: 60, OnEvents: true}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.Jobs[0], r.Jobs[1]; a.Start != 0 || b.Start != 360 {
		t.Errorf("a starts at %v (want 0, idle cluster), b at %v (want 360, the next round)", a.Start, b.Start)
	}
}

// Without GLPK the LP policies refuse to start, saying what to install; the
// FIFO ones, which solve nothing, still work. Checked in a child process
// with TIDE_GLPK_LIB pointing nowhere.
func TestGavelWithoutGLPK(t *testing.T) {
	if os.Getenv("TIDE_POLICY_CHILD") == "1" {
		for _, spec := range []string{"gavel-las", "gavel-makespan", "gavel-ftf", "gavel-throughput"} {
			_, err := fam(spec, contract.Context{})
			if err == nil || !strings.Contains(err.Error(), "apt-get install libglpk40") {
				t.Errorf("%s without GLPK: %v", spec, err)
			}
		}
		for _, spec := range []string{"fifo-perf", "gavel-fifo"} {
			if _, err := fam(spec, contract.Context{}); err != nil {
				t.Errorf("%s without GLPK: %v", spec, err)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGavelWithoutGLPK$", "-test.v")
	cmd.Env = append(os.Environ(), "TIDE_POLICY_CHILD=1", "TIDE_GLPK_LIB=/nonexistent/libglpk.so.40")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestGavelClusterTypesChange: a Gavel policy planning on a cluster of
// other GPU types than its earlier rounds' gives the new types out. It
// read the types once, at its first round, and tide kube keeps the policy
// when it rebuilds its engine on the nodes there are now: a job arriving
// once only V100 nodes were left got "allocation 0" on four idle V100s for
// ever (random operations in kube, seed 133 under gavel-fifo).
func TestGavelClusterTypesChange(t *testing.T) {
	for _, spec := range []string{"gavel-fifo", "fifo-perf"} {
		t.Run(spec, func(t *testing.T) {
			p := fam.Parse(t, spec, contract.Context{})
			p.Schedule(policytest.Snap(t, 0, enginetest.Cluster("1x2:a100"), policytest.Hold("a", 0, 1, 100)))
			plan := p.Schedule(policytest.Snap(t, 10, enginetest.Cluster("1x4:v100"), policytest.Wait("b", 5, 1, 100)))
			if len(plan.Run) != 1 || plan.Run[0].Job != "b" || plan.Run[0].GPUType != "v100" {
				t.Errorf("plan %+v, want b on a v100", plan.Run)
			}
		})
	}
}

// TestGavelClusterShrinks: between re-plans a Gavel policy keeps its last
// plan, unless the cluster has fewer GPUs than when it made it: kept, the
// plan asked 4 A100s of the 2 left, the engine refused it, and tide kube's
// rounds failed until the next re-plan (random operations in kube, seeds
// 1015, 1021 and others under gavel-fifo and fifo-perf).
func TestGavelClusterShrinks(t *testing.T) {
	for _, spec := range []string{"gavel-fifo", "fifo-perf"} {
		t.Run(spec, func(t *testing.T) {
			p := fam.Parse(t, spec, contract.Context{})
			p.Schedule(policytest.Snap(t, 0, enginetest.Cluster("1x4:a100"), policytest.Wait("a", 0, 2, 1000), policytest.Wait("b", 0, 2, 1000)))
			plan := p.Schedule(policytest.Snap(t, 10, enginetest.Cluster("1x2:a100"), policytest.Hold("a", 0, 2, 1000), policytest.Wait("b", 0, 2, 1000)))
			n := 0
			for _, a := range plan.Run {
				n += a.GPUs
			}
			if n > 2 {
				t.Errorf("plan %+v asks %d GPUs of 2", plan.Run, n)
			}
		})
	}
}
