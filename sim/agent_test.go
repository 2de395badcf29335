package sim_test

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/sim"
)

// agentModel is a perf.Observer whose job progresses 1/s on the job's own
// batch configuration (LocalBsz 0) and 2/s on any configuration its agent
// picks, and which records the batch of every observation with the
// progress it was made at. Its step times follow known goodput parameters,
// so the agent's fit finds a best batch above the initial one.
type agentModel struct {
	p   goodput.Params
	obs *[][2]float64 // (LocalBsz observed, progress)
}

func (agentModel) Name() string              { return "agent-test" }
func (agentModel) Check(*job.Job) error      { return nil }
func (agentModel) Work(j *job.Job) float64   { return j.Work }
func (agentModel) Costs(*job.Job) perf.Costs { return perf.Costs{} }
func (agentModel) Limits(*job.Job) goodput.Limits {
	return goodput.Limits{InitBatch: 32, MaxBatch: 4096, MinLocal: 8, MaxLocal: 256, Accumulation: true}
}

func (m agentModel) Rate(_ *job.Job, a perf.Alloc, _ float64) (float64, float64) {
	if a.LocalBsz > 0 {
		return 2, math.Inf(1)
	}
	return 1, math.Inf(1)
}

func (m agentModel) Observe(j *job.Job, a perf.Alloc, x float64) (goodput.Observation, goodput.Grad, bool) {
	local := a.LocalBsz
	if local == 0 {
		local = 32 / a.GPUs()
	}
	*m.obs = append(*m.obs, [2]float64{float64(a.LocalBsz), x})
	step := m.p.StepTime(a.Nodes(), a.GPUs(), local)
	return goodput.Observation{Nodes: a.Nodes(), Replicas: a.GPUs(), LocalBsz: local,
		ComputeTime: m.p.AlphaC + m.p.BetaC*float64(local), StepTime: step}, goodput.Grad{Sqr: 1, Var: 100}, true
}

// TestAgentRetunesEveryRound: as the Pollux artifact's job re-picks its
// batch at the end of every 60 s step from the model refitted on what it
// has measured, an adaptive job that keeps its GPUs and crosses no epoch
// changes its batch at the first round after its first measurement, and
// measures the new configuration only by the round after that (a policy
// learns of it then, not earlier). Job of 300 s of work at 1/s on its own
// batch, submitted at 0: started at the first round (60), re-picked at 120
// (progress 60), then 2/s: done at 120 + 240/2 = 240. Without the
// per-round agent it would run at 1/s until 360.
func TestAgentRetunesEveryRound(t *testing.T) {
	var obs [][2]float64
	m := agentModel{p: goodput.Params{AlphaC: 0.05, BetaC: 0.01, AlphaN: 0.2, BetaN: 0.01, AlphaR: 0.05, BetaR: 0.005, Gamma: 1.5}, obs: &obs}
	j := enginetest.Job("a").Elastic(4, 4, 4).Seconds(300).Obj()
	j.AdaptBatch = true
	run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x4:t4"), Model: m, Policy: growAt(math.Inf(1)),
		Placer: place.Pack{}, Round: 60, Agents: true}, []*job.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	if f := run.Jobs[0].Finish; f != 240 {
		t.Errorf("finish %v, want 240 (batch re-picked at the round at 120)", f)
	}
	// Measurements: the job's own batch at the start (progress 0) and at
	// 120 (nothing new), then the picked batch at 180 (progress 180).
	var picked [][2]float64
	for _, o := range obs {
		if o[0] > 0 {
			picked = append(picked, o)
		}
	}
	if len(obs) == 0 || obs[0] != [2]float64{0, 0} {
		t.Fatalf("observations %v: want the job's own batch measured first, at progress 0", obs)
	}
	if len(picked) == 0 || picked[0][1] != 180 {
		t.Errorf("observations %v: want the picked batch first measured at the round at 180 (progress 180)", obs)
	}
}
