package policy

import (
	"fmt"
	"math"
	"strings"

	"github.com/tide-sched/tide/engine"
)

// explain gives plan a reason for every job it leaves waiting, preempts,
// shrinks or declines, keeping the reasons the policy already wrote. The
// text is the decision ("waits", "preempted", "shrunk 4->2", "declined"),
// then terms(st), the job's standing in the policy's own terms (nil: none),
// then what stands in its way: how many jobs the order puts ahead of it and
// the GPUs it needs against those the plan leaves free. order is the
// policy's order of the jobs (most important first; nil when it has none):
// a job's 1-based index in it is its Reason.Position.
func explain(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, terms func(st *engine.Status) string) {
	pos := make(map[string]int, len(order))
	for i, st := range order {
		if _, ok := pos[st.Job.ID]; !ok {
			pos[st.Job.ID] = i + 1
		}
	}
	given := make(map[string]int, len(plan.Run))
	free := s.Available("", "")
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
		if a.PackWith == "" || a.Job < a.PackWith {
			free -= a.GPUs
		}
	}
	declined := make(map[string]bool, len(plan.Decline))
	for _, id := range plan.Decline {
		declined[id] = true
	}
	for _, st := range s.Jobs {
		id := st.Job.ID
		if _, ok := plan.Reasons[id]; ok {
			continue
		}
		g, planned := given[id]
		var verb string
		switch {
		case declined[id]:
			verb = "declined"
		case planned && len(st.GPUs) > g:
			verb = fmt.Sprintf("shrunk %d->%d GPUs", len(st.GPUs), g)
		case planned:
			continue
		case len(st.GPUs) > 0:
			verb = "preempted"
		default:
			verb = "waits"
		}
		parts := []string{verb}
		if terms != nil {
			if t := terms(st); t != "" {
				parts = append(parts, t)
			}
		}
		p := pos[id]
		if p > 0 {
			parts = append(parts, fmt.Sprintf("%d job(s) ahead", p-1))
		}
		if !planned && !declined[id] {
			parts = append(parts, fmt.Sprintf("needs %d GPUs, %d free", st.Job.MinGPUs, max(free, 0)))
		}
		if plan.Reasons == nil {
			plan.Reasons = make(map[string]engine.Reason, len(s.Jobs)-len(plan.Run))
		}
		plan.Reasons[id] = engine.Reason{Text: strings.Join(parts, "; "), Position: p}
	}
}

// predictStarts sets Reason.PredictedStart for the waiting jobs of a plan
// whose order does not change while they wait (FIFO): running jobs end
// when the model says, and waiting jobs take freed GPUs in order (strict:
// none overtakes a job that does not fit yet), assuming no arrivals,
// failures or capacity changes. A job whose wait depends on a job the
// model cannot time (no duration) gets none, and so do those behind it.
func predictStarts(s *engine.Snapshot, plan *engine.Plan, order []*engine.Status, strict bool) {
	if s.Model == nil {
		return // nothing to time jobs with
	}
	type end struct {
		t    float64
		gpus int
	}
	given := make(map[string]int, len(plan.Run))
	free := s.Available("", "")
	var ends []end
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	for _, a := range plan.Run {
		given[a.Job] = a.GPUs
		if a.PackWith != "" && a.Job > a.PackWith {
			continue
		}
		free -= a.GPUs
		st := byID[a.Job]
		if st == nil {
			continue
		}
		r := s.Remaining(st, a.GPUs, a.GPUType)
		if math.IsNaN(r) || math.IsInf(r, 0) {
			r = math.Inf(1)
		}
		ends = append(ends, end{s.Now + r, a.GPUs})
	}
	now := s.Now
	blocked := false
	for _, st := range order {
		if _, ok := given[st.Job.ID]; ok || blocked {
			continue
		}
		need := st.Job.GPUs
		// Release GPUs in end order until the job fits.
		for free < need && len(ends) > 0 {
			k := 0
			for i := range ends {
				if ends[i].t < ends[k].t {
					k = i
				}
			}
			now = math.Max(now, ends[k].t)
			free += ends[k].gpus
			ends = append(ends[:k], ends[k+1:]...)
		}
		if free < need || math.IsInf(now, 1) {
			blocked = strict
			continue
		}
		r := s.Remaining(st, need, st.Job.GPUType)
		if r2, ok := plan.Reasons[st.Job.ID]; ok && now > s.Now {
			r2.PredictedStart = now
			plan.Reasons[st.Job.ID] = r2
		}
		free -= need
		if math.IsNaN(r) || math.IsInf(r, 0) {
			r = math.Inf(1)
		}
		ends = append(ends, end{now + r, need})
	}
}
