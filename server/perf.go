package server

import (
	"math"
	"slices"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/store"
)

// learn feeds the performance part of a job's report to the job's agent
// (goodput.Agent, the one the simulator's job agents use): a step time on
// a configuration not seen before is one more observation and refits the
// goodput model; gradient statistics replace the previous ones. Both are
// kept in the job's record. Under mu.
func (s *Server) learn(lj *liveJob, rep *api.Report) {
	r := lj.rec
	// A step time beside a partner goes to the pair model only: the
	// goodput model is the job's speed alone.
	if s.observePair(lj, rep.StepTime) == "" && rep.StepTime > 0 {
		reps := rep.Replicas
		if reps == 0 && lj.att != nil {
			reps = len(lj.att.gpus)
		}
		reps = max(reps, 1)
		local := rep.LocalBsz
		if local == 0 && lj.att != nil {
			local = r.Attempts[lj.att.n-1].LocalBsz // the batch it was given
		}
		if local == 0 && r.Spec.BatchSize > 0 {
			local = max(1, r.Spec.BatchSize/reps)
		}
		o := goodput.Observation{Nodes: max(rep.Nodes, 1), Replicas: reps, LocalBsz: local,
			ComputeTime: rep.ComputeTime, StepTime: rep.StepTime}
		if o.ComputeTime <= 0 || o.ComputeTime > o.StepTime {
			o.ComputeTime = o.StepTime
		}
		if local > 0 && lj.agent.Observe(o) {
			s.perfRecord(lj).Observations = append(r.Perf.Observations, o)
		}
	}
	if rep.GradSqr > 0 || rep.GradVar > 0 {
		smoothGrad(s.perfRecord(lj), rep.GradSqr, rep.GradVar)
	}
	s.hint(lj)
}

// gradSmoothing is the weight a moving average of gradient statistics
// keeps on the past at each report. AdaptDL smooths its gradient noise
// estimates the same way (a bias-corrected exponential moving average of
// the squared norm and of the variance, separately) because one estimate,
// from one small batch, is noisy: taken alone it made Pollux's best batch
// jump between the ends of its range from one report to the next.
const gradSmoothing = 0.95

// smoothGrad folds one report's gradient statistics into p.GradSqr and
// p.GradVar, their bias-corrected exponential moving averages: with
// n reports, the new one weighs (1-θ)/(1-θ^n) (all of it for the first),
// θ = gradSmoothing. Written as an update of the corrected average, so
// equal reports leave it exactly unchanged.
func smoothGrad(p *store.Perf, sqr, vr float64) {
	p.GradReports++
	w := 1.0 // (1-θ)/(1-θ) for the first, exactly
	if p.GradReports > 1 {
		w = (1 - gradSmoothing) / (1 - math.Pow(gradSmoothing, float64(p.GradReports)))
	}
	p.GradSqr += w * (sqr - p.GradSqr)
	p.GradVar += w * (vr - p.GradVar)
}

func (s *Server) perfRecord(lj *liveJob) *store.Perf {
	if lj.rec.Perf == nil {
		lj.rec.Perf = &store.Perf{}
	}
	return lj.rec.Perf
}

// restorePerf refits a recovered job's model from its recorded
// observations and hands the engine its hints. Under mu.
func (s *Server) restorePerf(lj *liveJob) {
	if lj.rec.Perf == nil {
		return
	}
	for _, o := range lj.rec.Perf.Observations {
		lj.agent.Observe(o)
	}
	s.hint(lj)
}

// hint hands the engine the job's current hints, once it has observations.
// Under mu.
func (s *Server) hint(lj *liveJob) {
	if lj.j == nil || !lj.agent.Fitted() {
		return
	}
	g, l := s.gradLimits(lj)
	_ = s.eng.Hint(lj.rec.ID, lj.agent.Hints(g, l))
}

// gradLimits are a job's gradient statistics and batch limits for its
// goodput model. The initial batch is the spec's batch_size, else the
// first observed global one. A job whose batch the policy adapts may grow
// it to max_batch_size, with accumulation steps where a pass would exceed
// max_local_bsz; any other job keeps its batch.
func (s *Server) gradLimits(lj *liveJob) (goodput.Grad, goodput.Limits) {
	var g goodput.Grad
	if p := lj.rec.Perf; p != nil {
		g = goodput.Grad{Sqr: p.GradSqr, Var: p.GradVar}
	}
	spec := &lj.rec.Spec
	init := spec.BatchSize
	if obs := lj.agent.Observations(); init <= 0 && len(obs) > 0 {
		init = obs[0].LocalBsz * obs[0].Replicas
	}
	l := goodput.Limits{InitBatch: init, MaxBatch: init}
	if lj.j != nil && lj.j.AdaptBatch {
		l.MaxBatch, l.MaxLocal, l.Accumulation = spec.MaxBatchSize, spec.MaxLocalBsz, true
	}
	return g, l
}

