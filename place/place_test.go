package place_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/place"
)

func TestLookup(t *testing.T) {
	cases := []struct {
		name, want string // want: the placer's Name(); "" = an error
	}{
		{"", "pack"},
		{"pack", "pack"},
		{"most-free", "most-free"},
		{"Pack", ""},
		{"mostfree", ""},
		{"best-fit", ""},
	}
	for _, tc := range cases {
		p, err := place.Lookup(tc.name)
		if tc.want == "" {
			if err == nil {
				t.Errorf("Lookup(%q) = %s, want an error", tc.name, p.Name())
				continue
			}
			for _, w := range []string{`"` + tc.name + `"`, "pack", "most-free"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Lookup(%q): error %q does not contain %q", tc.name, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("Lookup(%q): %v", tc.name, err)
			continue
		}
		if p.Name() != tc.want {
			t.Errorf("Lookup(%q) = %s, want %s", tc.name, p.Name(), tc.want)
		}
	}
}

// ids is shorthand for a GPU list.
func ids(g ...cluster.GPUID) []cluster.GPUID { return g }

// ask is an assignment of n GPUs of type typ ("" = any) to job id.
func ask(id string, n int, typ string) engine.Assignment {
	return engine.Assignment{Job: id, GPUs: n, GPUType: typ}
}

// placeCase is one Place call. busy lists GPU sets held by jobs busy-0,
// busy-1, ... that the plan runs first with the same counts, so they keep
// their GPUs and shape what is free; held and run add other jobs. want
// gives every job of run the GPUs it must get, in order; a job missing from
// want must not be placed. All GPU numbers are worked out by hand from the
// shorthand: nodes are numbered in order, each node's GPUs follow the
// previous node's, and each comma-separated group is one rack.
type placeCase struct {
	name    string
	cluster string
	busy    [][]cluster.GPUID
	held    map[string][]cluster.GPUID
	run     []engine.Assignment
	want    map[string][]cluster.GPUID
}

func runPlaceCases(t *testing.T, p engine.Placer, cases []placeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := enginetest.Cluster(tc.cluster)
			held := maps.Clone(tc.held)
			if held == nil {
				held = map[string][]cluster.GPUID{}
			}
			var run []engine.Assignment
			want := maps.Clone(tc.want)
			if want == nil {
				want = map[string][]cluster.GPUID{}
			}
			for i, g := range tc.busy {
				id := "busy-" + strconv.Itoa(i)
				held[id] = g
				run = append(run, ask(id, len(g), ""))
				want[id] = g
			}
			run = append(run, tc.run...)
			got := p.Place(c, held, run)
			for _, a := range run {
				g, ok := got[a.Job]
				w, wok := want[a.Job]
				if ok != wok || !slices.Equal(g, w) {
					t.Errorf("job %s (%d %q): got %v (placed %v), want %v (placed %v)", a.Job, a.GPUs, a.GPUType, g, ok, w, wok)
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					t.Errorf("placed %s, which is not in the plan", id)
				}
			}
		})
	}
}

