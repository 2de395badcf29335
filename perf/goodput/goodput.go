// Package goodput is Pollux's (OSDI'21) model of a data-parallel training
// job: throughput from a handful of fitted parameters, statistical
// efficiency from the gradient noise scale, and goodput = throughput x
// efficiency, maximised over the batch size. Policies (Pollux, Optimus, AFS)
// read it through the Hints a job's agent reports; the agent fits the
// parameters from the step times it has observed (Fit), as adaptdl's agent
// does, so a policy only sees what a live system would see.
//
// Units: times in seconds, batch sizes in samples, throughput in samples per
// second, goodput in samples of the initial batch size's worth per second.
package goodput

import (
	"math"
)

// Params are the throughput model's parameters (adaptdl's PerfParams):
//
//	T_compute = AlphaC + BetaC*localBsz                 (one forward/backward pass)
//	T_network = AlphaN + BetaN*max(replicas-2, 0)       (spans nodes)
//	          = AlphaR + BetaR*max(replicas-2, 0)       (one node, replicas > 1)
//	          = 0                                       (one replica)
//	T_step    = (T_compute^Gamma + T_network^Gamma)^(1/Gamma)
//	T_iter    = accumSteps*T_compute + T_step
//
// Gamma in [1, 10] is the overlap of compute and communication (1: none,
// 10: nearly perfect).
type Params struct {
	AlphaC, BetaC float64
	AlphaN, BetaN float64
	AlphaR, BetaR float64
	Gamma         float64
}

// Grad are the gradient statistics at the job's current progress: Sqr is the
// squared norm of the true gradient and Var its variance, both per sample of
// the initial batch size; Var/Sqr x InitBatch is the gradient noise scale.
type Grad struct{ Sqr, Var float64 }

// Limits are a job's batch-size limits.
type Limits struct {
	InitBatch    int  // M0: the batch size the job was tuned for (> 0)
	MaxBatch     int  // the largest global batch size allowed (>= InitBatch)
	MinLocal     int  // the smallest per-GPU (atomic) batch; 0 = 1
	MaxLocal     int  // the largest per-GPU (atomic) batch that fits; 0 = max(MaxBatch, InitBatch)
	Accumulation bool // may use gradient accumulation steps
}

// Function is one job's goodput model.
type Function struct {
	P Params
	G Grad
	L Limits
}

// computeTime is T_compute for one atomic batch.
func (p Params) computeTime(localBsz float64) float64 {
	return p.AlphaC + p.BetaC*localBsz
}

// networkTime is T_network; a tiny positive value stands for zero so the
// p-norm stays differentiable, as in adaptdl.
func (p Params) networkTime(nodes, replicas int) float64 {
	const tiny = 1e-8
	retro := math.Max(float64(replicas-2), tiny)
	switch {
	case nodes > 1:
		return p.AlphaN + p.BetaN*retro
	case replicas > 1:
		return p.AlphaR + p.BetaR*retro
	}
	return tiny + tiny*retro
}

// IterTime is the predicted seconds of one iteration (accumSteps+1 atomic
// batches per replica, then one synchronisation).
func (p Params) IterTime(nodes, replicas, localBsz, accumSteps int) float64 {
	c := p.computeTime(float64(localBsz))
	n := p.networkTime(nodes, replicas)
	g := p.Gamma
	step := math.Pow(math.Pow(c, g)+math.Pow(n, g), 1/g)
	return float64(accumSteps)*c + step
}

// StepTime is the predicted time of the synchronising step alone (T_step),
// the quantity adaptdl's profile calls the optimiser step time.
func (p Params) StepTime(nodes, replicas, localBsz int) float64 {
	return p.IterTime(nodes, replicas, localBsz, 0)
}

// Throughput is samples per second on nodes x replicas with the given atomic
// batch and accumulation steps.
func (f Function) Throughput(nodes, replicas, localBsz, accumSteps int) float64 {
	batch := float64(replicas * localBsz * (accumSteps + 1))
	return batch / f.P.IterTime(nodes, replicas, localBsz, accumSteps)
}

// Efficiency is the statistical efficiency of a global batch: the progress
// one sample is worth relative to a sample at the initial batch size (1 at
// InitBatch, falling as the batch outgrows the gradient noise scale).
func (f Function) Efficiency(batch float64) float64 {
	scale := batch / float64(f.L.InitBatch)
	denom := f.G.Var/scale + f.G.Sqr
	gain := 1.0
	if denom > 0 {
		gain = (f.G.Var + f.G.Sqr) / denom
	}
	return gain / scale
}

