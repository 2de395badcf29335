package alloc_test

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestBins: on two sites of 4 A100s, Take puts jobs where the placer
// would (the first site with room) and refuses a job no site can hold
// beside them, though the two sites' GPUs left add up to it; a running job
// stays where it runs. TakeSpread puts elastic jobs' minimums where the
// most GPUs are left beside what the jobs before them may grow to.
func TestBins(t *testing.T) {
	a100 := []cluster.NodeSpec{{Count: 1, GPUs: 4, GPU: "a100"}}
	c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{{Name: "a", Nodes: a100}, {Name: "b", Nodes: a100}}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	site := func(b *alloc.Bins, i int) string {
		if i < 0 {
			return "none"
		}
		a := engine.Assignment{GPUs: 1}
		b.Name(&a, i)
		return a.Site
	}
	var b alloc.Bins
	if !b.Reset(policytest.Snap(t, 0, c)) {
		t.Fatal("Reset: no bins on two sites")
	}
	s := policytest.Snap(t, 0, c, policytest.Hold("r", 0, 4, 100),
		policytest.Wait("w1", 1, 3, 100), policytest.Wait("w2", 2, 1, 100), policytest.Wait("w3", 3, 1, 100))
	b.Reset(s)
	got := []string{site(&b, b.Take(s.Jobs[1], "a100", 3)), site(&b, b.Take(s.Jobs[2], "a100", 1)), site(&b, b.Take(s.Jobs[3], "a100", 1)), site(&b, b.Take(s.Jobs[0], "a100", 4))}
	// w1 and w2 fill b (the GPUs free now) before the running job's site;
	// w3 finds none free now and takes one of a's, which r then lacks.
	if want := []string{"b", "b", "a", "none"}; !slices.Equal(got, want) {
		t.Errorf("Take: %v, want %v", got, want)
	}
	b.Reset(s)
	if got := site(&b, b.Take(s.Jobs[0], "a100", 4)); got != "a" {
		t.Errorf("Take of the running job first: %s, want a", got)
	}
	s = policytest.Snap(t, 0, c, policytest.Wait("e1", 1, 3, 100), policytest.Wait("e2", 2, 3, 100), policytest.Wait("e3", 3, 2, 100))
	b.Reset(s)
	got = nil
	for _, st := range s.Jobs {
		got = append(got, site(&b, b.TakeSpread(st, "a100", 1, st.Job.GPUs)))
	}
	if want := []string{"a", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("TakeSpread: %v, want %v", got, want)
	}
	b.Reset(s)
	got = nil
	for _, st := range s.Jobs {
		got = append(got, site(&b, b.Take(st, "a100", 1)))
	}
	if want := []string{"a", "a", "a"}; !slices.Equal(got, want) {
		t.Errorf("Take (first fit) of the minimums: %v, want %v", got, want)
	}
}
