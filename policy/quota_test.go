package policy

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
)

// TestQuota: a tenant borrows idle GPUs beyond its quota, and gives them
// back by preemption when the owner's job arrives; without borrowing it
// stays within its quota.
func TestQuota(t *testing.T) {
	c := enginetest.Cluster("2x4:t4")
	mk := func(id, tenant string, gpus int, submit float64) *engine.Status {
		j := enginetest.Job(id).GPUs(gpus).Obj()
		j.Tenant, j.Submit = tenant, submit
		return &engine.Status{Job: j, State: job.Pending}
	}
	a1, a2 := mk("a1", "a", 4, 0), mk("a2", "a", 4, 1)
	snap := &engine.Snapshot{Cluster: c, Jobs: []*engine.Status{a1, a2}}
	q := &Quota{Inner: &FIFO{}, Limits: map[string]int{"a": 4, "b": 4}, Borrow: true}
	if got := ids(q.Schedule(snap)); got != "a1,a2" {
		t.Errorf("idle cluster: plan %s, want a1,a2 (a borrows b's idle 4)", got)
	}
	// a's jobs run; b's job arrives: a2 (borrowed) is reclaimed.
	a1.GPUs, a2.GPUs = []cluster.GPUID{0, 1, 2, 3}, []cluster.GPUID{4, 5, 6, 7}
	a1.State, a2.State = job.Running, job.Running
	snap.Jobs = append(snap.Jobs, mk("b1", "b", 4, 2))
	if got := ids(q.Schedule(snap)); got != "a1,b1" {
		t.Errorf("owner back: plan %s, want a1,b1 (a2 preempted)", got)
	}
	q.Borrow = false
	snap.Jobs = snap.Jobs[:2]
	if got := ids(q.Schedule(snap)); got != "a1" {
		t.Errorf("no borrowing: plan %s, want a1", got)
	}
	if !strings.Contains(q.Name(), "a=4,b=4") {
		t.Errorf("name %q", q.Name())
	}
}

func ids(p engine.Plan) string {
	var s []string
	for _, a := range p.Run {
		s = append(s, a.Job)
	}
	return strings.Join(s, ",")
}

func TestParseQuotas(t *testing.T) {
	q, err := ParseQuotas(" a=4, b = 8 ,")
	if err != nil || q["a"] != 4 || q["b"] != 8 || len(q) != 2 {
		t.Fatalf("ParseQuotas = %v, %v", q, err)
	}
	for in, want := range map[string]string{"a": "want TENANT=GPUS", "a=-1": "whole number", "a=1,a=2": "twice", "=3": "want TENANT"} {
		if _, err := ParseQuotas(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseQuotas(%q) = %v, want %q", in, err, want)
		}
	}
}
