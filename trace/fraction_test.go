package trace

import (
	"testing"

	"github.com/tide-sched/tide/job"
)

// TestTideFractions reads the GPU-sharing columns in both of tide's own
// encodings and refuses bad values naming the line and column.
func TestTideFractions(t *testing.T) {
	want := []job.Job{
		{ID: "q", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 60, Unit: job.Seconds, Duration: 60, Share: 0.25},
		{ID: "m", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Work: 60, Unit: job.Seconds, Duration: 60, GPUMemGiB: 8},
		{ID: "g", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 60, Unit: job.Seconds, Duration: 60, MIG: "1g.10gb"},
	}
	got := mustRead(t, TideCSV, "id,submit,gpus,duration,gpu_share,gpu_mem_gib,mig\nq,0,1,60,25%,,\nm,0,2,60,,8,\ng,0,1,60,,,1g.10gb\n", Options{})
	wantJobs(t, got, want...)
	got = mustRead(t, TideJSONL, `{"id":"q","submit":0,"gpus":1,"duration":60,"gpu_share":0.25}`+"\n"+
		`{"id":"m","submit":0,"gpus":2,"duration":60,"gpu_mem_gib":8}`+"\n"+
		`{"id":"g","submit":0,"gpus":1,"duration":60,"mig":"1g.10gb"}`+"\n", Options{})
	wantJobs(t, got, want...)
	runErrCases(t, TideCSV, []errCase{
		{name: "share 1", in: "id,submit,gpus,duration,gpu_share\na,0,1,5,1\n", line: 2, field: "gpu_share", msg: "less than a whole GPU"},
		{name: "share text", in: "id,submit,gpus,duration,gpu_share\na,0,1,5,half\n", line: 2, field: "gpu_share", msg: "want a number in (0, 1)"},
		{name: "bad mig", in: "id,submit,gpus,duration,mig\na,0,1,5,5g.40gb\n", line: 2, field: "mig", msg: "slices 5"},
		{name: "elastic part", in: "id,submit,gpus,max_gpus,duration,gpu_share\na,0,1,2,5,0.5\n", line: 2, field: "max_gpus", msg: "rigid"},
		{name: "mig and memory", in: "id,submit,gpus,duration,mig,gpu_mem_gib\na,0,1,5,1g.5gb,4\n", line: 2, field: "mig", msg: "fixes the share"},
	})
	runErrCases(t, TideJSONL, []errCase{
		{name: "share negative", in: `{"id":"a","submit":0,"gpus":1,"duration":9,"gpu_share":-0.5}`, line: 1, field: "gpu_share", msg: "want a number in (0, 1)"},
		{name: "share string", in: `{"id":"a","submit":0,"gpus":1,"duration":9,"gpu_share":"25%"}`, line: 1, field: "gpu_share", msg: "want a number"},
		{name: "memory negative", in: `{"id":"a","submit":0,"gpus":1,"duration":9,"gpu_mem_gib":-1}`, line: 1, field: "gpu_mem_gib", msg: "negative"},
		{name: "mig number", in: `{"id":"a","submit":0,"gpus":1,"duration":9,"mig":7}`, line: 1, field: "mig", msg: "want a string"},
	})
}
