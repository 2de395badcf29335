package gavel

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/solver/solvertest"
)

// withPair adds to p the pair of its jobs 0 and 1 packed at r0 and r1 on
// every type.
func withPair(p *gavelProblem, r0, r1 float64) *gavelProblem {
	pr := gavelPair{a: 0, b: 1, key: alloc.PairKey(p.jobs[0].Job.ID, p.jobs[1].Job.ID)}
	for range p.types {
		pr.tput = append(pr.tput, [2]float64{r0, r1})
	}
	p.pairs = append(p.pairs, pr)
	return p
}

// The optima below are worked by hand in the comments. X has a row per job,
// then a row per pair.
func TestGavelPackingAllocations(t *testing.T) {
	solvertest.Require(t)

	// One GPU, p and q at 1 alone, 0.8 each packed. Equal shares give each
	// 0.5. Symmetric x for both alone and y packed: 2x + y <= 1, each gets
	// x + 0.8y = 0.8 - 0.6x at y = 1 - 2x, largest at x = 0: they always
	// share, each at 0.8 (1.6 of its equal share).
	t.Run("symmetric pair", func(t *testing.T) {
		x, err := gavelMaxMin{}.allocate(withPair(problem([]float64{1}, [][]float64{{1}, {1}}, nil, nil), 0.8, 0.8))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{0}, {0}, {1}})
	})

	// Packed, p keeps 0.9 and q only 0.3. Time alone for p is worth less to
	// the bottleneck than time packed, so x_p = 0 and x_q = 1 - y; p gets
	// 0.9y, q 1 - 0.7y, equal at y = 1/1.6 = 0.625, both at 0.5625 (more
	// than the 0.5 of time-sharing). The dual weights (7/16 on p, 9/16 on
	// q) price x_p at 0.4375 < 0.5625: it stays 0.
	t.Run("lopsided pair", func(t *testing.T) {
		x, err := gavelMaxMin{}.allocate(withPair(problem([]float64{1}, [][]float64{{1}, {1}}, nil, nil), 0.9, 0.3))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{0}, {0.375}, {0.625}})
	})

	// Max throughput (each job relative to its best, 1): packed the pair is
	// worth 0.8 + 0.8 = 1.6 per GPU-second against 1 alone, so y = 1.
	t.Run("throughput", func(t *testing.T) {
		x, err := gavelMaxThroughput{}.allocate(withPair(problem([]float64{1}, [][]float64{{1}, {1}}, nil, nil), 0.8, 0.8))
		if err != nil {
			t.Fatal(err)
		}
		wantX(t, x, [][]float64{{0}, {0}, {1}})
	})

	// Makespan: 100 and 200 s of work left at rate 1 on one GPU. Alone
	// (no pair) both finish by 300 s at best. Packed at 0.8 each: q needs
	// 200/0.8 = 250 s packed, p is done after 125 s; with y the time
	// packed and x_q the time q runs alone, the LP keeps constant rates:
	// p: 0.8y + x_p >= 100/T, q: 0.8y + x_q >= 200/T, x_p + x_q + y <= 1.
	// Take x_p = 0: y = 1.25 * 100/T needs y <= 1 and x_q = 200/T - 100/T,
	// so 1.25*100/T + 100/T <= 1: T = 225 s (y = 5/9, x_q = 4/9).
	t.Run("makespan", func(t *testing.T) {
		x, err := gavelMakespan{}.allocate(withPair(problem([]float64{1}, [][]float64{{1}, {1}}, []float64{100, 200}, nil), 0.8, 0.8))
		if err != nil {
			t.Fatal(err)
		}
		// Unique: with x_q and x_p at their least, the GPU's time is
		// 8/9 + 0.2y + max(0, 4/9 - 0.8y) <= 1 only at y = 5/9.
		wantX(t, x, [][]float64{{0}, {4.0 / 9}, {5.0 / 9}})
	})
}

// TestGavelSpaceSharingRuns, worked by hand: A (1,000 it) and B (400 it)
// on one V100, Gavel's first round at 360 s. The LP packs them (each gets
// 1.2 of its equal share), so B finishes at 360 + 400/3 = 493.3 s; A has
// done 800 it and runs its last 200 alone at 10 it/s, done at 513.3 s (the
// simulator rerates it when B leaves). Without space sharing, and on an
// executor that cannot pack (the fallback), they take turns: the last
// finishes only at 360 + 100 + 80 = 540 s or later.
func TestGavelSpaceSharingRuns(t *testing.T) {
	solvertest.Require(t)
	g, err := table.ParseGavel("pairs.json", []byte(policytest.PairTable))
	if err != nil {
		t.Fatal(err)
	}
	a, b := policytest.PairJob("a", "A", 1000), policytest.PairJob("b", "B", 400)
	got := runGavel(t, "gavel-las:space_sharing=true", "1x1:v100", g, a, b)
	if math.Abs(got["b"].Finish-(360+400.0/3)) > 1e-6 || math.Abs(got["a"].Finish-(360+400.0/3+20)) > 1e-6 {
		t.Errorf("packed: a ends at %v, b at %v; want %v and %v", got["a"].Finish, got["b"].Finish, 360+400.0/3+20, 360+400.0/3)
	}
	if got["a"].GPUSeconds+got["b"].GPUSeconds > got["a"].Finish-360+1e-6 {
		t.Errorf("packed: the jobs hold %v GPU-s in %v s on one GPU", got["a"].GPUSeconds+got["b"].GPUSeconds, got["a"].Finish-360)
	}
	for _, c := range []struct {
		spec string
		m    perf.Model
	}{{"gavel-las", g}, {"gavel-las:space_sharing=true", policytest.NotSharer{Model: g}}} {
		got := runGavel(t, c.spec, "1x1:v100", c.m, a, b)
		if last := max(got["a"].Finish, got["b"].Finish); last < 540-1e-6 {
			t.Errorf("%s on %s: last job ends at %v, want >= 540 (no packing)", c.spec, c.m.Name(), last)
		}
	}
	// A and C lose by packing: the LP never pairs them, so they never
	// share even with space sharing on.
	cJob := policytest.PairJob("c", "C", 400)
	got = runGavel(t, "gavel-las:space_sharing=true", "1x1:v100", g, a, cJob)
	if total := got["a"].GPUSeconds + got["c"].GPUSeconds; math.Abs(total-(100+50)) > 1e-6 {
		t.Errorf("A and C: %v GPU-s held, want 150 (each alone: 100 + 50 s)", total)
	}
}

func TestGavelSpaceSharingKnob(t *testing.T) {
	solvertest.Require(t)
	if _, err := fam("gavel-las:space_sharing=true:agnostic=true", contract.Context{}); err == nil {
		t.Error("space sharing with agnostic=true accepted")
	}
	if _, err := fam("fifo-perf:space_sharing=true", contract.Context{}); err == nil {
		t.Error("fifo-perf accepted space_sharing, which it does not do")
	}
	for _, spec := range []string{"gavel-las", "gavel-makespan", "gavel-ftf", "gavel-throughput"} {
		p, err := fam(spec+":space_sharing=true", contract.Context{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != spec+":space_sharing=true" {
			t.Errorf("name %q", p.Name())
		}
	}
}
