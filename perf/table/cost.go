package table

import (
	"math"

	"github.com/tide-sched/tide/perf"
)

// ElasticFlow's overhead model, in seconds, for clusters of fewer than 256
// GPUs. Source: pkusys/ElasticFlow, ElasticFlow/scheduler/utils.py,
// estimate_overhead(num_gpu, restart, cache):
//
//	overhead = 2                      (7 on clusters of >= 256 GPUs)
//	if cache: return overhead
//	if restart: overhead += 27        (+20 more on clusters of >= 256 GPUs)
//	overhead += (log2(num_gpu) + 1) * 2
//
// Its simulator (scheduler.py, the ElasticFlow policy loop) charges every
// running job with GPUs this overhead at each scheduling event, with restart
// true on every scheduling_slot-th event (a periodic full relaunch of the
// trainers). The shared policy notes (../shared/docs/POLICIES.md, beside
// the repository) summarise it as "2 s + 27 s on restart +
// 2(log2 n + 1) s".
const (
	efBaseOverhead    = 2.0
	efRestartOverhead = 27.0
)

// ElasticFlowRestartCost is ElasticFlow's overhead, in seconds, of a full
// restart of a job on n GPUs: 2 + 27 + 2(log2 n + 1). n < 1 counts as 1;
// log2 is real-valued for counts that are not powers of two, as in Python's
// math.log(n, 2).
//
// Source: pkusys/ElasticFlow, ElasticFlow/scheduler/utils.py,
// estimate_overhead(num_gpu, restart=True) for clusters of fewer than 256
// GPUs; ../shared/docs/POLICIES.md.
func ElasticFlowRestartCost(n int) float64 {
	return efBaseOverhead + efRestartOverhead + efScaleTerm(n)
}

// ElasticFlowRescaleCost is ElasticFlow's overhead, in seconds, of
// (re)launching a job on n GPUs without a full restart (a start or a
// resize): 2 + 2(log2 n + 1); estimate_overhead(num_gpu, restart=False).
func ElasticFlowRescaleCost(n int) float64 {
	return efBaseOverhead + efScaleTerm(n)
}

func efScaleTerm(n int) float64 {
	if n < 1 {
		n = 1
	}
	return 2 * (math.Log2(float64(n)) + 1)
}

// ElasticFlowCosts are ElasticFlow's overheads for a job on n GPUs: start and
// resize cost ElasticFlowRescaleCost(n), a restart after preemption
// ElasticFlowRestartCost(n). Use it as Table.CostsByGPUs.
func ElasticFlowCosts(n int) perf.Costs {
	return perf.Costs{
		Start:   ElasticFlowRescaleCost(n),
		Restart: ElasticFlowRestartCost(n),
		Resize:  ElasticFlowRescaleCost(n),
	}
}
