package trace

import (
	"testing"

	"github.com/tide-sched/tide/job"
)

// TestTideResources reads the optional host-resource columns (DRF's CPU
// cores and memory) in both of tide's own encodings.
func TestTideResources(t *testing.T) {
	want := job.Job{ID: "a", Submit: 0, Tenant: "t", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Work: 60, Unit: job.Seconds, Duration: 60, CPUs: 12, MemGiB: 96.5}
	got := mustRead(t, TideCSV, "id,submit,tenant,gpus,duration,cpus,mem_gib\na,0,t,2,60,12,96.5\n", Options{})
	wantJobs(t, got, want)
	got = mustRead(t, TideJSONL, `{"id":"a","submit":0,"tenant":"t","gpus":2,"duration":60,"cpus":12,"mem_gib":96.5}`+"\n", Options{})
	wantJobs(t, got, want)
	runErrCases(t, TideCSV, []errCase{
		{name: "negative cpus", in: "id,submit,gpus,duration,cpus\na,0,1,5,-2\n", line: 2, field: "cpus", msg: "negative"},
		{name: "bad memory", in: "id,submit,gpus,duration,mem_gib\na,0,1,5,lots\n", line: 2, field: "mem_gib", msg: `bad number "lots"`},
	})
	runErrCases(t, TideJSONL, []errCase{
		{name: "negative memory", in: `{"id":"a","submit":0,"gpus":1,"duration":9,"mem_gib":-1}`, line: 1, field: "mem_gib", msg: "negative"},
	})
}
