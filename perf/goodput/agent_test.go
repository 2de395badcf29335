package goodput

import "testing"

func TestAgent(t *testing.T) {
	var a Agent
	if a.Fitted() || a.Hints(Grad{}, Limits{InitBatch: 64}) != nil {
		t.Fatal("an agent with no observation reports hints")
	}
	o1 := Observation{Nodes: 1, Replicas: 1, LocalBsz: 64, ComputeTime: 0.034, StepTime: 0.034}
	o2 := Observation{Nodes: 1, Replicas: 2, LocalBsz: 32, ComputeTime: 0.018, StepTime: 0.019}
	for i, c := range []struct {
		o    Observation
		want bool
	}{
		{o1, true},
		{Observation{Nodes: 1, Replicas: 1, LocalBsz: 64, ComputeTime: 9, StepTime: 9}, false}, // seen
		{Observation{Nodes: 1, Replicas: 4, LocalBsz: 16, StepTime: 0.01}, false},              // no compute time: invalid
		{o2, true},
	} {
		if got := a.Observe(c.o); got != c.want {
			t.Errorf("observation %d: Observe %v, want %v", i, got, c.want)
		}
	}
	if got := a.Observations(); len(got) != 2 || got[0] != o1 || got[1] != o2 {
		t.Errorf("observations %+v", got)
	}
	want := Fit([]Observation{o1, o2})
	h := a.Hints(Grad{Sqr: 1, Var: 2}, Limits{InitBatch: 64, MaxBatch: 64})
	if h == nil || !h.Fitted || h.Perf != want || a.Params() != want || h.MaxReplicas != 2 || a.MaxReplicas() != 2 ||
		h.Grad.Var != 2 || h.Limits.InitBatch != 64 {
		t.Errorf("hints %+v, want the fit %+v on 2 replicas", h, want)
	}
}