// Goodput is Throughput x Efficiency: progress (initial-batch samples) per
// second.
func (f Function) Goodput(nodes, replicas, localBsz, accumSteps int) float64 {
	batch := float64(replicas * localBsz * (accumSteps + 1))
	return f.Throughput(nodes, replicas, localBsz, accumSteps) * f.Efficiency(batch)
}

// Config is a batch configuration and its predicted goodput.
type Config struct {
	Goodput    float64
	LocalBsz   int // atomic per-GPU batch
	AccumSteps int // extra accumulation passes per iteration
}

// Batch is the global batch size of c on replicas GPUs.
func (c Config) Batch(replicas int) int { return replicas * c.LocalBsz * (c.AccumSteps + 1) }

// Optimize picks the batch configuration with the highest goodput on nodes x
// replicas, as adaptdl does: 50 global batch sizes spaced geometrically from
// max(InitBatch, MinLocal x replicas) to MaxBatch, each split into an atomic
// batch and accumulation steps (at least one step on a single replica above
// the initial batch, whose gradient statistics would otherwise be unusable).
// Configurations outside [MinLocal, MaxLocal] score 0. Ties keep the smaller
// batch. replicas < 1 gives the zero Config.
func (f Function) Optimize(nodes, replicas int) Config {
	if replicas < 1 || nodes < 1 {
		return Config{}
	}
	minLocal := max(f.L.MinLocal, 1)
	maxBatchInt := max(f.L.MaxBatch, f.L.InitBatch)
	maxLocal := f.L.MaxLocal
	if maxLocal <= 0 {
		// The largest batch Optimize considers, not MaxBatch itself: with
		// MaxBatch unset (< InitBatch) no atomic batch would fit.
		maxLocal = maxBatchInt
	}
	maxBatch := float64(maxBatchInt)
	minBatch := math.Max(float64(f.L.InitBatch), float64(minLocal*replicas))
	const n, eps = 50, 1e-8
	best := Config{}
	for i := range n {
		b := minBatch
		if maxBatch > minBatch {
			b = minBatch * math.Pow(maxBatch/minBatch, float64(i)/(n-1))
		} else if i > 0 {
			break
		}
		local := b / float64(replicas)
		accum := 0
		if f.L.Accumulation {
			accum = int(math.Ceil(local/float64(maxLocal)-eps)) - 1
			if replicas == 1 && local > float64(f.L.InitBatch)+eps {
				accum = max(accum, 1)
			}
			accum = max(accum, 0)
		}
		atomic := int(math.Ceil(local/float64(accum+1) - eps))
		if atomic < minLocal || atomic > maxLocal {
			continue
		}
		if g := f.Goodput(nodes, replicas, atomic, accum); g > best.Goodput {
			best = Config{Goodput: g, LocalBsz: atomic, AccumSteps: accum}
		}
	}
	return best
}

// Speedup is the best goodput on nodes x replicas divided by the best on one
// GPU: how many times faster than alone on one GPU the job progresses. It is
// 0 for replicas < 1.
func (f Function) Speedup(nodes, replicas int) float64 {
	if replicas < 1 {
		return 0
	}
	base := f.Optimize(1, 1).Goodput
	if base <= 0 {
		return 0
	}
	return f.Optimize(nodes, replicas).Goodput / base
}

// Observation is one measured configuration of a job: seconds per atomic
// forward/backward pass (ComputeTime) and per synchronising step
// (StepTime, compute and communication overlapped), on Nodes x Replicas with
// per-GPU batch LocalBsz.
type Observation struct {
	Nodes, Replicas, LocalBsz int
	ComputeTime, StepTime     float64
}

// Hints are what a job's agent reports to the scheduler about its
// performance: the fitted model, the current gradient statistics, its
// limits, and the largest replica count it has run on (Pollux caps a job at
// twice that, so it explores gradually).
type Hints struct {
	Perf        Params
	Grad        Grad
	Limits      Limits
	MaxReplicas int  // largest replica count observed so far
	Fitted      bool // false until the agent has observed a step
}

// Function returns the goodput model the hints describe.
func (h *Hints) Function() Function { return Function{P: h.Perf, G: h.Grad, L: h.Limits} }
