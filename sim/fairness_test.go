package sim_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// TestFairnessSamples: on 4 GPUs under FIFO, a (tenant x, 3 GPUs, 100 s)
// runs from 0; b (tenant y, 2 GPUs, 100 s) waits, the one free GPU too few
// for it: 1 fragmented GPU until a ends at 100, then b runs to 200.
func TestFairnessSamples(t *testing.T) {
	a := enginetest.Job("a").GPUs(3).Seconds(100).Tenant("x").Obj()
	b := enginetest.Job("b").GPUs(2).Seconds(100).Tenant("y").Obj()
	run := runSim(t, "1x4:t4", "fifo", perf.Costs{}, a, b)
	at := func(t0 float64) (report.Sample, map[string]int) {
		i := -1
		for k, smp := range run.Timeline {
			if smp.T <= t0 {
				i = k
			}
		}
		return run.Timeline[i], run.TenantsAt(i)
	}
	if s, ts := at(50); s.Fragmented != 1 || !maps.Equal(ts, map[string]int{"x": 3}) {
		t.Errorf("t=50: %+v, tenants %v, want 1 fragmented GPU and x holding 3", s, ts)
	}
	if s, ts := at(150); s.Fragmented != 0 || !maps.Equal(ts, map[string]int{"y": 2}) {
		t.Errorf("t=150: %+v, tenants %v, want none fragmented and y holding 2", s, ts)
	}
	f := report.Summarize(run).Fairness
	// 1 GPU x 100 s of 4 GPUs x 200 s.
	if math.Abs(f.FragmentedFrac-0.125) > 1e-9 || f.FragmentedMax != 1 {
		t.Errorf("fragmentation %v (max %d), want 0.125 (max 1)", f.FragmentedFrac, f.FragmentedMax)
	}
	// x: 300 GPU-s, y: 200, of 800: 37.5% and 25%.
	if len(f.Tenants) != 2 || math.Abs(f.Tenants[0].Share-0.375) > 1e-9 || math.Abs(f.Tenants[1].Share-0.25) > 1e-9 {
		t.Errorf("tenants %+v", f.Tenants)
	}
}

// TestHiveDInSimulation replays random two-tenant traces with HiveD as the
// placer (tenant t0 guaranteed 4 GPUs, the rest opportunistic) and checks
// every job finishes with its work done: evictions of opportunistic jobs
// are ordinary preemptions.
func TestHiveDInSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	jobs := randomTrace(rng, 40, 8)
	for i, j := range jobs {
		j.Tenant = []string{"t0", "t1"}[i%2]
		if i%5 == 0 {
			j.Priority = -1
		}
	}
	for _, spec := range []string{"fifo:backfill=true", "tiresias", "drf"} {
		p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := place.Lookup("hived:vc=t0@4")
		if err != nil {
			t.Fatal(err)
		}
		run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("2x4:v100"), Model: perf.Duration{},
			Policy: p, Placer: pl, Round: 60, OnEvents: true}, jobs)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		for i, r := range run.Jobs {
			if want := jobs[i].Duration * float64(jobs[i].GPUs); r.Finish < 0 || math.Abs(r.UsefulGPUSeconds-want) > 1e-6*want {
				t.Errorf("%s: job %s finish %v, %v useful GPU-s of %v", spec, r.ID, r.Finish, r.UsefulGPUSeconds, want)
			}
		}
	}
}

// TestFragmentedKept replays random traces on a cluster of two GPU types
// whose jobs ask for GPUs of one type or of any, none for a single GPU of
// any type (else nothing is ever fragmented), under several policies:
// every sample's fragmented GPUs, kept as jobs come and go, are checked
// against a count over every job and GPU (the package's tests set
// checkFrag: a difference panics), and some samples must find fragmented
// GPUs.
func TestFragmentedKept(t *testing.T) {
	frag := 0
	for seed := range 6 {
		rng := rand.New(rand.NewPCG(uint64(seed), 21))
		jobs := randomTrace(rng, 60, 8)
		for i, j := range jobs {
			switch i % 3 {
			case 0:
				j.GPUType = "v100"
			case 1:
				j.GPUType = "t4"
			}
			if j.GPUType == "" && j.GPUs == 1 {
				j.GPUs, j.MinGPUs, j.MaxGPUs = 2, 2, 2
			}
			j.Deadline = 0
		}
		for _, spec := range []string{"fifo", "tiresias", "srtf"} {
			run := runSim(t, "2x4:v100,2x4:t4", spec, perf.Costs{}, jobs...)
			for _, smp := range run.Timeline {
				if smp.Fragmented > 0 {
					frag++
				}
			}
		}
	}
	if frag == 0 {
		t.Fatal("no sample found fragmented GPUs: the traces do not exercise the count")
	}
}
