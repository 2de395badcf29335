package kube

import (
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// TestWorkerPlacer keeps each worker's GPUs on one node, keeps what a job
// holds, grows it beside its old workers and leaves out a job whose
// workers do not all fit.
func TestWorkerPlacer(t *testing.T) {
	c, err := cluster.New([]cluster.Node{{Name: "n0", GPUType: "t", GPUs: 4}, {Name: "n1", GPUType: "t", GPUs: 4}, {Name: "n2", GPUType: "t", GPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	per := workers(func(id string) int { return map[string]int{"a": 2, "b": 2, "c": 4}[id] })
	p := workerPlacer{per: per}
	held := map[string][]cluster.GPUID{"a": {8, 9}} // a holds n2
	run := []engine.Assignment{{Job: "a", GPUs: 4}, {Job: "b", GPUs: 4}, {Job: "c", GPUs: 4}}
	got := p.Place(c, held, run)
	node := func(g cluster.GPUID) string { return c.NodeOf(g).Name }
	if a := got["a"]; len(a) != 4 || a[0] != 8 || a[1] != 9 || node(a[2]) != node(a[3]) {
		t.Errorf("a = %v, want its old GPUs 8, 9 and one more worker on one node", a)
	}
	if b := got["b"]; len(b) != 4 || node(b[0]) != node(b[1]) || node(b[2]) != node(b[3]) {
		t.Errorf("b = %v, want two workers, each on one node", b)
	}
	if _, ok := got["c"]; ok {
		t.Errorf("c placed on %v, want it left out (no node has 4 free GPUs)", got["c"])
	}
	seen := map[cluster.GPUID]bool{}
	for _, gs := range got {
		for _, g := range gs {
			if seen[g] {
				t.Fatalf("GPU %d given twice: %v", g, got)
			}
			seen[g] = true
		}
	}
	// Shrinking keeps a prefix of whole workers.
	got = p.Place(c, map[string][]cluster.GPUID{"a": {8, 9, 0, 1}}, []engine.Assignment{{Job: "a", GPUs: 2}})
	if a := got["a"]; len(a) != 2 || a[0] != 8 || a[1] != 9 {
		t.Errorf("shrunk a = %v, want [8 9]", a)
	}
}
