package harvest

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/loan"
)

// deepBootPolicies registers the policies this file defines; Policies calls it.
func deepBootPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "deepboot",
		Presets: []string{"deepboot:loan=false"},
		Summary: "DeepBoot (TPDS'23): ATS-T, a multiple-choice knapsack of speedups over the training GPUs; " +
			"ATS-I, the same over idle inference GPUs lent to training, each freed inference GPU PROTECTED for a while " +
			"before it SLEEPs (lendable), reclaims taking the job whose loss costs the least speedup",
		Knobs: "loan=true: lend idle inference GPUs (false: the training cluster alone, the paper's baseline); " +
			"restart_penalty=10: D of the restart factor max(age - D x restarts, 0)/(age + D) on a changed allocation; " +
			"protect=30/15/120: an inference GPU freed after its r-th reuse stays protected min(A + B x r, C) seconds " +
			"(use with --restart-cost measured-fast for DeepBoot's fast elastic rescale)",
		Elastic:  true,
		Defaults: DefaultDeepBoot,
		Build:    contract.Typed(DefaultDeepBoot, func(_ contract.Context, k DeepBootKnobs) (*DeepBoot, error) { return NewDeepBoot(k) }),
	})
}

// DeepBoot is the scheduler of DeepBoot (TPDS'23; czq693497091/DeepBoot, on
// the Pollux simulator):
//
//   - ATS-T: the training GPUs go by a multiple-choice knapsack over the
//     active jobs, each job at one GPU count in [MinGPUs, max] or none,
//     worth its speedup (speed on n GPUs over one GPU) times, when the
//     allocation changes, the restart factor max(age - D x restarts, 0) /
//     (age + D) (D = 10 s in DeepBoot's code; Pollux uses 30).
//   - ATS-I: the jobs left without GPUs run the same knapsack over the
//     inference GPUs that are idle and SLEEPing. An inference GPU that
//     inference has just released is PROTECTED for min(A + B x r, C)
//     seconds (30 + 15 r, at most 120, r = how often inference came back to
//     it while protected): it is not lent, so inference returning soon finds
//     it free instead of reclaiming it from a training job.
//   - The knapsacks go pool by pool, one per site and GPU type (loan.Pools);
//     a job that pins a GPU type (Job.GPUType) is an item only in the pools
//     of its type, and waits when none has room: the engine refuses a plan
//     that gives a job another type than it asks for.
//   - When inference needs GPUs back, the simulator takes idle GPUs first
//     (protected ones included), then the jobs whose ReclaimCost is lowest:
//     DeepBoot's rule, the job whose loss keeps the most total speedup,
//     i.e. the one with the smallest speedup.
//   - Fast elastic rescale (AFE) is a property of the executor: run with
//     --restart-cost measured-fast (resizes cost 1-5 s).
//
// The protect timers are the one piece of state DeepBoot keeps between
// rounds: each round it sees which GPUs inference holds (Snapshot.Down)
// and records when one is released; a policy instance serves one run.
type DeepBoot struct {
	Loan         bool
	RestartDelay float64
	Protect      [3]float64 // A, B, C seconds
	name         string
	timers       *protectTimers

	// Scratch reused from round to round: the reasons' memory, and this
	// round's snapshot and pool count, for appendTerms.
	explain explain.Scratch
	terms   func(b []byte, st *engine.Status) []byte
	snap    *engine.Snapshot
	pools   int
	// lazy works out the waiting jobs' reasons when read, from each one's
	// restart factor as the round took it (explain.Waits); key takes it.
	lazy explain.Waits
	key  func(st *engine.Status) float64
	// and the round's pools and knapsacks, whose tables are the largest
	// memory of a round (a plan's Run among them: the engine is done with
	// it by the next round).
	poolBuf  []loan.Pool
	speedups loan.Speedups
}

