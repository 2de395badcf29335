package engine_test

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy"
)

// TestAdopt puts a recovered job back on the GPUs its process still holds:
// the next round keeps it there and places others around it, and adoption
// that would break an invariant is refused without changing anything.
func TestAdopt(t *testing.T) {
	fifo, err := policy.Parse("fifo", policy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	e, clk := newEngine(t, "1x4:t4", fifo, nil)
	for _, j := range []*job.Job{
		enginetest.Job("a").GPUs(2).Obj(),
		enginetest.Job("b").GPUs(2).Obj(),
		enginetest.Job("c").GPUs(1).Obj(),
	} {
		if _, err := e.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = 5
	bad := []struct {
		id   string
		gpus []cluster.GPUID
		want string
	}{
		{"zz", []cluster.GPUID{0}, "unknown job"},
		{"b", []cluster.GPUID{0}, "outside its [2, 2]"},
		{"b", []cluster.GPUID{0, 9}, "does not exist"},
		{"b", []cluster.GPUID{1, 1}, "twice"},
	}
	for _, tc := range bad {
		if err := e.Adopt(tc.id, tc.gpus); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Adopt(%s, %v) = %v, want an error containing %q", tc.id, tc.gpus, err, tc.want)
		}
	}
	if err := e.Adopt("b", []cluster.GPUID{2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.Adopt("b", []cluster.GPUID{2, 3}); err == nil || !strings.Contains(err.Error(), "not waiting") {
		t.Errorf("second adoption: %v", err)
	}
	if err := e.Adopt("c", []cluster.GPUID{3}); err == nil || !strings.Contains(err.Error(), "b holds") {
		t.Errorf("adoption onto a held GPU: %v", err)
	}
	st := e.Job("b")
	if st.State != job.Running || st.Starts != 0 || st.FirstStart != 5 || e.Allocated() != 2 {
		t.Fatalf("after adoption: state %s starts %d first start %v allocated %d", st.State, st.Starts, st.FirstStart, e.Allocated())
	}
	changes, err := e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Status.Job.ID == "b" {
			t.Errorf("the round changed adopted job b: %s", ch.Kind)
		}
	}
	if got := e.Job("a").GPUs; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("job a placed on %v, want the free GPUs [0 1]", got)
	}
	clk.t = 15
	e.Snapshot()
	if got := e.Job("b").Attained; got != 20 {
		t.Errorf("adopted job attained %v GPU-s after 10 s on 2 GPUs, want 20", got)
	}
}
