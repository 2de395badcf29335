package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// SiteSummary is what a multi-site run adds to a Summary (issue 4's report
// metrics). Utilisation of a site is the GPU-seconds jobs held there over the
// GPU-seconds it had available to training (capacity that inference, a busy
// edge server or a fault took away does not count against it).
type SiteSummary struct {
	Sites []SiteUtil `json:"sites"`
	// EdgeUtilization is the utilisation of all edge sites together; null
	// when the cluster has no edge site or it was never available.
	EdgeUtilization *float64 `json:"edge_utilization"`
	// Harvested GPU-hours: training on edge servers and on inference pools.
	HarvestedEdgeGPUHours      float64 `json:"harvested_edge_gpu_hours"`
	HarvestedInferenceGPUHours float64 `json:"harvested_inference_gpu_hours"`
	// Inference demand that waited for training to checkpoint before it got
	// its GPUs back: how often, and for how long in all.
	InferenceWaits       int     `json:"inference_waits"`
	InferenceWaitSeconds float64 `json:"inference_wait_seconds"`
	// Per counted job.
	CrossSiteMovesPerJob   float64 `json:"cross_site_moves_per_job"`
	IntraSiteMovesPerJob   float64 `json:"intra_site_moves_per_job"`
	MigrationSecondsPerJob float64 `json:"migration_seconds_per_job"`
	ReclaimsPerJob         float64 `json:"reclaims_per_job"`
	FaultsPerJob           float64 `json:"faults_per_job"`
}

// SiteUtil is one site's utilisation.
type SiteUtil struct {
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	GPUs        int     `json:"gpus"`
	UpFraction  float64 `json:"up_fraction"` // mean share of its GPUs available to training, 0..1
	Utilization float64 `json:"utilization"` // held / available GPU-seconds, 0..1
}

// PriorityMet is the deadline-met fraction of one priority class.
type PriorityMet struct {
	Priority         int      `json:"priority"`
	Jobs             int      `json:"jobs"`
	JobsWithDeadline int      `json:"jobs_with_deadline"`
	DeadlineMetFrac  *float64 `json:"deadline_met_frac"`
}

// summarizeSites computes the multi-site metrics; nil for a run without sites.
func summarizeSites(r *Run) *SiteSummary {
	if len(r.Sites) == 0 {
		return nil
	}
	s := &SiteSummary{InferenceWaits: r.InferenceWaits, InferenceWaitSeconds: r.InferenceWaitSeconds}
	start, end := runSpan(r)
	var edgeUp, edgeAlloc float64
	for _, su := range r.Sites {
		u := SiteUtil{Name: su.Name, Kind: su.Kind, GPUs: su.GPUs, Utilization: ratio(su.AllocGPUSeconds, su.UpGPUSeconds)}
		if end > start && su.GPUs > 0 {
			u.UpFraction = ratio(su.UpGPUSeconds, float64(su.GPUs)*(end-start))
		}
		s.Sites = append(s.Sites, u)
		if su.Kind == "edge" {
			edgeUp += su.UpGPUSeconds
			edgeAlloc += su.AllocGPUSeconds
		}
	}
	if edgeUp > 0 {
		s.EdgeUtilization = finitePtr(edgeAlloc / edgeUp)
	}
	lo, hi, _ := window(r)
	var cross, intra, reclaims, faults int
	var mig float64
	for i := range r.Jobs {
		j := &r.Jobs[i]
		s.HarvestedEdgeGPUHours += j.EdgeGPUSeconds / 3600
		s.HarvestedInferenceGPUHours += j.InferenceGPUSeconds / 3600
		if i < lo || i >= hi {
			continue
		}
		cross += j.CrossSiteMoves
		intra += j.IntraSiteMoves
		mig += j.MigrationSeconds
		reclaims += j.Reclaims
		faults += j.Faults
	}
	n := float64(hi - lo)
	s.CrossSiteMovesPerJob = ratio(float64(cross), n)
	s.IntraSiteMovesPerJob = ratio(float64(intra), n)
	s.MigrationSecondsPerJob = ratio(mig, n)
	s.ReclaimsPerJob = ratio(float64(reclaims), n)
	s.FaultsPerJob = ratio(float64(faults), n)
	return s
}

// summarizePriorities gives the deadline-met fraction per priority class,
// highest first; nil when every counted job has the same priority.
func summarizePriorities(r *Run) []PriorityMet {
	lo, hi, _ := window(r)
	by := map[int]*PriorityMet{}
	met := map[int]int{}
	for i := lo; i < hi; i++ {
		j := &r.Jobs[i]
		p := by[j.Priority]
		if p == nil {
			p = &PriorityMet{Priority: j.Priority}
			by[j.Priority] = p
		}
		p.Jobs++
		if j.Deadline > 0 {
			p.JobsWithDeadline++
			if finished(j) && j.Finish <= j.Deadline {
				met[j.Priority]++
			}
		}
	}
	if len(by) < 2 {
		return nil
	}
	var out []PriorityMet
	for k, p := range by {
		if p.JobsWithDeadline > 0 {
			p.DeadlineMetFrac = finitePtr(float64(met[k]) / float64(p.JobsWithDeadline))
		}
		out = append(out, *p)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Priority > out[b].Priority })
	return out
}

