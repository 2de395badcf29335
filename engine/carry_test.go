package engine_test

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/policy"
)

// TestCarry moves a running job's history to a new engine on a larger
// cluster: attained service, launches and memo survive, and the new engine
// keeps counting from there.
func TestCarry(t *testing.T) {
	fifo, err := policy.Parse("fifo", policy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	old, clk := newEngine(t, "1x4:t4", fifo, nil)
	if _, err := old.Submit(enginetest.Job("a").GPUs(2).Obj()); err != nil {
		t.Fatal(err)
	}
	clk.t = 10
	if _, err := old.Schedule(); err != nil {
		t.Fatal(err)
	}
	clk.t = 40
	prev := old.Snapshot().Jobs[0] // 30 s on 2 GPUs, 10 s waiting
	if prev.Attained != 60 || prev.Waited != 10 || prev.Starts != 1 {
		t.Fatalf("old engine: attained %v waited %v starts %d, want 60, 10, 1", prev.Attained, prev.Waited, prev.Starts)
	}
	next, clk2 := newEngine(t, "2x4:t4", fifo, nil)
	clk2.t = 40
	if _, err := next.Submit(enginetest.Job("a").GPUs(2).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := next.Carry("a", nil); err == nil || !strings.Contains(err.Error(), "another job") {
		t.Errorf("Carry(nil) = %v, want an error", err)
	}
	if err := next.Carry("zz", prev); err == nil || !strings.Contains(err.Error(), "unknown job") {
		t.Errorf("Carry(zz) = %v, want an unknown-job error", err)
	}
	if err := next.Adopt("a", []cluster.GPUID{4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := next.Carry("a", prev); err != nil {
		t.Fatal(err)
	}
	clk2.t = 50
	got := next.Snapshot().Jobs[0]
	if got.Attained != 80 || got.Waited != 10 || got.Starts != 1 || got.FirstStart != 10 || got.LastStart != 10 {
		t.Errorf("carried: attained %v waited %v starts %d first %v last %v, want 80, 10, 1, 10, 10",
			got.Attained, got.Waited, got.Starts, got.FirstStart, got.LastStart)
	}
	if got.TypeExecuted["t4"] != 40 { // 30 s before, 10 s since, all on t4
		t.Errorf("carried: seconds per GPU type %v, want t4: 40", got.TypeExecuted)
	}
}
