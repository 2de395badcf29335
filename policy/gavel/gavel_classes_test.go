package gavel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver/solvertest"
)

// classProblem is a random LP instance: n jobs of a few models (per-type
// speeds, 1 to 8 GPUs), each job's throughputs jittered by up to jitter
// (relative) and its progress random, on three GPU types.
func classProblem(rng *rand.Rand, n int, jitter float64) *gavelProblem {
	types := []string{"k80", "p100", "v100"}
	p := &gavelProblem{types: types, cap: []float64{48, 32, 24}}
	models := [][]float64{{1, 2.2, 3.5}, {1, 1.6, 2}, {0, 1, 2.8}, {1, 3, 6}}
	for m := range n {
		md := models[rng.IntN(len(models))]
		gpus := float64(int(1) << rng.IntN(4))
		t := make([]float64, len(types))
		for k, v := range md {
			if v > 0 {
				t[k] = v * (1 + jitter*(2*rng.Float64()-1))
			}
		}
		p.jobs = append(p.jobs, &engine.Status{Job: &job.Job{ID: fmt.Sprint("j", m), GPUs: int(gpus)}})
		p.tput = append(p.tput, t)
		p.gpus = append(p.gpus, gpus)
		p.rem = append(p.rem, 1000+float64(rng.IntN(20))*500)
		p.age = append(p.age, float64(rng.IntN(8))*600)
		p.prev = append(p.prev, nil)
	}
	return p
}

// classScore is the objective an allocator optimises, of allocation x for
// the per-job problem p: larger is better for every allocator (the
// smallest normalised throughput; minus the makespan; minus the largest
// rho; the sum of throughputs relative to each job's best type). ok is
// false when x breaks a per-job constraint (a job's shares above 1 or a
// type over-committed).
func classScore(a gavelAllocator, p *gavelProblem, x [][]float64) (score float64, ok bool) {
	used := make([]float64, len(p.types))
	for m := range p.jobs {
		sum := 0.0
		for k := range p.types {
			sum += x[m][k]
			used[k] += p.gpus[m] * x[m][k]
		}
		if sum > 1+1e-6 {
			return 0, false
		}
	}
	for k := range used {
		if used[k] > p.cap[k]*(1+1e-6) {
			return 0, false
		}
	}
	tput := func(m int) float64 {
		r := 0.0
		for k := range p.types {
			r += p.tput[m][k] * x[m][k]
		}
		return r
	}
	iso := isolated(p)
	switch a.(type) {
	case gavelMaxMin:
		score = math.Inf(1)
		for m := range p.jobs {
			score = math.Min(score, tput(m)/iso[m])
		}
	case gavelMakespan:
		for m := range p.jobs {
			score = math.Min(score, -p.rem[m]/tput(m))
		}
	case gavelFTF:
		for m := range p.jobs {
			rho := (p.age[m] + p.rem[m]/tput(m)) / (p.age[m] + p.rem[m]/iso[m])
			score = math.Min(score, -rho)
		}
	case gavelMaxThroughput:
		for m := range p.jobs {
			best := 0.0
			for _, r := range p.tput[m] {
				best = math.Max(best, r)
			}
			score += tput(m) / best
		}
	}
	return score, true
}

