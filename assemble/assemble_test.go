package assemble

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy"
)

func mustCluster(t *testing.T, spec string) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func inputs(t *testing.T, m perf.Model, capToSite bool, jobs ...*job.Job) *Inputs {
	return &Inputs{Jobs: jobs, Cluster: mustCluster(t, "4x4:t4"), Model: m, Round: 60, CapToSite: capToSite}
}

func TestJobsFor(t *testing.T) {
	pm, err := PolluxModel("")
	if err != nil {
		t.Fatal(err)
	}
	lim := pm.Limits(&job.Job{Model: "cifar10", BatchSize: 128})
	if lim.MinLocal <= 0 {
		t.Fatalf("cifar10 has no per-GPU batch floor: %+v", lim)
	}
	cifar := func(gpus, batch int) *job.Job {
		return &job.Job{ID: "c", Model: "cifar10", GPUs: gpus, BatchSize: batch, Work: 1, Unit: job.Epochs}
	}
	big := &job.Job{ID: "b", GPUs: 32, Work: 100, Unit: job.Seconds}
	for _, tc := range []struct {
		name     string
		in       *Inputs
		policy   string
		gpus     int
		min, max int
		adapt    bool
	}{
		{"rigid keeps the job", inputs(t, pm, false, cifar(2, 128)), "fifo", 2, 0, 0, false},
		{"pollux adapts the batch", inputs(t, pm, false, cifar(2, 128)), "pollux", 2, 1, 16, true},
		{"optimus is capped by the batch", inputs(t, pm, false, cifar(2, 128)), "optimus", 2, 1, max(1, min(16, 128/lim.MinLocal)), false},
		{"duration model: no batch cap", inputs(t, DurationModel(), false, cifar(2, 128)), "optimus", 2, 1, 16, false},
		{"cap to the largest site", inputs(t, DurationModel(), true, big), "fifo", 16, 0, 0, false},
		{"no cap without CapToSite", inputs(t, DurationModel(), false, big), "fifo", 32, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, ok := policy.Lookup(tc.policy)
			if !ok {
				t.Fatalf("no policy %s", tc.policy)
			}
			got := tc.in.JobsFor(info)[0]
			if got.GPUs != tc.gpus || got.MinGPUs != tc.min || got.MaxGPUs != tc.max || got.AdaptBatch != tc.adapt {
				t.Errorf("got GPUs %d min %d max %d adapt %v, want %d %d %d %v", got.GPUs, got.MinGPUs, got.MaxGPUs, got.AdaptBatch,
					tc.gpus, tc.min, tc.max, tc.adapt)
			}
		})
	}
}

func TestJobsForLeavesInputs(t *testing.T) {
	j := &job.Job{ID: "a", Model: "cifar10", GPUs: 2, BatchSize: 128, Work: 1, Unit: job.Epochs}
	before := *j
	in := inputs(t, DurationModel(), true, j)
	info, _ := policy.Lookup("pollux")
	in.JobsFor(info)
	if *j != before {
		t.Errorf("JobsFor changed its input: %+v, was %+v", *j, before)
	}
}

func TestPresets(t *testing.T) {
	if _, err := LookupPreset("pollux"); err == nil {
		t.Error("unknown preset accepted")
	}
	p, err := LookupPreset("pollux-artifact")
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"tiresias":          "tiresias:preset=pollux",
		"tiresias:preset=x": "tiresias:preset=x",
		"optimus":           "optimus:oracle=true",
		"pollux":            "pollux:restart_cost=job",
		"pollux:x=1":        "pollux:x=1:restart_cost=job",
		"fifo":              "fifo",
	} {
		got := p.Spec(spec)
		if got != want {
			t.Errorf("Spec(%q) = %q, want %q", spec, got, want)
		}
		if again := p.Spec(got); again != got {
			t.Errorf("Spec is not idempotent on %q: %q", got, again)
		}
	}
	if g, _ := LookupPreset("gavel"); g.Round != 360 || !g.RoundsOnly {
		t.Errorf("gavel preset: %+v", g)
	}
}

