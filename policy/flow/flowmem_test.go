package flow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/sim"
)

// randomSpareJobs builds n jobs for spare: power-of-two levels with rates
// that grow, now at one of them or 0, some on the edge or with no levels,
// deadlines or none, and copies of earlier jobs (equal gains, so the
// tie-break decides). rem is sometimes +Inf, whose gain is NaN under
// spare=time (never chosen).
func randomSpareJobs(rng *rand.Rand, n int) []*fjob {
	js := make([]*fjob, 0, n)
	for len(js) < n {
		if len(js) > 0 && rng.IntN(5) == 0 {
			c := *js[rng.IntN(len(js))]
			c.levels, c.rates = append([]int(nil), c.levels...), append([]float64(nil), c.rates...)
			js = append(js, &c)
			continue
		}
		j := &fjob{edge: -1, deadline: math.Inf(1), rem: float64(1 + rng.IntN(5000))}
		if rng.IntN(2) == 0 {
			j.deadline = float64(rng.IntN(10000))
		}
		if rng.IntN(10) == 0 {
			j.edge = rng.IntN(3)
		}
		if rng.IntN(25) == 0 {
			j.rem = math.Inf(1)
		}
		r := 0.0
		for g := 1 << rng.IntN(2); g <= 64 && rng.IntN(6) > 0; g *= 2 {
			r += 0.1 + rng.Float64()*float64(rng.IntN(3)) // sometimes the same step: equal gains
			j.levels = append(j.levels, g)
			j.rates = append(j.rates, r)
		}
		if len(j.levels) > 0 && rng.IntN(2) == 0 {
			j.now = j.levels[rng.IntN(len(j.levels))]
		}
		js = append(js, j)
	}
	return js
}

// TestSpareHeapMatchesScan: spare's heap (spareHeap) gives every job the
// GPUs the scan it replaced (spareByScan, every job scanned for each step)
// gives it, and leaves the same GPUs, on random jobs under both spare
// rules, with ties, jobs whose steps stop fitting, jobs on the edge and
// gains that are NaN.
func TestSpareHeapMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 4))
	for trial := range 3000 {
		n := 1 + rng.IntN(40)
		if trial%100 == 0 {
			n = 500
		}
		js := randomSpareJobs(rng, n)
		free := rng.IntN(4 * n)
		for _, rule := range []string{"time", "gputime"} {
			var left [2]int
			var got [2][]int
			for k, scan := range []bool{true, false} {
				f := &Flow{Spare: rule, spareScan: scan}
				cp := make([]*fjob, len(js))
				for i, j := range js {
					c := *j
					cp[i] = &c
				}
				left[k] = f.spare(free, cp)
				for _, j := range cp {
					got[k] = append(got[k], j.now)
				}
			}
			if left[0] != left[1] || fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
				t.Fatalf("trial %d spare=%s free %d: scan leaves %d, %v; heap leaves %d, %v", trial, rule, free, left[0], got[0], left[1], got[1])
			}
		}
	}
}

// TestFlowSpareHeapMatchesScanRuns: whole runs of ElasticFlow and EdgeFlow
// with spare's heap decide as with the scan it replaced: the same per-job
// records and timeline, bit for bit, on the random loads of
// TestFlowPrefixMatchesFullPasses.
func TestFlowSpareHeapMatchesScanRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 5))
	policies := map[string]func() (*Flow, error){
		"elasticflow": func() (*Flow, error) { return NewElasticFlow(DefaultFlow) },
		"elasticflow:spare=gputime": func() (*Flow, error) {
			k := DefaultFlow
			k.Spare = "gputime"
			return NewElasticFlow(k)
		},
		"edgeflow": func() (*Flow, error) { return NewEdgeFlow(DefaultEdge) },
	}
	for seed := range 4 {
		jobs := randomFlowJobs(rng)
		c := flowCluster(t, 2, 3)
		for name, mk := range policies {
			var got [2]string
			for k, scan := range []bool{false, true} {
				f, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				f.spareScan = scan
				r, err := sim.Run(sim.Config{Cluster: c, Model: slowEdge(), Policy: f, Placer: place.Pack{}, OnEvents: true, Sites: &sim.Sites{}}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				got[k] = fmt.Sprintf("%+v\n%+v", r.Jobs, r.Timeline)
			}
			if got[0] != got[1] {
				t.Errorf("seed %d %s: the runs differ:\nheap %s\nscan %s", seed, name, got[0], got[1])
			}
		}
	}
}

