package engine_test

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// emptyAdder is Pack checking that the map the engine hands PlaceAdded is
// empty (engine.Adder's contract), and, while junk, writing a job no plan
// asked for into it.
type emptyAdder struct {
	place.Pack
	t     *testing.T
	junk  bool
	calls int
}

func (a *emptyAdder) PlaceAdded(c *cluster.Cluster, busy []bool, add []engine.Assignment, placed map[string][]cluster.GPUID) {
	a.calls++
	if len(placed) != 0 {
		a.t.Errorf("call %d: PlaceAdded got a map holding %v", a.calls, placed)
	}
	a.Pack.PlaceAdded(c, busy, add, placed)
	if a.junk {
		placed["nobody"] = []cluster.GPUID{7}
	}
}

// TestAddedMapReused runs rounds that only start jobs (the Adder's rounds),
// one of them failed by a placer that places a job no plan holds: every
// call must find the engine's reused map empty, and the jobs started keep
// their GPUs while later rounds reuse it.
func TestAddedMapReused(t *testing.T) {
	clk := &fixedClock{}
	ad := &emptyAdder{t: t, junk: true}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("2x4:k80"), Model: perf.Duration{},
		Policy: runAll{}, Placer: ad, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(id string, gpus int) {
		t.Helper()
		if _, err := e.Submit(enginetest.Job(id).GPUs(gpus).Seconds(1000).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	submit("a", 2)
	if _, err := e.Schedule(); err == nil {
		t.Fatal("a placement of a job no plan holds was accepted")
	}
	ad.junk = false
	want := map[string]int{"a": 2, "b": 3, "c": 1, "d": 2}
	for _, id := range []string{"b", "c", "d"} {
		clk.t += 10
		submit(id, want[id])
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
	}
	if ad.calls != 4 {
		t.Errorf("PlaceAdded called %d times, want 4 (every round only starts jobs)", ad.calls)
	}
	seen := map[cluster.GPUID]string{}
	for id, n := range want {
		st := e.Job(id)
		if len(st.GPUs) != n {
			t.Errorf("job %s holds %v, want %d GPUs", id, st.GPUs, n)
		}
		for _, g := range st.GPUs {
			if o, ok := seen[g]; ok {
				t.Errorf("GPU %d held by %s and %s", g, o, id)
			}
			seen[g] = id
		}
	}
}

// TestAddedMapAfterLargeRound starts more jobs in one round than the
// engine keeps its placement map for, then one more: the next call must
// still get an empty map, and every job its own GPUs.
func TestAddedMapAfterLargeRound(t *testing.T) {
	clk := &fixedClock{}
	ad := &emptyAdder{t: t}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("20x8:k80"), Model: perf.Duration{},
		Policy: runAll{}, Placer: ad, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for round, n := range []int{100, 1, 1} {
		for range n {
			id := fmt.Sprintf("j%03d", len(ids))
			ids = append(ids, id)
			if _, err := e.Submit(enginetest.Job(id).GPUs(1).Seconds(1000).At(clk.t).Obj()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Schedule(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		clk.t += 10
	}
	if ad.calls != 3 {
		t.Errorf("PlaceAdded called %d times, want 3", ad.calls)
	}
	seen := map[cluster.GPUID]string{}
	for _, id := range ids {
		st := e.Job(id)
		if len(st.GPUs) != 1 {
			t.Fatalf("job %s holds %v, want one GPU", id, st.GPUs)
		}
		if o, ok := seen[st.GPUs[0]]; ok {
			t.Errorf("GPU %d held by %s and %s", st.GPUs[0], o, id)
		}
		seen[st.GPUs[0]] = id
	}
}
