package flow

import (
	"math"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
)

// TestRollFaults: a node of 8 GPUs lost from t=100 every 1000 s for 300 s,
// and one lost from t=0 every 1000 s for 1500 s (two down at once),
// counted by hand.
func TestRollFaults(t *testing.T) {
	f := faults{first: 100, period: 1000, dur: 300, gpus: 8}
	for _, tc := range []struct {
		x, next float64
		lost    int
	}{
		{50, 100, 0}, {100, 400, 8}, {399, 400, 8}, {400, 1100, 0}, {1150, 1400, 8}, {1400, 2100, 0},
	} {
		if got := f.lost(tc.x); got != tc.lost {
			t.Errorf("lost(%v) = %d, want %d", tc.x, got, tc.lost)
		}
		if got := f.next(tc.x); got != tc.next {
			t.Errorf("next(%v) = %v, want %v", tc.x, got, tc.next)
		}
	}
	g := faults{first: 0, period: 1000, dur: 1500, gpus: 8}
	for _, tc := range []struct {
		x, next float64
		lost    int
	}{
		{0, 1000, 8}, {1200, 1500, 16}, {1500, 2000, 8}, {2200, 2500, 16}, {2600, 3000, 8},
	} {
		if got := g.lost(tc.x); got != tc.lost {
			t.Errorf("overlapping: lost(%v) = %d, want %d", tc.x, got, tc.lost)
		}
		if got := g.next(tc.x); got != tc.next {
			t.Errorf("overlapping: next(%v) = %v, want %v", tc.x, got, tc.next)
		}
	}
	if got := (faults{}).next(5); !math.IsInf(got, 1) {
		t.Errorf("no faults: next = %v, want +Inf", got)
	}
}

// TestTidalRolloutPlays: the play on one 8-GPU node, jobs scaling
// linearly (rate = GPUs), no start costs, slot 60 s, worked by hand. a
// (800 of work, due at 150) runs on all 8 GPUs to t=100. Without c, b (800,
// due at 240) then runs to 200 and meets: 2 met. c (400, due at 160) is
// planned after a's reservation (to 120) and would end at 170, so it
// waits; at 100 it takes the 8 GPUs, ends at 150, and its reservation (to
// 160) pushes b to end at 250: b misses, 2 met either way, and the held
// job's play does not admit c (a tie goes to EdgeFlow's choice). With b
// due at 260 instead, b still meets after c: 3 against 2. A node lost
// from t=0 for 1000 s leaves nothing to run on: none meets.
func TestTidalRolloutPlays(t *testing.T) {
	tl := fam.Parse(t, "tidal:forecast=off:rollout=replace", contract.Context{}).(*Tidal)
	s := &engine.Snapshot{Now: 0, Cluster: &cluster.Cluster{}}
	c := cloud{site: "cloud", cap: 8, perNode: 8}
	job := func(rem, deadline float64) *fjob {
		return &fjob{rem: rem, deadline: deadline, levels: []int{1, 2, 4, 8}, rates: []float64{1, 2, 4, 8}, edge: -1, pin: -1, class: 1}
	}
	for _, tc := range []struct {
		bDue               float64
		with, without, out int
	}{{240, 2, 2, 0}, {260, 3, 2, 0}} {
		a, b, cj := job(800, 150), job(800, tc.bDue), job(400, 160)
		set := []*fjob{a, cj, b}
		with := tl.rollout(s, c, set, nil, c.cap, faults{})
		without := tl.rollout(s, c, set, cj, c.cap, faults{})
		down := tl.rollout(s, c, set, nil, c.cap, faults{first: 0, period: 1e9, dur: 1000, gpus: 8})
		if with != tc.with || without != tc.without || down != tc.out {
			t.Errorf("b due at %v: %d met with c, %d without, %d with the node down; want %d, %d, %d",
				tc.bDue, with, without, down, tc.with, tc.without, tc.out)
		}
		if a.rem != 800 || cj.meets || b.now != 0 {
			t.Errorf("b due at %v: the play changed the set's jobs", tc.bDue)
		}
	}
}