// siteRows are the table rows of multi-site runs, shaped by the sites of
// the first summary that has them; nil when none does.
func siteRows(sums []Summary) []metricRow {
	var ref *Summary
	for i := range sums {
		if sums[i].Sites != nil {
			ref = &sums[i]
			break
		}
	}
	if ref == nil {
		return nil
	}
	pick := func(f func(ss *SiteSummary) string) func(s *Summary) string {
		return func(s *Summary) string {
			if s.Sites == nil {
				return "-"
			}
			return f(s.Sites)
		}
	}
	var rows []metricRow
	for k, su := range ref.Sites.Sites {
		k := k
		rows = append(rows, metricRow{fmt.Sprintf("site %s (%s) available (%%)", su.Name, su.Kind), pick(func(ss *SiteSummary) string {
			if k >= len(ss.Sites) {
				return "-"
			}
			return fixed(100*ss.Sites[k].UpFraction, 1)
		})}, metricRow{fmt.Sprintf("site %s GPU utilisation (%%)", su.Name), pick(func(ss *SiteSummary) string {
			if k >= len(ss.Sites) {
				return "-"
			}
			return fixed(100*ss.Sites[k].Utilization, 1)
		})})
	}
	rows = append(rows,
		metricRow{"edge utilisation (%)", pick(func(ss *SiteSummary) string { return optFixed(ss.EdgeUtilization, 100, 1, "") })},
		metricRow{"harvested from edge (GPU-h)", pick(func(ss *SiteSummary) string { return fixed(ss.HarvestedEdgeGPUHours, 1) })},
		metricRow{"harvested from inference (GPU-h)", pick(func(ss *SiteSummary) string { return fixed(ss.HarvestedInferenceGPUHours, 1) })},
		metricRow{"inference waits for a reclaim", pick(func(ss *SiteSummary) string { return strconv.Itoa(ss.InferenceWaits) })},
		metricRow{"inference wait (s)", pick(func(ss *SiteSummary) string { return secs(ss.InferenceWaitSeconds) })},
		metricRow{"moves between sites per job", pick(func(ss *SiteSummary) string { return fixed(ss.CrossSiteMovesPerJob, 2) })},
		metricRow{"intra-site moves per job", pick(func(ss *SiteSummary) string { return fixed(ss.IntraSiteMovesPerJob, 2) })},
		metricRow{"migration overhead per job (s)", pick(func(ss *SiteSummary) string { return secs(ss.MigrationSecondsPerJob) })},
		metricRow{"reclaims per job", pick(func(ss *SiteSummary) string { return fixed(ss.ReclaimsPerJob, 2) })},
		metricRow{"faults per job", pick(func(ss *SiteSummary) string { return fixed(ss.FaultsPerJob, 2) })},
	)
	return rows
}

// priorityRows are the deadline-met rows per priority class.
func priorityRows(sums []Summary) []metricRow {
	seen := map[int]bool{}
	var ps []int
	for i := range sums {
		for _, p := range sums[i].Priorities {
			if !seen[p.Priority] {
				seen[p.Priority] = true
				ps = append(ps, p.Priority)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ps)))
	var rows []metricRow
	for _, p := range ps {
		p := p
		rows = append(rows, metricRow{fmt.Sprintf("deadlines met, priority %d (%%)", p), func(s *Summary) string {
			for _, c := range s.Priorities {
				if c.Priority == p {
					return optFixed(c.DeadlineMetFrac, 100, 1, "")
				}
			}
			return "-"
		}})
	}
	return rows
}

// SweepSVG draws one line per series over a swept parameter, as a
// standalone SVG document: ys[i][k] is series i at xs[k].
func SweepSVG(title, xlabel, ylabel string, xs []float64, names []string, ys [][]float64) string {
	c := &lineChart{title: title}
	lo, hi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	for i, name := range names {
		c.series = append(c.series, series{name: name, x: xs, y: ys[i]})
		for _, y := range ys[i] {
			ylo, yhi = math.Min(ylo, y), math.Max(yhi, y)
		}
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	ylo = math.Min(0, ylo)
	if !(yhi > ylo) {
		yhi = ylo + 1
	}
	xt, yt := niceTicks(lo, hi, 8), niceTicks(ylo, yhi, 6)
	c.x = axis{label: xlabel, min: xt[0], max: xt[len(xt)-1], ticks: xt, format: numberTick}
	c.y = axis{label: ylabel, min: yt[0], max: yt[len(yt)-1], ticks: yt, format: numberTick}
	return c.svg() + "\n"
}
