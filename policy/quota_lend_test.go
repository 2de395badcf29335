package policy

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/classic"
)

// TestQuotaLending: on 8 idle GPUs with nobody guaranteed any, borrowing
// follows the plan's order, or each tenant's cap, or the weights.
func TestQuotaLending(t *testing.T) {
	// a submits four 1-GPU jobs first, then b four, then c four.
	var jobs []*engine.Status
	for i, ten := range []string{"a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "c"} {
		j := enginetest.Job(fmt.Sprintf("%s%d", ten, i)).GPUs(1).Obj()
		j.Tenant, j.Submit = ten, float64(i)
		jobs = append(jobs, &engine.Status{Job: j, State: job.Pending})
	}
	snap := &engine.Snapshot{Cluster: enginetest.Cluster("2x4:t4"), Jobs: jobs}
	for _, c := range []struct {
		name    string
		limits  map[string]int
		weights map[string]int
		want    map[string]int // GPUs per tenant
	}{
		{"plan order", nil, nil, map[string]int{"a": 4, "b": 4}},
		{"a capped at 1", map[string]int{"a": 1}, nil, map[string]int{"a": 1, "b": 4, "c": 3}},
		{"equal weights", nil, map[string]int{}, map[string]int{"a": 3, "b": 3, "c": 2}},
		{"b weighs 2", nil, map[string]int{"b": 2}, map[string]int{"a": 2, "b": 4, "c": 2}},
		{"weights and a cap", map[string]int{"b": 1}, map[string]int{"b": 5}, map[string]int{"a": 4, "b": 1, "c": 3}},
		{"no borrowing at all", map[string]int{"a": 0, "b": 0, "c": 0}, nil, map[string]int{}},
	} {
		q := &Quota{Inner: &classic.FIFO{}, Limits: map[string]int{}, Borrow: true, BorrowLimits: c.limits, Weights: c.weights}
		got := map[string]int{}
		for _, a := range q.Schedule(snap).Run {
			got[a.Job[:1]] += a.GPUs
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: GPUs per tenant %v, want %v", c.name, got, c.want)
		}
	}
}
