package report

import "strconv"

// SharingSummary is what GPU sharing did in a run (docs/sharing.md):
// jobs that held part of their GPUs (fractional jobs) or shared them as a
// packed pair. Present only when some job shared.
type SharingSummary struct {
	// Jobs counts the run's jobs that ever shared their GPUs.
	Jobs int `json:"jobs"`
	// SavedGPUHours is what the sharing jobs did not hold but would have
	// alone on the same GPUs for the same time (JobRecord.SharedGPUSeconds);
	// Summary.GPUHours is what all jobs were charged.
	SavedGPUHours float64 `json:"saved_gpu_hours"`
}

// summarizeSharing sums r's sharing, nil when no job shared.
func summarizeSharing(r *Run) *SharingSummary {
	s := &SharingSummary{}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if j.SharedGPUSeconds > 0 {
			s.Jobs++
			s.SavedGPUHours += j.SharedGPUSeconds / 3600
		}
	}
	if s.Jobs == 0 {
		return nil
	}
	return s
}

// sharingRows are the table's sharing rows, only when some run shared.
func sharingRows(sums []Summary) []metricRow {
	for i := range sums {
		if sums[i].Sharing != nil {
			pick := func(f func(*SharingSummary) string) func(*Summary) string {
				return func(s *Summary) string {
					if s.Sharing == nil {
						return "-"
					}
					return f(s.Sharing)
				}
			}
			return []metricRow{
				{"jobs sharing GPUs", pick(func(ss *SharingSummary) string { return strconv.Itoa(ss.Jobs) })},
				{"GPU-hours charged", func(s *Summary) string { return fixed(s.GPUHours, 1) }},
				{"GPU-hours saved by sharing", pick(func(ss *SharingSummary) string { return fixed(ss.SavedGPUHours, 1) })},
			}
		}
	}
	return nil
}
