package report

import (
	"math"
	"sort"
)

// Summary is one run's headline metrics. The JSON names are a contract:
// scripts read name, jobs, finished, avg_jct_s, median_jct_s, p95_jct_s and
// p99_jct_s, so they never change meaning or disappear.
//
// Definitions (all times in seconds, "counted" jobs are those inside
// Run.Window, or all jobs when there is no window):
//
//   - JCT (job completion time) = Finish - Submit, over counted jobs that
//     finished (Finish >= 0). AvgJCT and the percentiles are 0 when no counted
//     job finished.
//   - Percentiles interpolate linearly between the two closest ranks, like
//     numpy.percentile's default: for n sorted values x[0..n-1] and p in
//     [0, 100], h = (n-1)·p/100 and the result is
//     x[⌊h⌋] + (h-⌊h⌋)·(x[⌊h⌋+1]-x[⌊h⌋]).
//   - Queueing delay = Start - Submit: the wait before the first start, over
//     counted jobs that started; jobs never started are left out and counted
//     in NeverStarted. The total time waiting (JobRecord.WaitSeconds: pending
//     or preempted, holding no GPUs) averages over every counted job, those
//     that never finished waiting until the end of the run.
//   - Makespan = last Finish - first Submit. Utilisation = GPU-seconds
//     allocated (sum of JobRecord.GPUSeconds) / (TotalGPUs × span), where the
//     span runs from the first Submit to the end of the run: the later of
//     the last Finish and the last timeline sample. Useful utilisation uses
//     UsefulGPUSeconds instead. These three describe the cluster, so they
//     always use every job of the run, even when a window is set.
//   - Per-job rates (preemptions, restarts, resizes, restart seconds) divide
//     the counted jobs' totals by Jobs, finished or not.
//   - A deadline (JobRecord.Deadline > 0) is met when the job finished at or
//     before it; unfinished jobs miss theirs. DeadlineMetFrac is null when no
//     counted job has a deadline.
//   - LowerBoundAvgJCT is the mean JobRecord.LowerBound over counted finished
//     jobs whose bound is known (> 0); JCTOverLowerBound is the mean JCT of
//     those same jobs divided by it (equal to AvgJCT/LowerBoundAvgJCT when
//     every bound is known). Both are null when no finished job has a bound.
//
// Every float is finite: divisions by zero give 0 (or null for the pointers).
type Summary struct {
	Name      string  `json:"name"`         // Run.Policy
	Jobs      int     `json:"jobs"`         // counted jobs
	Finished  int     `json:"finished"`     // counted jobs that finished
	AvgJCT    float64 `json:"avg_jct_s"`    // mean JCT of finished counted jobs
	MedianJCT float64 `json:"median_jct_s"` // 50th percentile JCT
	P95JCT    float64 `json:"p95_jct_s"`    // 95th percentile JCT
	P99JCT    float64 `json:"p99_jct_s"`    // 99th percentile JCT

	Unfinished   int `json:"unfinished"`    // counted jobs without a finish time
	NeverStarted int `json:"never_started"` // counted jobs that never started
	Declined     int `json:"declined"`      // counted jobs in state "declined"

	AvgQueue float64 `json:"avg_queue_s"` // mean first-start delay of started counted jobs
	P99Queue float64 `json:"p99_queue_s"` // 99th percentile of the same
	AvgWait  float64 `json:"avg_wait_s"`  // mean total time waiting (pending or preempted) of counted jobs

	LowerBoundAvgJCT  *float64 `json:"lower_bound_avg_jct_s"` // mean no-contention JCT; null if unknown
	JCTOverLowerBound *float64 `json:"jct_over_lower_bound"`  // mean JCT / LowerBoundAvgJCT; null if unknown

	Makespan          float64 `json:"makespan_s"`         // last finish - first submit (whole run)
	Utilization       float64 `json:"utilization"`        // allocated GPU-seconds / (GPUs × span), 0..1
	UsefulUtilization float64 `json:"useful_utilization"` // useful GPU-seconds / (GPUs × span), 0..1
	GPUHours          float64 `json:"gpu_hours"`          // GPU-hours charged to the run's jobs (a shared GPU's parts, docs/sharing.md)

	PreemptionsPerJob    float64 `json:"preemptions_per_job"`
	RestartsPerJob       float64 `json:"restarts_per_job"`
	ResizesPerJob        float64 `json:"resizes_per_job"`
	RestartSecondsPerJob float64 `json:"restart_seconds_per_job"`

	JobsWithDeadline int      `json:"jobs_with_deadline"`
	DeadlineMetFrac  *float64 `json:"deadline_met_frac"` // met / JobsWithDeadline; null when none

	Events int `json:"events"` // Run.Events
	Rounds int `json:"rounds"` // Run.Rounds
	// Fallbacks is the rounds in which the policy fell back to a simpler
	// rule (Run.Fallbacks); Warnings lists them and any other warnings by
	// reason. Both absent when there were none.
	Fallbacks int            `json:"fallbacks,omitempty"`
	Warnings  []WarningCount `json:"warnings,omitempty"`

	// Window is the effective [lo, hi) job-index window, clamped to the run's
	// jobs; absent when all jobs count.
	Window []int `json:"window,omitempty"`
	// Sites holds the multi-site metrics (deadline.go); absent otherwise.
	Sites *SiteSummary `json:"sites,omitempty"`
	// Priorities is the deadline-met fraction per priority class; absent
	// when every job has the same priority.
	Priorities []PriorityMet `json:"priorities,omitempty"`
	// Fairness holds finish-time fairness, Jain's index, per-tenant
	// shares and fragmentation (fairness.go).
	Fairness *FairnessSummary `json:"fairness,omitempty"`
	// Sharing holds what GPU sharing saved (sharing.go); absent when no
	// job shared its GPUs.
	Sharing *SharingSummary `json:"sharing,omitempty"`
}

