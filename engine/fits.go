package engine

import (
	"fmt"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// Fits says why cluster c could never hold job j, or returns nil: j needs
// more GPUs of one type than one site of c has (cluster.MaxJobGPUs), or,
// asking for part of each GPU, more than one site has whose memory holds
// its part (MaxPartGPUs). On an edge site a job uses one server. The
// engine refuses such a job at submission (Submit), the simulator before
// it runs (sim.Fits): accepted, it would wait for ever. The GPUs of the
// whole cluster are not the test: two sites of 4 GPUs hold no job of 6.
func Fits(c *cluster.Cluster, j *job.Job) error {
	need := j.MinGPUs
	if need == 0 {
		need = j.GPUs
	}
	have, part := c.MaxJobGPUs(j.GPUType), ""
	if j.Fractional() {
		have, part = MaxPartGPUs(c, j), " that hold its part of a GPU ("+partString(j)+")"
	}
	if need > have {
		what := "GPUs of one type"
		if j.GPUType != "" {
			what = j.GPUType + " GPUs"
		}
		return fmt.Errorf("job %s: needs at least %d %s%s on one site (a job never mixes types or spans sites), the most the cluster has is %d", j.ID, need, what, part, have)
	}
	return nil
}

// partString says what part of each GPU j asks for, as its trace does:
// "mig 2g.20gb", "gpu_share 0.5", "gpu_mem_gib 20".
func partString(j *job.Job) string {
	var s []string
	if j.MIG != "" {
		s = append(s, "mig "+j.MIG)
	}
	if j.Share > 0 {
		s = append(s, fmt.Sprintf("gpu_share %g", j.Share))
	}
	if j.GPUMemGiB > 0 {
		s = append(s, fmt.Sprintf("gpu_mem_gib %g", j.GPUMemGiB))
	}
	return strings.Join(s, ", ")
}
