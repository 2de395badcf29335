package table

import (
	"path/filepath"
	"testing"

	"github.com/tide-sched/tide/perf"
)

// boundGavel: on v100 A (2 GPUs) runs at 10 it/s on one server and 14
// spread over several; B at 10 on one server and 6 spread, and 11 beside C
// (a pair recorded from C's side only: [C's, B's] = [2, 11]); E (1 GPU) at 3
// alone and 9 beside F, a job of 2 GPUs (a pair Shared never forms). No
// k80 table.
const boundGavel = `{
 "v100": {
  "('A', 2)": {"null": 10.0},
  "('B', 2)": {"null": 10.0},
  "('C', 2)": {"null": 4.0, "('B', 2)": [2.0, 11.0]},
  "('E', 1)": {"null": 3.0, "('F', 2)": [9.0, 1.0]},
  "('F', 2)": {"null": 5.0}
 },
 "v100_unconsolidated": {
  "('A', 2)": {"null": 14.0},
  "('B', 2)": {"null": 6.0}
 }
}`

// TestGavelMaxRate: the bound on each span is the best of the consolidated
// rate (where one server holds the job), the spread one (where two or more
// can) and the pair rates of the job's scale factor, worked by hand from
// boundGavel.
func TestGavelMaxRate(t *testing.T) {
	g := mustGavel(t, boundGavel)
	always := mustGavel(t, boundGavel)
	always.AlwaysConsolidated = true
	span := func(min, max, per, nodes int) perf.Span {
		return perf.Span{GPUType: "V100", MinGPUs: min, MaxGPUs: max, PerNode: per, Nodes: nodes}
	}
	for _, c := range []struct {
		name  string
		g     *Gavel
		model string
		sf    int
		s     perf.Span
		want  float64
	}{
		{"A on 2x4: spread beats one server", g, "A", 2, span(2, 2, 4, 2), 14},
		{"A on one 4-GPU server", g, "A", 2, span(2, 2, 4, 1), 10},
		{"A on 8x1: spread only", g, "A", 2, span(2, 2, 1, 8), 14},
		{"A, no limits", g, "A", 2, span(1, 8, 0, 0), 14},
		{"A on 1 GPU at most: cannot run", g, "A", 2, span(1, 1, 4, 2), 0},
		{"A, AlwaysConsolidated", always, "A", 2, span(2, 2, 4, 2), 10},
		{"B: the pair from C's side beats both", g, "B", 2, span(2, 2, 4, 2), 11},
		{"B spread only: the pair still", g, "B", 2, span(2, 2, 1, 8), 11},
		{"E: no pair with F (other scale factor)", g, "E", 1, span(1, 1, 1, 8), 3},
		{"E given 2 GPUs on 2 servers: no spread table", g, "E", 1, span(2, 2, 1, 2), 3},
		{"C: one server, its pair is slower", g, "C", 2, span(2, 4, 4, 1), 4},
	} {
		r, until, ok := c.g.MaxRate(gJob(c.model, c.sf), c.s, 0)
		if !ok || r != c.want || until <= 1e300 {
			t.Errorf("%s: MaxRate %v until %v ok %v, want %v until +Inf", c.name, r, until, ok, c.want)
		}
	}
	if r, _, ok := g.MaxRate(gJob("A", 2), perf.Span{GPUType: "k80", MinGPUs: 2, MaxGPUs: 4, PerNode: 4, Nodes: 2}, 0); !ok || r != 0 {
		t.Errorf("A on k80 (no table): %v %v, want 0 true", r, ok)
	}
}

// TestGavelMaxRateExact: on boundGavel and Gavel's simulation_throughputs.json
// (when ../shared/data is here), for every job type and scale factor and
// small spans, MaxRate is the highest of Rate on every placement of the
// span (each composition of each GPU count over each node count) and of
// Shared beside every job type of its scale factor: at least each, and
// reached.
func TestGavelMaxRateExact(t *testing.T) {
	files := map[string]*Gavel{"boundGavel": mustGavel(t, boundGavel)}
	// ../shared/data beside the repository root (the test runs in perf/table).
	if g, err := LoadGavel(filepath.Join("..", "..", "..", "shared", "data", "gavel", "simulation_throughputs.json")); err == nil {
		files["simulation_throughputs.json"] = g
	} else {
		t.Logf("Gavel's file not here (%v): boundGavel only", err)
	}
	spans := []perf.Span{
		{MinGPUs: 1, MaxGPUs: 5, PerNode: 4, Nodes: 3},
		{MinGPUs: 2, MaxGPUs: 4, PerNode: 4, Nodes: 1},
		{MinGPUs: 1, MaxGPUs: 4, PerNode: 1, Nodes: 4},
		{MinGPUs: 8, MaxGPUs: 8, PerNode: 8, Nodes: 2},
		{MinGPUs: 2, MaxGPUs: 2, PerNode: 2, Nodes: 3},
	}
	for name, g := range files {
		for _, always := range []bool{false, true} {
			g.AlwaysConsolidated = always
			for _, typ := range append(g.GPUTypes(), "a100") {
				for _, jt := range g.JobTypes() {
					j := gJob(jt.Name, jt.ScaleFactor)
					for _, s := range spans {
						s.GPUType = typ
						got, _, _ := g.MaxRate(j, s, 0)
						best := 0.0
						eachPlacement(s, func(a perf.Alloc) {
							r, _ := g.Rate(j, a, 0)
							best = max(best, r)
							for _, other := range g.JobTypes() {
								if other.ScaleFactor != jt.ScaleFactor {
									continue // Shared pairs none (TestGavelShared)
								}
								if r1, _, ok := g.Shared(j, gJob(other.Name, other.ScaleFactor), a); ok {
									best = max(best, r1)
								}
							}
						})
						if got != best {
							t.Errorf("%s (AlwaysConsolidated %v): %s on %+v: MaxRate %v, best placement %v", name, always, jt, s, got, best)
						}
					}
				}
			}
		}
	}
}

// eachPlacement calls f with every allocation of s: each GPU count, on each
// number of nodes, as each composition of at most s.PerNode a node.
func eachPlacement(s perf.Span, f func(perf.Alloc)) {
	var per []int
	var fill func(left, nodes int)
	fill = func(left, nodes int) {
		if nodes == 0 {
			if left == 0 {
				f(perf.Alloc{GPUType: s.GPUType, PerNode: per})
			}
			return
		}
		for g := 1; g <= min(left, s.PerNode); g++ {
			per = append(per, g)
			fill(left-g, nodes-1)
			per = per[:len(per)-1]
		}
	}
	for n := s.MinGPUs; n <= s.MaxGPUs; n++ {
		for k := 1; k <= min(n, s.Nodes); k++ {
			fill(n, k)
		}
	}
}