// window returns the half-open range of job indices that count in r.
func window(r *Run) (lo, hi int, windowed bool) {
	n := len(r.Jobs)
	if r.Window[1] <= r.Window[0] {
		return 0, n, false
	}
	lo, hi = max(r.Window[0], 0), min(r.Window[1], n)
	if hi < lo {
		hi = lo
	}
	return lo, hi, true
}

func finished(j *JobRecord) bool { return j.Finish >= 0 }
func started(j *JobRecord) bool  { return j.Start >= 0 }

// countedJCTs returns the sorted JCTs of r's counted finished jobs and the
// number of counted jobs.
func countedJCTs(r *Run) (jcts []float64, counted int) {
	lo, hi, _ := window(r)
	for i := lo; i < hi; i++ {
		if j := &r.Jobs[i]; finished(j) {
			jcts = append(jcts, j.Finish-j.Submit)
		}
	}
	sort.Float64s(jcts)
	return jcts, hi - lo
}

// runSpan returns the first submission and the end of r: the later of the
// last finish and the last timeline sample.
func runSpan(r *Run) (start, end float64) {
	start, end = math.Inf(1), math.Inf(-1)
	for i := range r.Jobs {
		j := &r.Jobs[i]
		start = math.Min(start, j.Submit)
		if finished(j) {
			end = math.Max(end, j.Finish)
		}
	}
	if n := len(r.Timeline); n > 0 {
		if math.IsInf(start, 1) {
			start = r.Timeline[0].T
		}
		end = math.Max(end, r.Timeline[n-1].T)
	}
	if math.IsInf(start, 0) || math.IsInf(end, 0) {
		return 0, 0
	}
	return start, end
}

