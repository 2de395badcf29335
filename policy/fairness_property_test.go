package policy_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// audited wraps a policy and checks every plan it makes against the
// snapshot: no job twice, GPU counts within the job's range and the type's
// capacity, and CPU cores and memory (as DRF counts them) within the
// cluster's.
type audited struct {
	engine.Policy
	t *testing.T
}

func (a audited) Schedule(s *engine.Snapshot) engine.Plan {
	plan := a.Policy.Schedule(s)
	byID := map[string]*engine.Status{}
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	var gpus, cpus, mem, capGPU, capCPU, capMem float64
	for _, n := range s.Cluster.Nodes {
		capGPU += float64(n.GPUs)
		capCPU += float64(n.CPUs)
		capMem += n.MemGiB
	}
	perType := map[string]int{}
	seen := map[string]bool{}
	for _, as := range plan.Run {
		st := byID[as.Job]
		if st == nil || seen[as.Job] {
			a.t.Fatalf("%s at t=%v: plan lists %s twice or unknown", a.Name(), s.Now, as.Job)
		}
		seen[as.Job] = true
		if as.GPUs < st.Job.MinGPUs || as.GPUs > st.Job.MaxGPUs {
			a.t.Fatalf("%s: job %s given %d GPUs", a.Name(), as.Job, as.GPUs)
		}
		perType[as.GPUType] += as.GPUs
		gpus += float64(as.GPUs)
		c, m := st.Job.CPUs, st.Job.MemGiB
		if c == 0 {
			c = capCPU / capGPU * float64(as.GPUs)
		}
		if m == 0 {
			m = capMem / capGPU * float64(as.GPUs)
		}
		cpus += c
		mem += m
	}
	for t, n := range perType {
		if t != "" && n > s.Cluster.GPUsOfType(t) {
			a.t.Fatalf("%s at t=%v: %d %s GPUs planned of %d", a.Name(), s.Now, n, t, s.Cluster.GPUsOfType(t))
		}
	}
	if gpus > capGPU {
		a.t.Fatalf("%s at t=%v: %v GPUs planned of %v", a.Name(), s.Now, gpus, capGPU)
	}
	if a.Name() == "drf" && (cpus > capCPU+1e-6 || mem > capMem+1e-6) {
		a.t.Fatalf("drf at t=%v: %v cores and %v GiB planned of %v and %v", s.Now, cpus, mem, capCPU, capMem)
	}
	return plan
}

// TestFairPoliciesInvariants replays random multi-tenant traces on a mixed
// cluster with CPU and memory under every fairness policy and checks that
// every plan is feasible (audited), every job finishes after it was
// submitted, work is conserved (useful GPU-seconds = duration x GPUs for
// the duration model) and the same inputs give the same run.
func TestFairPoliciesInvariants(t *testing.T) {
	specs := []string{"drf", "drf:preempt=true:weights=t1@2", "themis", "themis:f=0:lease=120",
		"gandiva", "gandiva:preset=gavel", "gandiva-fair", "gandiva-fair:trade=false:tickets=t0@3", "allox", "allox:alpha=0.5"}
	c, err := cluster.New([]cluster.Node{
		{Name: "a", GPUType: "v100", GPUs: 4, CPUs: 16, MemGiB: 128},
		{Name: "b", GPUType: "v100", GPUs: 4, CPUs: 16, MemGiB: 128},
		{Name: "c", GPUType: "k80", GPUs: 2, CPUs: 8, MemGiB: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	for trial, spec := range specs {
		var jobs []*job.Job
		at := 0.0
		for i := range 10 + rng.IntN(30) {
			at += float64(rng.IntN(200))
			b := enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).GPUs(1 << rng.IntN(3)).
				Seconds(float64(30 + rng.IntN(2000))).Tenant(fmt.Sprintf("t%d", rng.IntN(3)))
			j := b.Obj()
			if rng.IntN(3) == 0 {
				j.CPUs = float64(1 + rng.IntN(12))
			}
			jobs = append(jobs, j)
		}
		t.Run(fmt.Sprintf("%d-%s", trial, spec), func(t *testing.T) {
			var runs [2]string
			for k := range runs {
				p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
				if err != nil {
					t.Fatal(err)
				}
				run, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 5, Restart: 10, Resize: 10}}},
					Policy: audited{p, t}, Placer: place.Pack{}, Round: 60, OnEvents: true}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range run.Jobs {
					if r.Finish < r.Start || r.Start < r.Submit {
						t.Fatalf("job %s: submit %v start %v finish %v", r.ID, r.Submit, r.Start, r.Finish)
					}
					want := jobs[i].Duration * float64(jobs[i].GPUs)
					if math.Abs(r.UsefulGPUSeconds-want) > 1e-6*want {
						t.Errorf("job %s: %v useful GPU-s, want %v", r.ID, r.UsefulGPUSeconds, want)
					}
				}
				for _, smp := range run.Timeline {
					if int(smp.Allocated) > c.TotalGPUs() {
						t.Fatalf("t=%v: %d GPUs held of %d", smp.T, smp.Allocated, c.TotalGPUs())
					}
				}
				runs[k] = fmt.Sprint(run.Jobs)
			}
			if runs[0] != runs[1] {
				t.Error("two runs of the same inputs differ")
			}
		})
	}
}