func TestBuildErrors(t *testing.T) {
	in := inputs(t, DurationModel(), false, &job.Job{ID: "a", GPUs: 1, Work: 10, Unit: job.Seconds})
	for spec, field := range map[string]string{"nosuch": "policy", "fifo:bogus=1": "policy"} {
		_, err := in.Build(spec)
		var ae *Error
		if !errors.As(err, &ae) || ae.Field != field {
			t.Errorf("Build(%q): %v, want an error on %s", spec, err, field)
		}
	}
	in.Placer = "nosuch"
	var ae *Error
	if _, err := in.Build("fifo"); !errors.As(err, &ae) || ae.Field != "placer" {
		t.Errorf("bad placer: %v", err)
	}
	in.Placer = ""
	r, err := in.Build("fifo")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Simulate()
	if err != nil || len(out.Jobs) != 1 || out.Jobs[0].Finish <= 0 {
		t.Fatalf("run: %v %+v", err, out)
	}
}

// TestPresetSpecsTested: every spec a preset rewrites a policy to is one of
// that policy's presets, so the conformance and state suites (which run
// policy.Specs) cover it.
func TestPresetSpecsTested(t *testing.T) {
	for _, name := range Presets {
		p, err := LookupPreset(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range policy.All() {
			got := p.Spec(info.Name)
			if got != info.Name && !slices.Contains(info.Presets, got) {
				t.Errorf("--preset %s runs %s as %q, which is not among its presets %q", name, info.Name, got, info.Presets)
			}
		}
	}
}

// TestBuildElasticWholeGPUs: an elastic policy is refused, naming the
// column, when a job asks for part of each GPU. JobsFor made such a job
// elastic and the simulator failed the run on it as a bad job ("must be
// rigid"), or the policy gave it an exact node shape the engine refuses
// (found by a random search over workloads). A policy that is not elastic
// runs it.
func TestBuildElasticWholeGPUs(t *testing.T) {
	for _, tc := range []struct {
		field string
		j     job.Job
	}{
		{"gpu_share", job.Job{Share: 0.5}},
		{"gpu_mem_gib", job.Job{GPUMemGiB: 8}},
		{"mig", job.Job{MIG: "1g.10gb"}},
	} {
		j := tc.j
		j.ID, j.GPUs, j.Work, j.Unit = "p", 1, 10, job.Seconds
		in := inputs(t, DurationModel(), false, &j)
		for _, spec := range []string{"pollux", "elasticflow", "afs"} {
			_, err := in.Build(spec)
			var ae *Error
			if !errors.As(err, &ae) || ae.Field != "policy" || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s, job with %s: %v, want a policy error naming %s", spec, tc.field, err, tc.field)
			}
		}
		r, err := in.Build("fifo")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := r.Simulate(); err != nil || out.Jobs[0].Finish <= 0 {
			t.Errorf("fifo, job with %s: %v", tc.field, err)
		}
	}
}

// TestBuildQuotaWithoutBorrow: without borrowing, a job that needs more
// GPUs than its tenant's quota (none, for a tenant the quotas leave out)
// never runs; it is refused before the run, naming the job, the tenant and
// the quota. The run went until the simulator found it stuck (tide sim
// --quota zz=64 --borrow=false). Borrowing, or a quota that holds it, runs.
func TestBuildQuotaWithoutBorrow(t *testing.T) {
	j := &job.Job{ID: "a", Tenant: "alice", GPUs: 2, Work: 10, Unit: job.Seconds}
	for _, tc := range []struct {
		quotas map[string]int
		borrow bool
		want   string // "": runs
	}{
		{map[string]int{"zz": 64}, false, `job a of tenant "alice" needs 2 GPUs and the tenant has no quota`},
		{map[string]int{"alice": 1}, false, `the tenant has its quota of 1`},
		{map[string]int{"zz": 64}, true, ""},
		{map[string]int{"alice": 2}, false, ""},
	} {
		in := inputs(t, DurationModel(), false, j)
		in.Quotas, in.Borrow = tc.quotas, tc.borrow
		r, err := in.Build("fifo")
		var ae *Error
		switch {
		case tc.want != "":
			if !errors.As(err, &ae) || ae.Field != "quota" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("quotas %v, borrow %v: %v, want a quota error with %q", tc.quotas, tc.borrow, err, tc.want)
			}
		case err != nil:
			t.Errorf("quotas %v, borrow %v: %v", tc.quotas, tc.borrow, err)
		default:
			if out, err := r.Simulate(); err != nil || out.Jobs[0].Finish <= 0 {
				t.Errorf("quotas %v, borrow %v: %v", tc.quotas, tc.borrow, err)
			}
		}
	}
}