// DeepBootKnobs are DeepBoot's knobs (`tide policies deepboot`).
type DeepBootKnobs struct {
	Loan           bool      `knob:"loan"`
	RestartPenalty float64   `knob:"restart_penalty"` // D, seconds >= 0
	Protect        []float64 `knob:"protect"`         // A/B/C seconds
}

// DefaultDeepBoot holds DeepBoot's default knobs.
var DefaultDeepBoot = DeepBootKnobs{Loan: true, RestartPenalty: 10, Protect: []float64{30, 15, 120}}

// NewDeepBoot builds DeepBoot with knobs k, refusing values out of range.
func NewDeepBoot(k DeepBootKnobs) (*DeepBoot, error) {
	d := &DeepBoot{Loan: k.Loan, RestartDelay: k.RestartPenalty, name: "deepboot", timers: &protectTimers{}}
	if d.RestartDelay < 0 {
		return nil, fmt.Errorf("policy deepboot: restart_penalty=%v: want seconds >= 0", d.RestartDelay)
	}
	p := k.Protect
	if len(p) != 3 || p[0] < 0 || p[1] < 0 || p[2] < p[0] {
		return nil, fmt.Errorf("policy deepboot: protect=%v: want A/B/C seconds, 0 <= A <= C, B >= 0", p)
	}
	copy(d.Protect[:], p)
	if !d.Loan {
		d.name += ":loan=false"
	}
	return d, nil
}

// Name implements engine.Policy.
func (d *DeepBoot) Name() string { return d.name }

// ProgressOnDemand implements engine.ProgressOnDemand: DeepBoot reads
// progress only through Snapshot.Remaining (loan.Speedup, for jobs without
// a fitted goodput model): every active job's, every round (the knapsack's
// speedups, as its rule must), so a round pulls every running job without
// fitted hints. Where the simulator keeps every job current anyway (sites
// with inference load, job agents) it changes nothing.
func (d *DeepBoot) ProgressOnDemand() bool { return true }

// ExplainsWhenRead implements engine.ExplainsWhenRead: the reasons of the
// jobs a round leaves waiting are worked out when read (explain.Waits),
// every round: a waiting job's text states its restart factor, which
// moves with its age, so writing them costs a new string for each job
// whose factor crossed a hundredth (issue 19).
func (d *DeepBoot) ExplainsWhenRead() bool { return true }

// Schedule implements engine.Policy.
func (d *DeepBoot) Schedule(s *engine.Snapshot) engine.Plan {
	d.lazy.Next(s.Round)
	d.timers.observe(s, d.Protect)
	pools := loan.AppendPools(d.poolBuf, s, d.Loan, func(site *cluster.Site, t string) int { return d.timers.lendable(s, site, t) })
	d.poolBuf = pools
	var plan engine.Plan
	plan.Run, _ = d.speedups.Knapsacks(s, pools, s.Jobs,
		func(*engine.Status, loan.Pool) float64 { return 1 },
		func(st *engine.Status) float64 { return d.RestartFactor(s, st) })
	if d.terms == nil { // made once: a closure made every round is allocated every round
		d.terms = d.appendTerms
		d.key = func(st *engine.Status) float64 { return d.RestartFactor(d.snap, st) }
	}
	d.snap, d.pools = s, len(pools)
	defer func() { d.snap = nil }()
	if explain.Lazy(s) && d.lazy.Record(s, &plan, d.key, [2]int{len(pools)}, deepBootTerms) {
		plan.Explain = &d.lazy // the waiting jobs' reasons, worked out when read
		return plan
	}
	d.explain.PlanAppend(s, &plan, nil, d.terms)
	return plan
}

// appendTerms appends a waiting job's standing to b (deepBootTerms), in
// this round's snapshot.
func (d *DeepBoot) appendTerms(b []byte, st *engine.Status) []byte {
	return deepBootTerms(b, st, d.RestartFactor(d.snap, st), [2]int{d.pools})
}

