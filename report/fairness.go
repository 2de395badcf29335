package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
)

// Same reports whether s and o describe the same cluster state (every
// field but the time).
func (s *Sample) Same(o *Sample) bool {
	return s.Allocated == o.Allocated && s.Useful == o.Useful && s.Queued == o.Queued &&
		s.Running == o.Running && s.Fragmented == o.Fragmented && s.Tenants == o.Tenants
}

// Pool names the free GPUs of one type in one site.
type Pool struct{ Site, Type string }

// Demand is what a waiting job needs: GPUs of Type ("" = any type).
type Demand struct {
	Type string
	GPUs int
}

// Fragmented counts the GPUs free but unusable for the waiting jobs: a
// pool's free GPUs count when some waiting job could run on its type but
// every such job needs more GPUs than the pool has free (jobs never span
// sites, so each site's pool stands alone). Free GPUs that no waiting job
// may use at all (other types only) are idle, not fragmented.
func Fragmented(free map[Pool]int, waiting []Demand) int {
	minAny := math.MaxInt
	minOf := map[string]int{}
	for _, d := range waiting {
		if d.Type == "" {
			minAny = min(minAny, d.GPUs)
		} else if m, ok := minOf[d.Type]; !ok || d.GPUs < m {
			minOf[d.Type] = d.GPUs
		}
	}
	n := 0
	for p, f := range free {
		need := minAny
		if m, ok := minOf[p.Type]; ok {
			need = min(need, m)
		}
		if f > 0 && need != math.MaxInt && need > f {
			n += f
		}
	}
	return n
}

// FairnessSummary holds a run's fairness metrics. Definitions (counted
// jobs as in Summary):
//
//   - rho, finish-time fairness (Themis, NSDI'20): JCT / T_independent, where
//     T_independent is the job's JCT alone (JobRecord.LowerBound) stretched to
//     a 1/N share of the cluster: LowerBound x max(1, GPUs x N / TotalGPUs),
//     N the time-averaged number of active jobs (running + queued, from the
//     timeline) between its submission and its finish. rho <= 1 means the job
//     did at least as well as on its own fair share. Over counted finished
//     jobs with a known bound; RhoMax, RhoMean and RhoOver1 (the fraction
//     with rho > 1) are null when there are none.
//   - Jain's index (Jain, Chiu, Hawe 1984) J(x) = (sum x)^2 / (n sum x^2), in
//     (0, 1], 1 when all x are equal: JainJobs over the jobs' 1/rho, and
//     JainTenants over the tenants' mean 1/rho (only with two tenants or more).
//   - Tenants: per tenant, its counted jobs, GPU-seconds held (all its jobs),
//     its time-averaged share of the cluster's GPUs over the run's span and
//     its share of all GPU-seconds allocated; the share over time is in the
//     timeline (Sample.Tenants). Only with two tenants or more.
//   - Fragmentation: Sample.Fragmented (see Fragmented) averaged over the
//     run's span, as a fraction of the cluster's GPUs, and its maximum.
type FairnessSummary struct {
	RhoMax      *float64      `json:"rho_max"`
	RhoMean     *float64      `json:"rho_mean"`
	RhoOver1    *float64      `json:"rho_over_1_frac"`
	JainJobs    *float64      `json:"jain_index_jobs"`
	JainTenants *float64      `json:"jain_index_tenants,omitempty"`
	Tenants     []TenantShare `json:"tenants,omitempty"`

	FragmentedFrac float64 `json:"fragmented_frac"`
	FragmentedMax  int     `json:"fragmented_max_gpus"`
}

// TenantShare is one tenant's part of a run.
type TenantShare struct {
	Tenant     string   `json:"tenant"`
	Jobs       int      `json:"jobs"`        // counted jobs
	GPUSeconds float64  `json:"gpu_seconds"` // allocated to all its jobs
	Share      float64  `json:"share"`       // GPU-seconds / (TotalGPUs x span), 0..1
	AllocShare float64  `json:"alloc_share"` // GPU-seconds / all GPU-seconds allocated, 0..1
	RhoMean    *float64 `json:"rho_mean"`    // mean rho of its counted finished jobs
}

// Rhos returns the finish-time fairness of each counted finished job with a
// known lower bound (see FairnessSummary), by job index; NaN for the rest.
func Rhos(r *Run) []float64 {
	out := make([]float64, len(r.Jobs))
	lo, hi, _ := window(r)
	active := activeIntegral(r.Timeline)
	for i := range r.Jobs {
		out[i] = math.NaN()
		j := &r.Jobs[i]
		if i < lo || i >= hi || !finished(j) || !(j.LowerBound > 0) || r.TotalGPUs <= 0 {
			continue
		}
		n := 1.0
		if span := j.Finish - j.Submit; span > 0 && len(r.Timeline) > 0 {
			n = math.Max(1, (active(j.Finish)-active(j.Submit))/span)
		}
		tid := j.LowerBound * math.Max(1, float64(j.GPUs)*n/float64(r.TotalGPUs))
		out[i] = (j.Finish - j.Submit) / tid
	}
	return out
}