func TestPack(t *testing.T) {
	runPlaceCases(t, place.Pack{}, []placeCase{{
		// Nodes 0-2 hold GPUs 0-3, 4-7, 8-11; free after busy: node 0 {3},
		// node 1 {6,7}, node 2 all. a (2): nodes 1 and 2 fit, node 1 has
		// fewer free. b (1): node 0 (1 free) now fits best. c (4): only
		// node 2.
		name:    "best fit node",
		cluster: "3x4:t4",
		busy:    [][]cluster.GPUID{{0, 1, 2}, {4, 5}},
		run:     []engine.Assignment{ask("a", 2, ""), ask("b", 1, ""), ask("c", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(6, 7), "b": ids(3), "c": ids(8, 9, 10, 11)},
	}, {
		// A plan that lists node 0 twice (3 + 3 of its 4 GPUs) asks for a
		// shape no GPUs have (engine.Assignment.Fits counts a node's GPUs
		// once): a is not placed, and b, after it, still is.
		name:    "node listed twice",
		cluster: "2x4:t4",
		run: []engine.Assignment{{Job: "a", GPUs: 6, Nodes: []engine.NodeGPUs{{Node: 0, GPUs: 3}, {Node: 0, GPUs: 3}}},
			ask("b", 4, "")},
		want: map[string][]cluster.GPUID{"b": ids(0, 1, 2, 3)},
	}, {
		// Both nodes have 4 free: a goes to node 0 (lowest index); then
		// node 0 (2 free) is the best fit for b, keeping node 1 whole for c.
		name:    "ties to lowest node, consolidating",
		cluster: "2x4:t4",
		run:     []engine.Assignment{ask("a", 2, ""), ask("b", 2, ""), ask("c", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0, 1), "b": ids(2, 3), "c": ids(4, 5, 6, 7)},
	}, {
		// Rack 0 = nodes 0-3 (GPUs 0-15), rack 1 = nodes 4-5 (GPUs 16-18,
		// 19-21). After busy, rack 0 has free [4,1,1,1] and rack 1 [3,3].
		// No node has 6; rack 0 needs 3 nodes (4+1+1), rack 1 needs 2 (3+3),
		// so rack 1 although rack 0 has the node with the most free GPUs.
		name:    "rack with fewest nodes",
		cluster: "4x4:t4,2x3:t4",
		busy:    [][]cluster.GPUID{{4, 5, 6}, {8, 9, 10}, {12, 13, 14}},
		run:     []engine.Assignment{ask("a", 6, "")},
		want:    map[string][]cluster.GPUID{"a": ids(16, 17, 18, 19, 20, 21)},
	}, {
		// Rack 0 = node 0 (GPUs 0-2), node 1 (3-5); rack 1 = nodes 2-4
		// (6-7, 8-9, 10-11). After busy node 1 has {5} free. No node has
		// 4; both racks need 2 nodes (3+1, 2+2): rack 0 wins the tie, most
		// free node first. (Anywhere would take node 0 and then node 2.)
		name:    "rack tie to lowest rack",
		cluster: "2x3:t4,3x2:t4",
		busy:    [][]cluster.GPUID{{3, 4}},
		run:     []engine.Assignment{ask("a", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0, 1, 2, 5)},
	}, {
		// One rack, nodes 0-2 (GPUs 0-1, 2-3, 4-5), node 0 has {1} free.
		// 3 GPUs need two nodes: the two with 2 free, not node 0.
		name:    "within a rack most free first",
		cluster: "3x2:t4",
		busy:    [][]cluster.GPUID{{0}},
		run:     []engine.Assignment{ask("a", 3, "")},
		want:    map[string][]cluster.GPUID{"a": ids(2, 3, 4)},
	}, {
		// Racks of two 2-GPU nodes: GPUs 0-1, 2-3 | 4-5, 6-7. Free after
		// busy: node 0 {1}, node 1 {2,3}, node 2 {5}, node 3 {6,7}; each
		// rack has 3, so 5 GPUs go anywhere, most free first: node 1,
		// node 3 (2 each, by index), then node 0.
		name:    "anywhere most free first",
		cluster: "2x2:t4,2x2:t4",
		busy:    [][]cluster.GPUID{{0}, {4}},
		run:     []engine.Assignment{ask("a", 5, "")},
		want:    map[string][]cluster.GPUID{"a": ids(2, 3, 6, 7, 1)},
	}, {
		// Rack 0: nodes 0-1 (GPUs 0-1, 2-3); rack 1: node 2 (4-6). No node
		// has 4; rack 1 has only 3, rack 0 needs both its nodes.
		name:    "rack that fits over bigger node",
		cluster: "2x2:t4,1x3:t4",
		run:     []engine.Assignment{ask("a", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0, 1, 2, 3)},
	}, {
		// t4: nodes 0-1 (GPUs 0-1, 2-3); v100: node 2 (4-7). a (any): 4
		// free of each, the tie goes to t4 (first by name), node 0. b
		// (any): now v100 has more free (4 > 2). c (v100, 3): 2 left, not
		// placed. d (t4): node 1. e (a100): no such GPUs. f (any, 1): t4
		// has 0 free, v100 2: GPU 6.
		name:    "gpu types",
		cluster: "2x2:t4,1x4:v100",
		run: []engine.Assignment{ask("a", 2, ""), ask("b", 2, ""), ask("c", 3, "v100"),
			ask("d", 2, "t4"), ask("e", 1, "a100"), ask("f", 1, "")},
		want: map[string][]cluster.GPUID{"a": ids(0, 1), "b": ids(4, 5), "d": ids(2, 3), "f": ids(6)},
	}, {
		// A job too big to place does not block the smaller one after it.
		name:    "no head-of-line blocking",
		cluster: "2x4:t4",
		run:     []engine.Assignment{ask("big", 9, ""), ask("small", 4, "")},
		want:    map[string][]cluster.GPUID{"small": ids(0, 1, 2, 3)},
	}, {
		// x keeps GPU 5 on node 1 (same count), although it comes after a
		// in the plan: node 1 has 3 free, so a (4) takes node 0 and b (3)
		// the rest of node 1.
		name:    "unchanged job keeps its gpus",
		cluster: "2x4:t4",
		held:    map[string][]cluster.GPUID{"x": ids(5)},
		run:     []engine.Assignment{ask("a", 4, ""), ask("x", 1, ""), ask("b", 3, "")},
		want:    map[string][]cluster.GPUID{"x": ids(5), "a": ids(0, 1, 2, 3), "b": ids(4, 6, 7)},
	}, {
		// x held GPUs 0-1 and is resized to 1: it is placed afresh, after
		// a (plan order), and its old GPUs are free for a.
		name:    "resized job is placed again",
		cluster: "2x2:t4",
		held:    map[string][]cluster.GPUID{"x": ids(0, 1)},
		run:     []engine.Assignment{ask("a", 2, ""), ask("x", 1, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0, 1), "x": ids(2)},
	}, {
		// gone holds all GPUs but is not in the plan: they are free.
		name:    "gpus of jobs not in the plan are free",
		cluster: "1x4:t4",
		held:    map[string][]cluster.GPUID{"gone": ids(0, 1, 2, 3)},
		run:     []engine.Assignment{ask("a", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0, 1, 2, 3)},
	}, {
		// t4 GPUs 0-1; v100 GPUs 2-3 (node 1) and 4-5 (node 2). x holds
		// t4 GPUs but now asks for v100: moved to node 1. y holds v100
		// GPUs and asks for any type: kept.
		name:    "held type must match the assignment",
		cluster: "1x2:t4,1x2:v100,1x2:v100",
		held:    map[string][]cluster.GPUID{"x": ids(0, 1), "y": ids(4, 5)},
		run:     []engine.Assignment{ask("x", 2, "v100"), ask("y", 2, "")},
		want:    map[string][]cluster.GPUID{"x": ids(2, 3), "y": ids(4, 5)},
	}})
}

func TestMostFree(t *testing.T) {
	runPlaceCases(t, place.MostFree{}, []placeCase{{
		// Nodes 0-2 hold GPUs 0-3, 4-7, 8-11; free after busy: node 0
		// {1,2,3}, node 1 all 4, node 2 {10,11}. a (2): node 1, the most
		// free (Pack would take node 2). b (6): node 0 (3 free), then
		// nodes 1 and 2 (2 free each: node 1 first by index) until 6.
		name:    "most free node first",
		cluster: "3x4:t4",
		busy:    [][]cluster.GPUID{{0}, {8, 9}},
		run:     []engine.Assignment{ask("a", 2, ""), ask("b", 6, "")},
		want:    map[string][]cluster.GPUID{"a": ids(4, 5), "b": ids(1, 2, 3, 6, 7, 10)},
	}, {
		// a: tie, node 0. b: node 1 (2 free > 1). c: tie again (1 each),
		// node 0.
		name:    "ties to lowest node",
		cluster: "2x2:t4",
		run:     []engine.Assignment{ask("a", 1, ""), ask("b", 1, ""), ask("c", 1, "")},
		want:    map[string][]cluster.GPUID{"a": ids(0), "b": ids(2), "c": ids(1)},
	}, {
		// Racks do not matter: node 2 (GPUs 4-6) has the most free, then
		// node 0. (Pack keeps this job in rack 0.)
		name:    "ignores racks",
		cluster: "2x2:t4,1x3:t4",
		run:     []engine.Assignment{ask("a", 4, "")},
		want:    map[string][]cluster.GPUID{"a": ids(4, 5, 6, 0)},
	}, {
		// t4 GPUs 0-1, v100 GPUs 2-5: an any-type job goes to v100, the
		// type with more free GPUs; a t4 job only to t4; 3 t4 do not fit.
		name:    "gpu types",
		cluster: "1x2:t4,1x4:v100",
		run:     []engine.Assignment{ask("a", 2, ""), ask("b", 3, "t4"), ask("c", 2, "t4")},
		want:    map[string][]cluster.GPUID{"a": ids(2, 3), "c": ids(0, 1)},
	}, {
		name:    "unchanged job keeps its gpus",
		cluster: "2x2:t4",
		held:    map[string][]cluster.GPUID{"x": ids(1)},
		run:     []engine.Assignment{ask("a", 2, ""), ask("x", 1, "")},
		want:    map[string][]cluster.GPUID{"x": ids(1), "a": ids(2, 3)},
	}})
}