// deepBootTerms appends a waiting job's standing to b from its restart
// factor and the round's pool count (figs[0]): "restart factor 0.50; the
// knapsack over 2 pool(s) gave the GPUs to more speedup", then, for a job
// that pins a GPU type, "; only a100 GPUs" (loan.AppendPinned).
func deepBootTerms(b []byte, st *engine.Status, factor float64, figs [2]int) []byte {
	b = append(b, "restart factor "...)
	b = strconv.AppendFloat(b, factor, 'f', 2, 64)
	b = append(b, "; the knapsack over "...)
	b = strconv.AppendInt(b, int64(figs[0]), 10)
	b = append(b, " pool(s) gave the GPUs to more speedup"...)
	return loan.AppendPinned(b, st)
}

// RestartFactor is DeepBoot's (Pollux's) penalty on changing a job's
// allocation: max(age - D x restarts, 0)/(age + D), age from submission,
// restarts the launches after the first.
func (d *DeepBoot) RestartFactor(s *engine.Snapshot, st *engine.Status) float64 {
	age := s.Now - st.Job.Submit
	restarts := float64(max(st.Starts-1, 0))
	if age+d.RestartDelay <= 0 {
		return 1
	}
	return math.Max(age-d.RestartDelay*restarts, 0) / (age + d.RestartDelay)
}

// ReclaimCost implements engine.ReclaimCoster: reclaiming st loses its
// speedup on what it holds, so the job with the least goes first.
func (d *DeepBoot) ReclaimCost(s *engine.Snapshot, st *engine.Status) float64 {
	if st == nil || len(st.GPUs) == 0 {
		return 0
	}
	return loan.Speedup(s, st, len(st.GPUs), st.Alloc.GPUType)
}

// protectTimers follows each inference GPU between rounds: when inference
// released it and how often inference came back to it while protected.
type protectTimers struct {
	seen  bool
	now   float64
	down  []bool
	until []float64 // protected until this time
	reuse []int
}

// observe records the GPUs inference took or released since the last
// round. Calling it twice at one instant changes nothing. Timers kept for
// another count of GPUs start afresh: tide kube rebuilds its engine on a
// new cluster when nodes come and go, keeping the policy, and a state
// saved on the Lease may be another cluster's; indexed by the old GPUs,
// they panicked the round (index out of range in lendable).
func (p *protectTimers) observe(s *engine.Snapshot, prot [3]float64) {
	n := s.Cluster.TotalGPUs()
	fresh := !p.seen || len(p.down) != n || len(p.until) != n || len(p.reuse) != n
	if !fresh && s.Now == p.now {
		return
	}
	if fresh {
		p.down, p.until, p.reuse = make([]bool, n), make([]float64, n), make([]int, n)
		for g := range p.down {
			p.down[g] = !s.Up(cluster.GPUID(g))
		}
		p.seen, p.now = true, s.Now
		return
	}
	for g := range p.down {
		down := !s.Up(cluster.GPUID(g))
		switch {
		case down && !p.down[g] && s.Now < p.until[g]:
			p.reuse[g]++ // inference came back while it was protected: a hit
		case !down && p.down[g]:
			p.until[g] = s.Now + math.Min(prot[0]+prot[1]*float64(p.reuse[g]), prot[2])
		}
		p.down[g] = down
	}
	p.now = s.Now
}

// lendable counts the GPUs of an inference site that are up and sleeping
// (not protected) now.
func (p *protectTimers) lendable(s *engine.Snapshot, site *cluster.Site, gpuType string) int {
	k := 0
	for _, id := range site.Nodes {
		nd := &s.Cluster.Nodes[id]
		if nd.GPUType != gpuType {
			continue
		}
		for i := 0; i < nd.GPUs; i++ {
			g := nd.First + cluster.GPUID(i)
			if s.Up(g) && s.Now >= p.until[g] {
				k++
			}
		}
	}
	return k
}
