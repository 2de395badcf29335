package console

import (
	"strconv"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// Both executors (tide serve and tide kube) run the scheduling engine on a
// wall clock in Unix seconds; these helpers read the parts of a snapshot
// that come from it. Call them where the engine may be read (under the
// executor's lock).

// Unix turns engine seconds on the wall clock into a time.
func Unix(s float64) time.Time {
	sec := int64(s)
	return time.Unix(sec, int64((s-float64(sec))*1e9))
}

// EngineNodes lists the cluster's nodes with each GPU's holder (job ID and
// tenant, from the engine) and whether it is down. label names a GPU on its
// node; nil numbers them from 0 on each node.
func EngineNodes(c *cluster.Cluster, eng *engine.Engine, label func(cluster.GPUID) string) []Node {
	out := make([]Node, len(c.Nodes))
	for i := range c.Nodes {
		n := &c.Nodes[i]
		gpus := make([]GPU, n.GPUs)
		for k := range gpus {
			g := n.First + cluster.GPUID(k)
			if label != nil {
				gpus[k].Label = label(g)
			} else {
				gpus[k].Label = strconv.Itoa(k)
			}
			gpus[k].Down = eng.IsDown(g)
			if st := eng.Holder(g); st != nil {
				gpus[k].Job, gpus[k].Tenant = st.Job.ID, st.Job.Tenant
			}
		}
		out[i] = Node{Name: n.Name, Site: n.Site, SiteKind: n.SiteKind, GPUType: n.GPUType, GPUs: gpus}
	}
	return out
}

// FromStatus fills a job's scheduling fields from its engine status: GPUs
// asked for and held, its place in the policy's order, the policy's reason
// (its engine times as UTC times: api.WallReason) and predicted start, the
// run time left (the engine's work left, which is seconds under the
// duration model both executors use) and its deadline.
func FromStatus(j *Job, st *engine.Status) {
	jj := st.Job
	j.GPUs, j.MinGPUs, j.MaxGPUs, j.GPUType, j.Priority = jj.GPUs, jj.MinGPUs, jj.MaxGPUs, jj.GPUType, jj.Priority
	if j.MinGPUs == j.MaxGPUs {
		j.MinGPUs, j.MaxGPUs = 0, 0
	}
	j.Held = len(st.GPUs)
	r := st.Reason()
	j.Position = r.Position
	if st.State.Waiting() || j.Reason == "" {
		j.Reason = api.WallReason(r.Text)
	}
	if r.PredictedStart > 0 && st.State.Waiting() {
		t := Unix(r.PredictedStart)
		j.PredictedStart = &t
	}
	j.RemainingS = max(0, st.Work-st.Progress)
	if jj.Deadline > 0 && j.Deadline == nil {
		t := Unix(jj.Deadline)
		j.Deadline = &t
	}
	j.Preemptions = st.Preemptions
}

// EngineReplay is the what-if input from an engine's active jobs: each with
// the work it has left, submitted now (time 0 of the replay), aged by the
// time it has already spent, on the executor's cluster. Call it under the
// executor's lock; policy and placer are the running ones' specs and round
// the executor's round, seconds.
func EngineReplay(eng *engine.Engine, c *cluster.Cluster, policy, placer string, round float64, now time.Time) *Replay {
	r := &Replay{Now: now, Cluster: c, Policy: policy, Placer: placer, Round: round, Age: map[string]float64{}}
	t0 := float64(now.UnixNano()) / 1e9
	for _, st := range eng.Active() {
		left := st.Work - st.Progress
		if left <= 0 {
			left = 1
		}
		j := *st.Job
		j.Submit, j.Work, j.Unit, j.Duration = 0, left, job.Seconds, left
		j.Utility = nil
		if j.Deadline > 0 {
			j.Deadline = max(j.Deadline-t0, 1e-3)
		}
		r.Jobs = append(r.Jobs, &j)
		r.Age[j.ID] = max(0, t0-st.Job.Submit)
	}
	return r
}