// Summarize computes r's metrics; see Summary for the definitions.
func Summarize(r *Run) Summary {
	s := Summary{Name: r.Policy, Events: r.Events, Rounds: r.Rounds, Fallbacks: r.Fallbacks(), Warnings: r.Warnings}
	lo, hi, windowed := window(r)
	if windowed {
		s.Window = []int{lo, hi}
	}
	s.Jobs = hi - lo

	var jcts, queues []float64
	var jctSum, queueSum, waitSum float64
	var preempt, restarts, resizes int
	var restartSec float64
	var met int
	var lbSum, lbJCTSum float64
	var lbN int
	for i := lo; i < hi; i++ {
		j := &r.Jobs[i]
		if finished(j) {
			jct := j.Finish - j.Submit
			jcts = append(jcts, jct)
			jctSum += jct
			if j.LowerBound > 0 {
				lbSum += j.LowerBound
				lbJCTSum += jct
				lbN++
			}
		}
		if started(j) {
			q := j.Start - j.Submit
			queues = append(queues, q)
			queueSum += q
		} else {
			s.NeverStarted++
		}
		waitSum += j.WaitSeconds
		if j.State == "declined" {
			s.Declined++
		}
		if j.Deadline > 0 {
			s.JobsWithDeadline++
			if finished(j) && j.Finish <= j.Deadline {
				met++
			}
		}
		preempt += j.Preemptions
		restarts += j.Restarts
		resizes += j.Resizes
		restartSec += j.RestartSeconds
	}
	s.Finished = len(jcts)
	s.Unfinished = s.Jobs - s.Finished
	sort.Float64s(jcts)
	sort.Float64s(queues)
	s.AvgJCT = ratio(jctSum, float64(len(jcts)))
	s.MedianJCT = percentile(jcts, 50)
	s.P95JCT = percentile(jcts, 95)
	s.P99JCT = percentile(jcts, 99)
	s.AvgQueue = ratio(queueSum, float64(len(queues)))
	s.P99Queue = percentile(queues, 99)
	s.AvgWait = ratio(waitSum, float64(s.Jobs))
	if lbN > 0 {
		s.LowerBoundAvgJCT = finitePtr(lbSum / float64(lbN))
		s.JCTOverLowerBound = finitePtr(ratio(lbJCTSum, lbSum))
	}
	if s.JobsWithDeadline > 0 {
		s.DeadlineMetFrac = finitePtr(float64(met) / float64(s.JobsWithDeadline))
	}
	n := float64(s.Jobs)
	s.PreemptionsPerJob = ratio(float64(preempt), n)
	s.RestartsPerJob = ratio(float64(restarts), n)
	s.ResizesPerJob = ratio(float64(resizes), n)
	s.RestartSecondsPerJob = ratio(restartSec, n)

	// Cluster-wide numbers: every job of the run, window or not.
	first, lastFinish := math.Inf(1), math.Inf(-1)
	var gpuSec, usefulSec float64
	for i := range r.Jobs {
		j := &r.Jobs[i]
		first = math.Min(first, j.Submit)
		if finished(j) {
			lastFinish = math.Max(lastFinish, j.Finish)
		}
		gpuSec += j.GPUSeconds
		usefulSec += j.UsefulGPUSeconds
	}
	if !math.IsInf(lastFinish, 0) && !math.IsInf(first, 0) {
		s.Makespan = finite(lastFinish - first)
	}
	s.GPUHours = gpuSec / 3600
	start, end := runSpan(r)
	capacity := float64(r.TotalGPUs) * (end - start)
	if r.TotalGPUs > 0 && end > start {
		s.Utilization = ratio(gpuSec, capacity)
		s.UsefulUtilization = ratio(usefulSec, capacity)
	}
	s.Sites = summarizeSites(r)
	s.Priorities = summarizePriorities(r)
	s.Fairness = summarizeFairness(r)
	s.Sharing = summarizeSharing(r)
	return s
}

// SummarizeAll summarises each run in order.
func SummarizeAll(runs []*Run) []Summary {
	sums := make([]Summary, len(runs))
	for i, r := range runs {
		sums[i] = Summarize(r)
	}
	return sums
}

// percentile returns the p-th percentile (p in [0, 100]) of the ascending
// values xs, interpolating linearly between the closest ranks (numpy's
// default "linear" method): with h = (n-1)·p/100, it is
// xs[⌊h⌋] + (h-⌊h⌋)·(xs[⌊h⌋+1]-xs[⌊h⌋]). It is 0 for no values.
func percentile(xs []float64, p float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	h := float64(n-1) * p / 100
	if !(h > 0) {
		return finite(xs[0])
	}
	if h >= float64(n-1) {
		return finite(xs[n-1])
	}
	i := int(math.Floor(h))
	return finite(xs[i] + (h-float64(i))*(xs[i+1]-xs[i]))
}

// ratio is a/b, or 0 when b is 0 or the result is not finite.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return finite(a / b)
}

// finite returns x, or 0 when x is NaN or infinite.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// finitePtr returns &x, or nil when x is NaN or infinite.
func finitePtr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}
