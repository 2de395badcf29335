package report

import (
	"math"
	"testing"
)

func TestFragmented(t *testing.T) {
	for _, tc := range []struct {
		name    string
		free    map[Pool]int
		waiting []Demand
		want    int
	}{
		// v100: the smallest job that may use it needs 4 > 3 free: 3
		// fragmented. k80: a 1-GPU k80 job fits in 2: none.
		{"mixed", map[Pool]int{{"s", "v100"}: 3, {"s", "k80"}: 2}, []Demand{{"", 4}, {"k80", 1}}, 3},
		// k80: no waiting job may use it: idle, not fragmented.
		{"idle type", map[Pool]int{{"s", "v100"}: 1, {"s", "k80"}: 5}, []Demand{{"v100", 2}}, 1},
		// Two sites of 2 free each: a 3-GPU job fits neither (no job spans
		// sites): all 4 fragmented.
		{"sites", map[Pool]int{{"a", "t4"}: 2, {"b", "t4"}: 2}, []Demand{{"", 3}}, 4},
		{"nothing waits", map[Pool]int{{"s", "v100"}: 3}, nil, 0},
	} {
		if got := Fragmented(tc.free, tc.waiting); got != tc.want {
			t.Errorf("%s: %d fragmented, want %d", tc.name, got, tc.want)
		}
	}
}

// fairRun: 4 GPUs; 2 jobs active over [0, 100), 4 over [100, 200).
// a (tenant x, 2 GPUs, alone 100 s) runs 0..200: N = (2x100 + 4x100)/200
// = 3, T_independent = 100 x max(1, 2x3/4) = 150, rho = 200/150 = 4/3.
// b (tenant y, 1 GPU, alone 50 s) runs 100..150: N = 4, T_independent =
// 50 x max(1, 1x4/4) = 50, rho = 1. c never finishes.
func fairRun() *Run {
	return &Run{Policy: "p", TotalGPUs: 4,
		Jobs: []JobRecord{
			{ID: "a", Tenant: "x", GPUs: 2, Submit: 0, Start: 0, Finish: 200, LowerBound: 100, GPUSeconds: 400},
			{ID: "b", Tenant: "y", GPUs: 1, Submit: 100, Start: 100, Finish: 150, LowerBound: 50, GPUSeconds: 50},
			{ID: "c", Tenant: "y", GPUs: 1, Submit: 100, Start: -1, Finish: -1},
		},
		Timeline: []Sample{
			{T: 0, Running: 1, Queued: 1, Allocated: 2, Fragmented: 2},
			{T: 100, Running: 2, Queued: 2, Allocated: 3},
			{T: 200},
		},
	}
}

func TestFairnessSummary(t *testing.T) {
	f := Summarize(fairRun()).Fairness
	near := func(what string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	rho := Rhos(fairRun())
	if math.Abs(rho[0]-4.0/3) > 1e-9 || math.Abs(rho[1]-1) > 1e-9 || !math.IsNaN(rho[2]) {
		t.Errorf("rhos %v, want [4/3 1 NaN]", rho)
	}
	near("max rho", f.RhoMax, 4.0/3)
	near("mean rho", f.RhoMean, (4.0/3+1)/2)
	near("rho > 1", f.RhoOver1, 0.5)
	// 1/rho = 0.75 and 1: (1.75)^2 / (2 x (0.5625 + 1)) = 0.98.
	near("Jain over jobs", f.JainJobs, 0.98)
	near("Jain over tenants", f.JainTenants, 0.98)
	if len(f.Tenants) != 2 || f.Tenants[0].Tenant != "x" || f.Tenants[1].Tenant != "y" {
		t.Fatalf("tenants %+v", f.Tenants)
	}
	// Span 0..200 on 4 GPUs = 800 GPU-s: x 400 (0.5), y 50 (0.0625); of
	// the 450 allocated, x 8/9.
	x, y := f.Tenants[0], f.Tenants[1]
	if x.Jobs != 1 || y.Jobs != 2 || math.Abs(x.Share-0.5) > 1e-9 || math.Abs(y.Share-0.0625) > 1e-9 || math.Abs(x.AllocShare-8.0/9) > 1e-9 {
		t.Errorf("shares x %+v y %+v", x, y)
	}
	near("x mean rho", x.RhoMean, 4.0/3)
	// 2 fragmented GPUs for 100 of 200 s on 4 GPUs: 0.25.
	if math.Abs(f.FragmentedFrac-0.25) > 1e-9 || f.FragmentedMax != 2 {
		t.Errorf("fragmentation %v (max %d), want 0.25 (max 2)", f.FragmentedFrac, f.FragmentedMax)
	}
	// One tenant: no per-tenant part.
	r := fairRun()
	for i := range r.Jobs {
		r.Jobs[i].Tenant = ""
	}
	if f := Summarize(r).Fairness; f.Tenants != nil || f.JainTenants != nil {
		t.Errorf("one tenant: %+v", f)
	}
	// A window leaves the others out of rho.
	r = fairRun()
	r.Window = [2]int{1, 3}
	if f := Summarize(r).Fairness; f.RhoMax == nil || *f.RhoMax != 1 {
		t.Errorf("window [1, 3): max rho %v, want 1", f.RhoMax)
	}
}

func TestJain(t *testing.T) {
	if got := Jain([]float64{1, 1, 1}); got != 1 {
		t.Errorf("equal: %v", got)
	}
	// One of n gets everything: 1/n.
	if got := Jain([]float64{4, 0, 0, 0}); math.Abs(got-0.25) > 1e-12 {
		t.Errorf("one of four: %v", got)
	}
}
