package alloc_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

type clock struct{ t float64 }

func (c *clock) Now() float64 { return c.t }

// greedy is Greedy as a policy, in submission order, not strict.
type greedy struct{}

func (greedy) Name() string                            { return "greedy" }
func (greedy) Schedule(s *engine.Snapshot) engine.Plan { return alloc.Greedy(s, s.Jobs, false) }

// TestGreedyPacksParts: on two T4s greedy counts parts as the engine
// places them. A whole job and seven quarter-GPU jobs: the whole job takes
// one GPU and four quarters the other (5 run). Eight quarters fill both
// GPUs. Five 8 GiB parts: two fit on each 16 GiB GPU (4 run). The next
// round changes nothing.
func TestGreedyPacksParts(t *testing.T) {
	for _, tc := range []struct {
		name string
		jobs func() []*enginetestJob
		want int // jobs running after one round
	}{
		{"whole and seven quarters", func() []*enginetestJob {
			js := []*enginetestJob{{"w", 0, 0, 0}}
			for i := range 7 {
				js = append(js, &enginetestJob{fmt.Sprintf("q%d", i), 0.25, 0, 0})
			}
			return js
		}, 5},
		{"eight quarters", func() []*enginetestJob {
			var js []*enginetestJob
			for i := range 8 {
				js = append(js, &enginetestJob{fmt.Sprintf("q%d", i), 0.25, 0, 0})
			}
			return js
		}, 8},
		{"two quarters, then a gang of two quarters", func() []*enginetestJob {
			// The gang's workers sit on distinct GPUs: one beside the two
			// quarters, one on the other GPU.
			return []*enginetestJob{{"q0", 0.25, 0, 1}, {"q1", 0.25, 0, 1}, {"g", 0.25, 0, 2}}
		}, 3},
		{"halves by memory", func() []*enginetestJob {
			var js []*enginetestJob
			for i := range 5 {
				js = append(js, &enginetestJob{fmt.Sprintf("m%d", i), 0, 8, 0})
			}
			return js
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("1x2:t4"), Model: perf.Duration{},
				Policy: greedy{}, Placer: place.Pack{}, Clock: &clock{}})
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range tc.jobs() {
				b := enginetest.Job(j.id).At(float64(i))
				if j.share > 0 {
					b.Share(j.share)
				}
				if j.mem > 0 {
					b.GPUMem(j.mem)
				}
				if j.gpus > 1 {
					b.GPUs(j.gpus)
				}
				if _, err := e.Submit(b.Obj()); err != nil {
					t.Fatal(err)
				}
			}
			changes, err := e.Schedule()
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != tc.want {
				t.Errorf("%d jobs started, want %d", len(changes), tc.want)
			}
			// Nothing moves in the next round: the pool counts the parts
			// that run as they are placed.
			if changes, err := e.Schedule(); err != nil || len(changes) != 0 {
				t.Errorf("second round: %d changes, %v; want none", len(changes), err)
			}
		})
	}
}

type enginetestJob struct {
	id         string
	share, mem float64
	gpus       int // workers, one part each on distinct GPUs; 0 means 1
}

// TestGreedyPartsOnTypesThatHoldThem: a part of any type is counted on a
// type whose GPUs have the memory for it. On one node of four A100s (40
// GiB) and one of three V100s (32 GiB), best fit by GPUs left chose the V100s
// for a 39 GiB part, which the engine could not place there: the job
// waited for ever on an idle cluster (found by a random search over
// workloads, fifo on seed 17).
func TestGreedyPartsOnTypesThatHoldThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		jobs []*enginetestJob
		v100 []string // jobs pinned to the V100s
	}{
		{"one 39 GiB part", []*enginetestJob{{"m", 0, 39, 1}}, nil},
		{"a gang of two 39 GiB parts", []*enginetestJob{{"m", 0, 39, 2}}, nil},
		// The quarters open two V100s, leaving 1.5 GPUs of room there.
		{"39 GiB beside room on the V100s", []*enginetestJob{{"q", 0.25, 0, 2}, {"m", 0, 39, 1}}, []string{"q"}},
		{"a gang of 39 GiB beside room on the V100s", []*enginetestJob{{"q", 0.25, 0, 2}, {"m", 0, 39, 2}}, []string{"q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("1x4:a100,1x3:v100"), Model: perf.Duration{},
				Policy: greedy{}, Placer: place.Pack{}, Clock: &clock{}})
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range tc.jobs {
				b := enginetest.Job(j.id).At(float64(i)).GPUs(max(1, j.gpus))
				if j.share > 0 {
					b.Share(j.share)
				}
				if j.mem > 0 {
					b.GPUMem(j.mem)
				}
				if slices.Contains(tc.v100, j.id) {
					b.Type("v100")
				}
				if _, err := e.Submit(b.Obj()); err != nil {
					t.Fatal(err)
				}
			}
			changes, err := e.Schedule()
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != len(tc.jobs) {
				t.Errorf("%d jobs started, want %d", len(changes), len(tc.jobs))
			}
		})
	}
}
