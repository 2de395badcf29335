package engine_test

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
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

// TestAdoptPair: with sharing, a job adopted on exactly the GPUs one
// running job holds becomes its partner (the two ran there as a pair), and
// the next round keeps both there when the plan packs them; a third job, a
// pair the model does not rate, part of the GPUs or an executor without
// sharing are refused.
func TestAdoptPair(t *testing.T) {
	keep := planFunc(func(*engine.Snapshot) engine.Plan {
		return engine.Plan{Run: []engine.Assignment{packed("a", "b", 2), packed("b", "a", 2)}}
	})
	e, _ := newSharing(t, "1x4:t4", keep, nil, pairModel{}, true)
	for _, j := range []*job.Job{
		enginetest.Job("a").GPUs(2).Obj(), enginetest.Job("b").GPUs(2).Obj(),
		enginetest.Job("c").GPUs(2).Obj(), enginetest.Job("x").GPUs(2).Obj(), enginetest.Job("d").GPUs(1).Obj(),
	} {
		if _, err := e.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Adopt("a", []cluster.GPUID{2, 3}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		gpus []cluster.GPUID
		want string
	}{
		{"x", []cluster.GPUID{3, 2}, "no throughput for the pair"},
		{"d", []cluster.GPUID{3}, "which a holds"},
		{"b", []cluster.GPUID{2, 2}, "twice"},
	} {
		if err := e.Adopt(tc.id, tc.gpus); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Adopt(%s, %v) = %v, want an error containing %q", tc.id, tc.gpus, err, tc.want)
		}
	}
	if err := e.Adopt("b", []cluster.GPUID{3, 2}); err != nil {
		t.Fatal(err)
	}
	if err := e.Adopt("c", []cluster.GPUID{2, 3}); err == nil || !strings.Contains(err.Error(), "a and b share") {
		t.Errorf("a third job on a pair's GPUs: %v", err)
	}
	if a, b := e.Job("a"), e.Job("b"); a.PackedWith != "b" || b.PackedWith != "a" || e.Allocated() != 2 {
		t.Fatalf("after adopting a pair: a packed with %q, b with %q, %d GPUs allocated; want each other, 2", a.PackedWith, b.PackedWith, e.Allocated())
	}
	if first, second := e.Holders(2); first != e.Job("a") || second != e.Job("b") {
		t.Errorf("GPU 2 held by %v and %v, want a and b", first, second)
	}
	changes, err := e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 {
		t.Errorf("the round changed the adopted pair: %v", changes)
	}

	alone, _ := newSharing(t, "1x4:t4", keep, nil, pairModel{}, false)
	for _, j := range []*job.Job{enginetest.Job("a").Obj(), enginetest.Job("b").Obj()} {
		if _, err := alone.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := alone.Adopt("a", []cluster.GPUID{0}); err != nil {
		t.Fatal(err)
	}
	if err := alone.Adopt("b", []cluster.GPUID{0}); err == nil || !strings.Contains(err.Error(), "which a holds") {
		t.Errorf("a pair on an executor without sharing: %v", err)
	}
}