// TestAppendTermsMatchesSprintf: the reasons' terms, written without fmt
// so that a steady round allocates nothing, read as the fmt.Sprintf
// formats they replaced write them, for figures that round either way,
// negative zero, infinities and counts below zero.
func TestAppendTermsMatchesSprintf(t *testing.T) {
	figures := []float64{0, math.Copysign(0, -1), 0.5, 1.5, 2.5, -0.5, 1e9 + 0.4999, 123456.789, 1e21, math.Inf(1), math.Inf(-1)}
	rng := rand.New(rand.NewPCG(19, 6))
	for range 50 {
		figures = append(figures, rng.Float64()*1e7, -rng.Float64()*100)
	}
	for _, deadline := range append(figures, math.Inf(1)) {
		for _, end := range figures {
			for _, share := range []int{0, 1, 8} {
				for _, free := range []int{-3, 0, 5, 1024} {
					j := &fjob{st: &engine.Status{Job: &job.Job{}}, deadline: deadline, end: end, share: share}
					var want string
					switch {
					case math.IsInf(deadline, 1):
						want = fmt.Sprintf("no deadline: best effort on what deadline jobs leave (%d cloud GPUs)", max(free, 0))
					case share == 0:
						want = fmt.Sprintf("deadline t=%.0f s: no share of the GPUs free before it meets it (predicted end t=%.0f s)", deadline, end)
					default:
						want = fmt.Sprintf("deadline t=%.0f s: needs a share of %d GPUs, %d left free before it by the admitted jobs", deadline, share, max(free, 0))
					}
					if got := string(appendTerms([]byte("x; "), j, free)); got != "x; "+want {
						t.Fatalf("deadline %v end %v share %d free %d: %q, want %q", deadline, end, share, free, got, "x; "+want)
					}
				}
			}
		}
	}
}

// testClock is an engine clock the test sets.
type testClock struct{ t float64 }

func (c *testClock) Now() float64 { return c.t }

// countingPolicy counts the heap allocations of its policy's last
// Schedule (runtime.MemStats, read outside it).
type countingPolicy struct {
	p      engine.Policy
	allocs uint64
	ms     runtime.MemStats
}

func (c *countingPolicy) Name() string { return c.p.Name() }
func (c *countingPolicy) Schedule(s *engine.Snapshot) engine.Plan {
	runtime.ReadMemStats(&c.ms)
	before := c.ms.Mallocs
	plan := c.p.Schedule(s)
	runtime.ReadMemStats(&c.ms)
	c.allocs = c.ms.Mallocs - before
	return plan
}

// TestEdgeFlowSteadyRoundWithEdgeAllocatesNothing: EdgeFlow's steady
// round allocates nothing with jobs on edge servers too (offloading,
// edgeEnd and the edge assignments; TestSteadyRoundAllocations' cluster
// has no edge). One cloud node of 8 GPUs runs a and b; c meets its
// deadline only on an edge server (TestEdgeFlowOffloads); d and e, with
// no deadline and deadlines no share meets, wait or are declined.
func TestEdgeFlowSteadyRoundWithEdgeAllocatesNothing(t *testing.T) {
	f, err := NewEdgeFlow(DefaultEdge)
	if err != nil {
		t.Fatal(err)
	}
	cp := &countingPolicy{p: f}
	clk := &testClock{}
	c := flowCluster(t, 1, 2)
	e, err := engine.New(engine.Config{Cluster: c, Model: slowEdge(), Policy: cp, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*job.Job{flowJob("a", 0, 1200, 300), flowJob("b", 0, 1200, 300), flowJob("c", 0, 100, 310),
		flowJob("d", 0, 5000, 0), flowJob("e", 0, 1e6, 400)} {
		if _, err := e.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < 3; r++ {
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		clk.t += 5
	}
	if st := e.Job("c"); len(st.GPUs) == 0 || c.NodeOf(st.GPUs[0]).SiteKind != cluster.SiteEdge {
		t.Fatalf("c is not on an edge server: %v", st.GPUs)
	}
	for r := 0; r < 3; r++ {
		clk.t++
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
	}
	if cp.allocs != 0 {
		t.Errorf("a steady round with a job on the edge allocates %d times", cp.allocs)
	}
}