// TestGavelClassesQuality: the LP over classes (classes=0.05) gives an
// allocation that keeps every per-job constraint, with far fewer LP
// variables, and whose objective, measured on the per-job problem, is
// within 10% of the per-job LP's on random 160-job instances whose throughputs
// are jittered by up to 4%; with no jitter (jobs of a model identical) it
// is the per-job optimum (within the LP's and the bisection's precision).
func TestGavelClassesQuality(t *testing.T) {
	solvertest.Require(t)
	rng := rand.New(rand.NewPCG(19, 5))
	allocs := map[string]gavelAllocator{"las": gavelMaxMin{}, "makespan": gavelMakespan{}, "ftf": gavelFTF{}, "throughput": gavelMaxThroughput{}}
	for _, jitter := range []float64{0, 0.04} {
		for trial := range 2 {
			base := classProblem(rng, 160, jitter)
			for name, a := range allocs {
				xJob, err := a.allocate(base)
				if err != nil {
					t.Fatal(err)
				}
				want, ok := classScore(a, base, xJob)
				if !ok {
					t.Fatalf("%s: the per-job LP broke a constraint", name)
				}
				p := *base
				rem, age := gavelClassKeys(a)
				p.classify(0.05, rem, age)
				xClass, err := a.allocate(&p)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := classScore(a, base, xClass)
				if !ok {
					t.Errorf("jitter %v trial %d %s: the class allocation breaks a per-job constraint", jitter, trial, name)
					continue
				}
				tol := 0.10
				if jitter == 0 {
					tol = 2e-3 // the LP's precision, and ftf's bisection (1e-3)
				}
				// Scores are positive (las, throughput) or negative (makespan,
				// ftf): compare relatively, larger is better.
				if got < want-tol*math.Abs(want) {
					t.Errorf("jitter %v trial %d %s: %d classes for %d jobs, score %.5g, per-job LP %.5g (more than %.0f%% worse)",
						jitter, trial, name, p.classes, len(p.jobs), got, want, 100*tol)
				}
				t.Logf("jitter %v trial %d %-10s %3d classes: score %.5g, per-job %.5g (%.2f%%)", jitter, trial, name, p.classes, got, want, 100*(got-want)/math.Abs(want))
			}
		}
	}
}

// TestGavelClassesRun: each LP policy with classes runs a whole simulation
// on three GPU types (jobs of three shapes, several alike) with every
// solve succeeding and every job finishing, and its plans come from
// classes: the LP of its first solve has fewer allocation rows than jobs.
func TestGavelClassesRun(t *testing.T) {
	solvertest.Require(t)
	pl, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*job.Job
	for i := range 24 {
		jobs = append(jobs, enginetest.Job(fmt.Sprint("j", i)).At(float64(60*(i/4))).GPUs(1<<(i%3)).Seconds(float64(600+300*(i%2))).Obj())
	}
	for _, spec := range []string{"gavel-las:classes=0.05", "gavel-makespan:classes=0.05", "gavel-ftf:classes=0.05", "gavel-throughput:classes=0.05"} {
		g := fam.Parse(t, spec, contract.Context{}).(*Gavel)
		r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("2x4:v100,2x4:p100,2x4:k80"), Model: perf.Duration{},
			Policy: g, Placer: pl, Round: 60, OnEvents: true}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if g.Solves == 0 || g.Failures > 0 {
			t.Errorf("%s: %d solves, %d failed (%v)", spec, g.Solves, g.Failures, g.LastErr)
		}
		for _, j := range r.Jobs {
			if j.Finish < 0 {
				t.Errorf("%s: job %s did not finish", spec, j.ID)
			}
		}
	}
	// The classes themselves, at the first round: under the duration
	// model every job's throughput is the same on every type, so LAS's
	// classes are the GPU counts (1, 2, 4) and makespan's also split the
	// two lengths.
	var states []policytest.JobState
	for i := range 24 {
		states = append(states, policytest.Wait(fmt.Sprint("j", i), 0, 1<<(i%3), float64(600+300*(i%2))))
	}
	s := policytest.Snap(t, 0, enginetest.Cluster("2x4:v100,2x4:p100,2x4:k80"), states...)
	for spec, want := range map[string]int{"gavel-las:classes=0.05": 3, "gavel-makespan:classes=0.05": 6, "gavel-las": 0} {
		g := fam.Parse(t, spec, contract.Context{}).(*Gavel)
		g.types = []string{"k80", "p100", "v100"}
		if p := g.problem(s); p.classes != want {
			t.Errorf("%s: %d classes for 24 jobs, want %d (classes %v)", spec, p.classes, want, p.class)
		}
	}
}