// specJob is the scheduler's job for a spec: the job adapts its batch size
// when it allows a range of them and the policy adapts batch sizes.
func (s *Server) specJob(spec *api.JobSpec, id string, submit float64) (*job.Job, error) {
	j, err := spec.Job(id, submit)
	if err != nil {
		return nil, err
	}
	j.AdaptBatch = s.adapt && spec.MaxBatchSize > spec.BatchSize
	return j, nil
}

// batchFor is the batch configuration of a launch of lj on replicas GPUs
// (the zero Batch for a job without a batch size). An adaptive job with a
// fitted model gets the configuration of highest predicted goodput, as the
// simulator's agents choose one at each (re)start; any other job its own
// batch, split into accumulation steps where a pass would exceed
// max_local_bsz. Under mu.
func (s *Server) batchFor(lj *liveJob, replicas int) localexec.Batch {
	spec := &lj.rec.Spec
	if spec.BatchSize <= 0 || replicas < 1 {
		return localexec.Batch{}
	}
	if lj.j != nil && lj.j.AdaptBatch {
		if st := s.eng.Job(lj.rec.ID); st != nil && st.Hints != nil {
			if c := st.Hints.Function().Optimize(1, replicas); c.Goodput > 0 {
				return localexec.Batch{Global: c.Batch(replicas), LocalBsz: c.LocalBsz, AccumSteps: c.AccumSteps}
			}
		}
	}
	local := divUp(spec.BatchSize, replicas)
	accum := 0
	if spec.MaxLocalBsz > 0 {
		accum = divUp(local, spec.MaxLocalBsz) - 1
	}
	local = divUp(local, accum+1)
	return localexec.Batch{Global: replicas * local * (accum + 1), LocalBsz: local, AccumSteps: accum}
}

func divUp(a, b int) int { return (a + b - 1) / b }

// perfView is the API's view of what the job's reports taught the model.
// Under mu.
func (s *Server) perfView(lj *liveJob) *api.JobPerf {
	p := lj.rec.Perf
	if p == nil {
		return nil
	}
	v := &api.JobPerf{GradSqr: p.GradSqr, GradVar: p.GradVar}
	g, l := s.gradLimits(lj)
	if g.Sqr > 0 && l.InitBatch > 0 {
		v.NoiseScale = g.Var / g.Sqr * float64(l.InitBatch)
	}
	for _, o := range p.Observations {
		v.Observations = append(v.Observations, api.PerfObservation{Nodes: o.Nodes, Replicas: o.Replicas,
			LocalBsz: o.LocalBsz, StepTime: o.StepTime, ComputeTime: o.ComputeTime})
	}
	h := lj.agent.Hints(g, l)
	if h == nil || l.InitBatch <= 0 {
		return v
	}
	m := h.Perf
	v.Model = &api.PerfModel{AlphaC: m.AlphaC, BetaC: m.BetaC, AlphaN: m.AlphaN, BetaN: m.BetaN,
		AlphaR: m.AlphaR, BetaR: m.BetaR, Gamma: m.Gamma}
	f := h.Function()
	var base float64
	for _, n := range perfCounts(lj.rec.Spec, p.Observations) {
		b := s.batchFor(lj, n)
		if b.Global == 0 { // no batch_size: the first observed batch
			b = localexec.Batch{Global: l.InitBatch, LocalBsz: divUp(l.InitBatch, n)}
		}
		gp := f.Goodput(1, n, b.LocalBsz, b.AccumSteps)
		if n == 1 {
			base = gp
		}
		pt := api.PerfPoint{GPUs: n, BatchSize: b.Global, LocalBsz: b.LocalBsz, AccumSteps: b.AccumSteps,
			StepTime: m.IterTime(1, n, b.LocalBsz, b.AccumSteps), Throughput: f.Throughput(1, n, b.LocalBsz, b.AccumSteps)}
		if base > 0 {
			pt.Speedup = gp / base
		}
		v.Predicted = append(v.Predicted, pt)
	}
	return v
}

// perfCounts are the GPU counts a job's view predicts for: 1, 2, 4, ... up
// to the most the job may get, that most, and the replica counts observed
// on one node.
func perfCounts(spec api.JobSpec, obs []goodput.Observation) []int {
	most := max(spec.GPUs, spec.MaxGPUs, 1)
	counts := []int{most}
	for n := 1; n < most; n *= 2 {
		counts = append(counts, n)
	}
	for _, o := range obs {
		if o.Nodes == 1 && o.Replicas <= most {
			counts = append(counts, o.Replicas)
		}
	}
	slices.Sort(counts)
	return slices.Compact(counts)
}