// activeIntegral returns t -> integral of (Running + Queued) from the first
// sample to t (0 before it; the last sample holds on).
func activeIntegral(tl []Sample) func(t float64) float64 {
	cum := make([]float64, len(tl))
	for i := 1; i < len(tl); i++ {
		cum[i] = cum[i-1] + float64(tl[i-1].Running+tl[i-1].Queued)*(tl[i].T-tl[i-1].T)
	}
	return func(t float64) float64 {
		i := sort.Search(len(tl), func(i int) bool { return tl[i].T > t }) - 1
		if i < 0 {
			return 0
		}
		return cum[i] + float64(tl[i].Running+tl[i].Queued)*(t-tl[i].T)
	}
}

// Jain is Jain's fairness index of xs, (sum x)^2 / (n sum x^2); NaN for no
// values or all zeros.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	return s * s / (float64(len(xs)) * s2)
}

// summarizeFairness computes r's fairness metrics.
func summarizeFairness(r *Run) *FairnessSummary {
	f := &FairnessSummary{}
	rhos := Rhos(r)
	var inv []float64
	sum, over, maxRho := 0.0, 0, 0.0
	type acc struct {
		jobs   int
		gpuSec float64
		inv    []float64
		rhoSum float64
	}
	tenants := map[string]*acc{}
	lo, hi, _ := window(r)
	allocated := 0.0
	for i := range r.Jobs {
		j := &r.Jobs[i]
		a := tenants[j.Tenant]
		if a == nil {
			a = &acc{}
			tenants[j.Tenant] = a
		}
		a.gpuSec += j.GPUSeconds
		allocated += j.GPUSeconds
		if i >= lo && i < hi {
			a.jobs++
		}
		if rho := rhos[i]; !math.IsNaN(rho) {
			inv = append(inv, 1/rho)
			a.inv = append(a.inv, 1/rho)
			a.rhoSum += rho
			sum += rho
			maxRho = math.Max(maxRho, rho)
			if rho > 1 {
				over++
			}
		}
	}
	if n := len(inv); n > 0 {
		f.RhoMax, f.RhoMean = finitePtr(maxRho), finitePtr(sum/float64(n))
		f.RhoOver1, f.JainJobs = finitePtr(float64(over)/float64(n)), finitePtr(Jain(inv))
	}
	start, end := runSpan(r)
	if len(tenants) > 1 {
		var means []float64
		for _, name := range slices.Sorted(maps.Keys(tenants)) {
			a := tenants[name]
			ts := TenantShare{Tenant: name, Jobs: a.jobs, GPUSeconds: a.gpuSec, AllocShare: ratio(a.gpuSec, allocated)}
			if r.TotalGPUs > 0 && end > start {
				ts.Share = ratio(a.gpuSec, float64(r.TotalGPUs)*(end-start))
			}
			if len(a.inv) > 0 {
				ts.RhoMean = finitePtr(a.rhoSum / float64(len(a.inv)))
				m := 0.0
				for _, x := range a.inv {
					m += x
				}
				means = append(means, m/float64(len(a.inv)))
			}
			f.Tenants = append(f.Tenants, ts)
		}
		if len(means) > 1 {
			f.JainTenants = finitePtr(Jain(means))
		}
	}
	if r.TotalGPUs > 0 && end > start {
		frag := 0.0
		for i, smp := range r.Timeline {
			next := end
			if i+1 < len(r.Timeline) {
				next = r.Timeline[i+1].T
			}
			frag += float64(smp.Fragmented) * math.Max(0, math.Min(next, end)-math.Max(smp.T, start))
			f.FragmentedMax = max(f.FragmentedMax, int(smp.Fragmented))
		}
		f.FragmentedFrac = ratio(frag, float64(r.TotalGPUs)*(end-start))
	}
	return f
}

