// Package enginetest holds small builders for tests, so a table test reads
// like its scenario: enginetest.Job("a").At(10).GPUs(2).Seconds(300).Obj().
package enginetest

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// JobBuilder builds a job.Job.
type JobBuilder struct{ j job.Job }

// Job starts a rigid one-GPU job with 60 s of work submitted at 0.
func Job(id string) *JobBuilder {
	return &JobBuilder{job.Job{ID: id, GPUs: 1, Work: 60, Unit: job.Seconds, Duration: 60}}
}

// At sets the submission time, s.
func (b *JobBuilder) At(t float64) *JobBuilder { b.j.Submit = t; return b }

// GPUs sets a rigid GPU count.
func (b *JobBuilder) GPUs(n int) *JobBuilder {
	b.j.GPUs, b.j.MinGPUs, b.j.MaxGPUs = n, n, n
	return b
}

// Elastic sets a GPU range, with n the requested count.
func (b *JobBuilder) Elastic(lo, n, hi int) *JobBuilder {
	b.j.MinGPUs, b.j.GPUs, b.j.MaxGPUs = lo, n, hi
	return b
}

// Seconds sets duration-only work: s seconds on the requested GPUs.
func (b *JobBuilder) Seconds(s float64) *JobBuilder {
	b.j.Work, b.j.Unit, b.j.Duration = s, job.Seconds, s
	return b
}

// Epochs sets work counted in epochs of a profiled model.
func (b *JobBuilder) Epochs(model string, e float64, batch int) *JobBuilder {
	b.j.Model, b.j.Work, b.j.Unit, b.j.BatchSize, b.j.Duration = model, e, job.Epochs, batch, 0
	return b
}

// Deadline sets an absolute deadline, s.
func (b *JobBuilder) Deadline(t float64) *JobBuilder { b.j.Deadline = t; return b }

// Type restricts the job to one GPU type.
func (b *JobBuilder) Type(t string) *JobBuilder { b.j.GPUType = t; return b }

// Tenant sets the owner.
func (b *JobBuilder) Tenant(t string) *JobBuilder { b.j.Tenant = t; return b }

// Share asks for share of each GPU's compute (a fractional job).
func (b *JobBuilder) Share(s float64) *JobBuilder { b.j.Share = s; return b }

// GPUMem asks for gib GiB of each GPU's memory (a fractional job).
func (b *JobBuilder) GPUMem(gib float64) *JobBuilder { b.j.GPUMemGiB = gib; return b }

// MIG asks for a MIG profile such as "1g.10gb" on each GPU.
func (b *JobBuilder) MIG(profile string) *JobBuilder { b.j.MIG = profile; return b }

// Obj returns the job.
func (b *JobBuilder) Obj() *job.Job { j := b.j; return &j }

// Cluster builds a cluster from a shorthand such as "2x4:t4"; it panics on a
// bad shorthand, which is a bug in the test.
func Cluster(shorthand string) *cluster.Cluster {
	spec, err := cluster.ParseShorthand(shorthand)
	if err != nil {
		panic(err)
	}
	c, err := spec.Build()
	if err != nil {
		panic(err)
	}
	return c
}

// MultiSite builds a cluster with a cloud site of cloud nodes x perNode
// A100s, an edge site of edge servers with one V100 each and an inference
// site of infer nodes x perNode A100s; a site with no nodes is left out. It
// panics on a bad spec, which is a bug in the test.
func MultiSite(cloud, perNode, edge, infer int) *cluster.Cluster {
	spec := cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "cloud", Nodes: []cluster.NodeSpec{{Count: cloud, GPUs: perNode, GPU: "a100"}}},
	}}
	if edge > 0 {
		spec.Sites = append(spec.Sites, cluster.SiteSpec{Name: "edge", Kind: cluster.SiteEdge, Nodes: []cluster.NodeSpec{{Count: edge, GPUs: 1, GPU: "v100"}}})
	}
	if infer > 0 {
		spec.Sites = append(spec.Sites, cluster.SiteSpec{Name: "infer", Kind: cluster.SiteInference, Nodes: []cluster.NodeSpec{{Count: infer, GPUs: perNode, GPU: "a100"}}})
	}
	c, err := spec.Build()
	if err != nil {
		panic(err)
	}
	return c
}
