package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/perf"
)

// TestShape compares shape with the GPUs per node counted in the order the
// nodes first appear, for random GPU lists on one node and on several, and
// checks that the shared one-node shapes cannot be grown in place.
func TestShape(t *testing.T) {
	c, err := cluster.Parse("3x4:k80,2x8:v100,1x2:t4")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Cluster: c, Model: perf.Duration{}, Policy: idlePolicy{}, Placer: idlePlacer{}, Clock: zeroClock{}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var gpus []cluster.GPUID
		if i%2 == 0 { // one node
			n := c.Nodes[r.IntN(len(c.Nodes))]
			for _, k := range r.Perm(n.GPUs)[:1+r.IntN(n.GPUs)] {
				gpus = append(gpus, n.First+cluster.GPUID(k))
			}
		} else {
			for _, g := range r.Perm(c.TotalGPUs())[:1+r.IntN(12)] {
				gpus = append(gpus, cluster.GPUID(g))
			}
		}
		var want []int
		typ, last := "", -1
		for _, g := range gpus {
			n := c.NodeOf(g)
			if typ == "" {
				typ = n.GPUType
			}
			if n.ID != last {
				want = append(want, 0)
				last = n.ID
			}
			want[len(want)-1]++
		}
		a := e.shape(gpus)
		if a.GPUType != typ || !slices.Equal(a.PerNode, want) {
			t.Fatalf("shape(%v) = %s %v, want %s %v", gpus, a.GPUType, a.PerNode, typ, want)
		}
		if len(want) == 1 && cap(a.PerNode) != 1 {
			t.Fatalf("shape(%v): a one-node PerNode with room to grow (cap %d) into the shared table", gpus, cap(a.PerNode))
		}
	}
	if a := e.shape(nil); a.GPUType != "" || a.PerNode != nil {
		t.Errorf("shape(nil) = %+v, want the zero Alloc", a)
	}
}

// idlePolicy, idlePlacer and zeroClock complete a Config for tests that
// call the engine's helpers without rounds.
type idlePolicy struct{}

func (idlePolicy) Name() string              { return "idle" }
func (idlePolicy) Schedule(s *Snapshot) Plan { return Plan{} }

type idlePlacer struct{}

func (idlePlacer) Name() string { return "idle" }
func (idlePlacer) Place(*cluster.Cluster, map[string][]cluster.GPUID, []Assignment) map[string][]cluster.GPUID {
	return nil
}

type zeroClock struct{}

func (zeroClock) Now() float64 { return 0 }
