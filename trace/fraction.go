package trace

import (
	"fmt"

	"github.com/tide-sched/tide/job"
)

// The columns of tide's format for a job that asks for part of each GPU
// (GPU sharing, docs/sharing.md): gpu_share ("0.25" or "25%"),
// gpu_mem_gib and mig (a MIG profile, "1g.10gb").

// readShareText parses gpu_share as tide-csv gives it (text); "" is none.
func readShareText(r *row) float64 {
	s := r.raw("gpu_share")
	if s == "" {
		return 0
	}
	v, err := job.ParseShare(s)
	if err != nil {
		r.fail("gpu_share", "%v", err)
	}
	return v
}

// fractionCheck applies the rules on the sharing columns once the values
// are parsed, naming the column at fault.
func fractionCheck(j *job.Job) (field, msg string) {
	switch {
	case j.Share != 0 && !(j.Share > 0 && j.Share < 1):
		return "gpu_share", fmt.Sprintf("want a number in (0, 1), got %v (for whole GPUs give gpus alone)", j.Share)
	case j.GPUMemGiB < 0:
		return "gpu_mem_gib", fmt.Sprintf("negative number %v: want a number >= 0", j.GPUMemGiB)
	}
	if j.MIG != "" {
		if _, _, err := job.ParseMIG(j.MIG); err != nil {
			return "mig", err.Error()
		}
		if j.Share != 0 || j.GPUMemGiB != 0 {
			return "mig", "a MIG profile fixes the share and memory: give gpu_share and gpu_mem_gib only without it"
		}
	}
	if j.Fractional() && ((j.MinGPUs != 0 && j.MinGPUs != j.GPUs) || (j.MaxGPUs != 0 && j.MaxGPUs != j.GPUs)) {
		return "max_gpus", fmt.Sprintf("a job with part of each GPU is rigid: min_gpus and max_gpus must be gpus (%d) or empty", j.GPUs)
	}
	return "", ""
}