// fairnessRows are the table rows of the fairness metrics; tenant rows
// list the tenants of the first run with several, most GPU-seconds first,
// at most maxTenantRows of them.
func fairnessRows(sums []Summary) []metricRow {
	pick := func(f func(fs *FairnessSummary) string) func(s *Summary) string {
		return func(s *Summary) string {
			if s.Fairness == nil {
				return "-"
			}
			return f(s.Fairness)
		}
	}
	rows := []metricRow{
		{"finish-time fairness rho, max", pick(func(f *FairnessSummary) string { return optFixed(f.RhoMax, 1, 2, "") })},
		{"finish-time fairness rho, mean", pick(func(f *FairnessSummary) string { return optFixed(f.RhoMean, 1, 2, "") })},
		{"jobs with rho > 1 (%)", pick(func(f *FairnessSummary) string { return optFixed(f.RhoOver1, 100, 1, "") })},
		{"Jain's index over jobs (1/rho)", pick(func(f *FairnessSummary) string { return optFixed(f.JainJobs, 1, 3, "") })},
		{"fragmented GPUs, time-avg (%)", pick(func(f *FairnessSummary) string { return fixed(100*f.FragmentedFrac, 2) })},
		{"fragmented GPUs, max", pick(func(f *FairnessSummary) string { return fmt.Sprint(f.FragmentedMax) })},
	}
	var ref *FairnessSummary
	for i := range sums {
		if f := sums[i].Fairness; f != nil && len(f.Tenants) > 1 {
			ref = f
			break
		}
	}
	if ref == nil {
		return rows
	}
	rows = append(rows, metricRow{"Jain's index over tenants", pick(func(f *FairnessSummary) string { return optFixed(f.JainTenants, 1, 3, "") })})
	top := slices.Clone(ref.Tenants)
	slices.SortStableFunc(top, func(a, b TenantShare) int { return -cmp.Compare(a.GPUSeconds, b.GPUSeconds) })
	if len(top) > maxTenantRows {
		top = top[:maxTenantRows]
	}
	for _, t := range top {
		name := t.Tenant
		if name == "" {
			name = "(none)"
		}
		rows = append(rows, metricRow{fmt.Sprintf("tenant %s GPU share (%%)", name), pick(func(f *FairnessSummary) string {
			for _, ts := range f.Tenants {
				if ts.Tenant == t.Tenant {
					return fixed(100*ts.Share, 1)
				}
			}
			return "-"
		})})
	}
	return rows
}

// maxTenantRows caps the per-tenant rows of the table.
const maxTenantRows = 8

// tenantChart plots the GPUs each tenant holds over time, as a percentage
// of the cluster, for one run: the maxTenantRows tenants with the most
// GPU-seconds, the others summed as "others". Nil when the run has no
// per-tenant timeline.
func tenantChart(r *Run) *lineChart {
	f := summarizeFairness(r)
	if len(f.Tenants) < 2 || r.TotalGPUs <= 0 {
		return nil
	}
	top := slices.Clone(f.Tenants)
	slices.SortStableFunc(top, func(a, b TenantShare) int { return -cmp.Compare(a.GPUSeconds, b.GPUSeconds) })
	shown := map[string]bool{}
	names := []string{}
	for i, t := range top {
		if i == maxTenantRows {
			break
		}
		shown[t.Tenant] = true
		names = append(names, t.Tenant)
	}
	if len(top) > maxTenantRows {
		names = append(names, "\x00others")
	}
	sub := make([]*Run, len(names))
	replays := make([]*TenantReplay, len(names))
	for k, name := range names {
		label := name
		switch name {
		case "":
			label = "(none)"
		case "\x00others":
			label = "others"
		}
		sub[k] = &Run{Policy: label, TotalGPUs: r.TotalGPUs, Jobs: r.Jobs, Timeline: r.Timeline}
		replays[k] = r.TenantReplay()
	}
	index := make(map[string]int, len(r.TenantNames))
	for k, t := range r.TenantNames {
		index[t] = k
	}
	c := timeChart(sub, "GPU share per tenant over time: "+r.Policy, "GPUs held (% of cluster)",
		func(run *Run, s *Sample) float64 {
			k := slices.Index(sub, run)
			gpus := replays[k].At(s)
			name := names[k]
			n := 0
			if name == "\x00others" {
				for t, g := range gpus {
					if !shown[r.TenantNames[t]] {
						n += g
					}
				}
			} else if t, ok := index[name]; ok {
				n = gpus[t]
			}
			return 100 * float64(n) / float64(r.TotalGPUs)
		}, false)
	c.y.format = func(v float64) string { return numberTick(v) + "%" }
	return c
}

// fragChart plots the fragmented GPUs of every run over time.
func fragChart(runs []*Run) *lineChart {
	return timeChart(runs, "Fragmented GPUs over time (free, but no waiting job fits them)", "fragmented GPUs",
		func(_ *Run, s *Sample) float64 { return float64(s.Fragmented) }, true)
}
