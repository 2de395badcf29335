package job

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GPU sharing (docs/sharing.md): a job may ask for part of each of its GPUs
// instead of whole ones, in one of three ways (Job.Share, Job.GPUMemGiB,
// Job.MIG). Such a job is fractional: it is rigid (MinGPUs == MaxGPUs) and
// gets GPUs distinct GPUs, on each of which it holds its part while other
// fractional jobs hold the rest.

// MIGSlices is the number of compute slices of a MIG-capable GPU (A100,
// H100, H200): a profile "3g.40gb" takes 3 of them.
const MIGSlices = 7

// shareEps absorbs float rounding when parts are summed (7 × 1/7 is
// 1.0000000000000002): a GPU whose parts sum to 1 + shareEps is full, not
// over-committed.
const shareEps = 1e-9

// Fractional reports whether j asks for part of each GPU rather than whole
// GPUs.
func (j *Job) Fractional() bool { return j.Share > 0 || j.GPUMemGiB > 0 || j.MIG != "" }

// Demand is the part of one GPU with gpuMemGiB of memory that j needs on
// each of its GPUs: share, its compute in (0, 1], and memGiB, its memory.
// Whichever j did not give follows from the other: a MIG profile takes
// slices/MIGSlices of the compute and its memory; a share alone takes that
// share of the memory; memory alone takes memGiB/gpuMemGiB of the compute
// (the MPS thread percentage tide gives it). A whole-GPU job's demand is
// (1, gpuMemGiB). gpuMemGiB 0 is a GPU of unknown memory: a share alone is
// that share (and no memory), a part asking for memory takes the whole
// compute (and Fits no such GPU).
func (j *Job) Demand(gpuMemGiB float64) (share, memGiB float64) {
	if j.MIG != "" {
		slices, mem, err := ParseMIG(j.MIG)
		if err == nil {
			return float64(slices) / MIGSlices, mem
		}
		return 1, gpuMemGiB // Validate refuses it; count it as whole
	}
	if !j.Fractional() {
		return 1, gpuMemGiB
	}
	share, memGiB = j.Share, j.GPUMemGiB
	if share == 0 {
		share = min(1, memGiB/gpuMemGiB)
	}
	if memGiB == 0 {
		memGiB = share * gpuMemGiB
	}
	return share, memGiB
}

// Fits reports whether parts share and memGiB, added to a GPU of gpuMemGiB
// whose holders already use usedShare and usedMemGiB, keep it within its
// compute (1) and memory.
func Fits(usedShare, usedMemGiB, share, memGiB, gpuMemGiB float64) bool {
	return usedShare+share <= 1+shareEps && usedMemGiB+memGiB <= gpuMemGiB*(1+shareEps)
}

// ParseMIG reads a MIG profile, "<slices>g.<memory>gb" as NVIDIA names them
// ("1g.10gb", "3g.40gb", "7g.80gb"): the compute slices it takes (1, 2, 3, 4
// or 7 of MIGSlices) and its memory in GiB (> 0). Case does not matter.
func ParseMIG(s string) (slices int, memGiB float64, err error) {
	g, m, ok := strings.Cut(strings.ToLower(s), "g.")
	if !ok || !strings.HasSuffix(m, "gb") {
		return 0, 0, fmt.Errorf("MIG profile %q: want <slices>g.<memory>gb, e.g. 1g.10gb", s)
	}
	slices, err = strconv.Atoi(g)
	if err != nil || g[0] == '+' || g[0] == '-' {
		return 0, 0, fmt.Errorf("MIG profile %q: slices %q: want 1, 2, 3, 4 or 7", s, g)
	}
	switch slices {
	case 1, 2, 3, 4, 7:
	default:
		return 0, 0, fmt.Errorf("MIG profile %q: slices %d: want 1, 2, 3, 4 or 7", s, slices)
	}
	mem, err := strconv.Atoi(strings.TrimSuffix(m, "gb"))
	if err != nil || mem <= 0 || m[0] == '+' {
		return 0, 0, fmt.Errorf("MIG profile %q: memory %q: want a whole number of GB > 0", s, strings.TrimSuffix(m, "gb"))
	}
	return slices, float64(mem), nil
}

// ParseShare reads a GPU share written as a decimal fraction ("0.25") or a
// percentage ("25%"): a number in (0, 1), or in (0, 100) before a %.
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if p, ok := strings.CutSuffix(t, "%"); ok {
		t, scale = strings.TrimSpace(p), 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("GPU share %q: want a number in (0, 1) such as 0.25, or a percentage such as 25%%", s)
	}
	v /= scale
	if !(v > 0 && v < 1) {
		return 0, fmt.Errorf("GPU share %q: want more than 0 and less than a whole GPU (for whole GPUs ask for a GPU count)", s)
	}
	return v, nil
}

// validateFraction checks the sharing fields of j (after the GPU counts
// are filled in).
func (j *Job) validateFraction() error {
	if j.Share != 0 && !(j.Share > 0 && j.Share < 1) {
		return fmt.Errorf("job %s: gpu_share: want a number in (0, 1), got %v (for whole GPUs ask for a GPU count)", j.ID, j.Share)
	}
	if j.GPUMemGiB < 0 || math.IsNaN(j.GPUMemGiB) || math.IsInf(j.GPUMemGiB, 0) {
		return fmt.Errorf("job %s: gpu_mem_gib: want a finite number >= 0, got %v", j.ID, j.GPUMemGiB)
	}
	if j.MIG != "" {
		if _, _, err := ParseMIG(j.MIG); err != nil {
			return fmt.Errorf("job %s: mig: %w", j.ID, err)
		}
		if j.Share != 0 || j.GPUMemGiB != 0 {
			return fmt.Errorf("job %s: mig: a MIG profile fixes its share and memory; give gpu_share and gpu_mem_gib only without it", j.ID)
		}
	}
	if j.Fractional() && j.MinGPUs != j.MaxGPUs {
		return fmt.Errorf("job %s: a job with part of each GPU (gpu_share, gpu_mem_gib or mig) must be rigid, got gpus in [%d, %d]", j.ID, j.MinGPUs, j.MaxGPUs)
	}
	return nil
}
