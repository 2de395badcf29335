package fair

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// drfCluster is one node of 10 GPUs, 20 CPU cores and 100 GiB: 2 cores and
// 10 GiB per GPU.
// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

func drfCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New([]cluster.Node{{Name: "n", GPUType: "v100", GPUs: 10, CPUs: 20, MemGiB: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drfJobs gives tenant a five CPU-heavy jobs (1 GPU, 4 cores: dominant
// share 0.2 of the CPUs) and tenant b five GPU-heavy ones (2 GPUs, 2 cores:
// 0.2 of the GPUs); the first bHeld of b's jobs run.
func drfJobs(bHeld int) []policytest.JobState {
	var out []policytest.JobState
	for i := 1; i <= 5; i++ {
		a := policytest.Wait(fmt.Sprintf("a%d", i), float64(i), 1, 100)
		a.Job.Tenant, a.Job.CPUs = "a", 4
		b := policytest.Wait(fmt.Sprintf("b%d", i), float64(i), 2, 100)
		b.Job.Tenant, b.Job.CPUs = "b", 2
		if i <= bHeld {
			b.Held = 2
		}
		out = append(out, a, b)
	}
	return out
}

func TestDRF(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		bHeld int
		want  []string
	}{
		// From empty, shares rise in turns (a first on ties, by name):
		// a1 .2, b1 .2, a2 .4, b2 .4, a3 .6, b3 .6. Then a4 needs 4 cores
		// of the 2 left, b4 2 GPUs of the 1 left: both stop at 0.6.
		{"drf", 0, []string{"a1:1", "b1:2", "a2:1", "b2:2", "a3:1", "b3:2"}},
		// b holds 4 jobs (8 GPUs, 8 cores). Without preemption a fills what
		// is free: a1, a2 (2 GPUs, 8 cores); a3 finds no GPU.
		{"drf", 4, []string{"b1:2", "b2:2", "b3:2", "b4:2", "a1:1", "a2:1"}},
		// With preemption the filling starts from zero as in the first
		// case: b4 no longer fits and is preempted.
		{"drf:preempt=true", 4, []string{"a1:1", "b1:2", "a2:1", "b2:2", "a3:1", "b3:2"}},
		// a weighs 2: a1 (.1), b1 (.2), a2 (.2), a3 (.3, a wins the tie by
		// name), b2 (.4), a4 (.4, cores now all used); a5 and b3 need
		// cores: done.
		{"drf:weights=a@2", 0, []string{"a1:1", "b1:2", "a2:1", "a3:1", "b2:2", "a4:1"}},
	} {
		p := fam.Parse(t, tc.spec, contract.Context{})
		s := policytest.Snap(t, 1000, drfCluster(t), drfJobs(tc.bHeld)...)
		if got := policytest.Runs(p.Schedule(s)); !slices.Equal(got, tc.want) {
			t.Errorf("%s with %d of b's jobs running: plan %v, want %v", tc.spec, tc.bHeld, got, tc.want)
		}
	}
}

func TestDRFDefaultsToGPUShares(t *testing.T) {
	// No node gives CPUs or memory: only GPUs count. a holds 3 of 4 GPUs,
	// b waits with two 1-GPU jobs: b gets the one free GPU.
	a := policytest.Hold("a1", 0, 3, 100)
	a.Job.Tenant = "a"
	b1, b2, a2 := policytest.Wait("b1", 1, 1, 100), policytest.Wait("b2", 2, 1, 100), policytest.Wait("a2", 0.5, 1, 100)
	b1.Job.Tenant, b2.Job.Tenant, a2.Job.Tenant = "b", "b", "a"
	s := policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), a, a2, b1, b2)
	if got, want := policytest.Runs(fam.Parse(t, "drf", contract.Context{}).Schedule(s)), []string{"a1:3", "b1:1"}; !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
}

func TestWeightsKnob(t *testing.T) {
	for _, bad := range []string{"weights=a", "weights=a@0", "weights=a@x", "weights=@2", "weights=a@1/a@2"} {
		if _, err := fam("drf:"+bad, contract.Context{}); err == nil {
			t.Errorf("drf:%s parsed, want an error", bad)
		}
	}
	p := fam.Parse(t, "drf:weights=a@2/-@3", contract.Context{}).(*DRF)
	if p.Weights.Of("a") != 2 || p.Weights.Of("") != 3 || p.Weights.Of("zz") != 1 {
		t.Errorf("weights: a %v, \"\" %v, zz %v", p.Weights.Of("a"), p.Weights.Of(""), p.Weights.Of("zz"))
	}
}
