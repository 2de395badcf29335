package elastic

import (
	"testing"

	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// r(n) below is a job's remaining seconds on n GPUs: with a rate table,
// work / rate[n-1]; with hints, left progress x iter(n) (see testLimits).

func TestOptimus(t *testing.T) {
	checkElastic(t, "optimus", []elasticCase{
		{
			// One GPU each, then the third GPU by marginal gain:
			// a: r(1) = 100, r(2) = 100/1.25 = 80: gain 20.
			// b: r(1) = 300, r(2) = 300/1.2 = 250: gain 50.
			// b scales worse but has more left: b wins.
			name: "extra GPU to the larger gain", cluster: "1x3:t4",
			rates: rateModel{"a": {1, 1.25, 1.4}, "b": {1, 1.2, 1.3}},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100), ej("b", 1, 1, 3, 300)},
			want:  []string{"b:2", "a:1"},
		},
		{
			// The same with b as short as a: b's gain is 100 - 100/1.2 =
			// 16.7 < a's 20: a wins.
			name: "equal work: the better scaler wins", cluster: "1x3:t4",
			rates: rateModel{"a": {1, 1.25, 1.4}, "b": {1, 1.2, 1.3}},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100), ej("b", 1, 1, 3, 100)},
			want:  []string{"a:2", "b:1"},
		},
		{
			// 5 GPUs, 3 left after one each. Linear: a: 100 -> 50 (gain 50);
			// b: 400 -> 200 (gain 200): b. b: 200 -> 133.3 (66.7) beats a's
			// 50: b. b: 133.3 -> 100 (33.3) now loses to a's 50: a.
			name: "gains recomputed after each GPU", cluster: "1x5:t4",
			rates: rateModel{"a": linear(5), "b": linear(5)},
			jobs:  []policytest.JobState{ej("a", 0, 1, 5, 100), ej("b", 1, 1, 5, 400)},
			want:  []string{"b:3", "a:2"},
		},
		{
			// Fewer GPUs than jobs: one each in arrival order, however long
			// the jobs are (c, the shortest, arrived last and waits).
			name: "fewer GPUs than jobs: arrival order", cluster: "1x2:t4",
			jobs: []policytest.JobState{ej("a", 0, 1, 4, 900), ej("b", 1, 1, 4, 500), ej("c", 2, 1, 4, 10)},
			want: []string{"a:1", "b:1"},
		},
		{
			// A second GPU slows a down (r(2) = 100/0.9 > r(1)): no gain, no
			// GPU, and three GPUs stay idle.
			name: "no gain, no GPU", cluster: "1x4:t4",
			rates: rateModel{"a": {1, 0.9, 0.8, 0.7}},
			jobs:  []policytest.JobState{ej("a", 0, 1, 4, 100)},
			want:  []string{"a:1"},
		},
		{
			// Linear scaling: every GPU helps, but a stops at its maximum 2
			// and b at 4; two GPUs stay idle.
			name: "maximum GPUs", cluster: "1x8:t4",
			jobs: []policytest.JobState{ej("a", 0, 1, 2, 1000), ej("b", 1, 1, 4, 100)},
			want: []string{"b:4", "a:2"},
		},
		{
			// Minimums first, smallest first (the artifact sorts by
			// min_replicas): b (1), a (2), then c (3) no longer fits the one
			// GPU left, which goes to a (gain 1000/2 - 1000/3 > 0).
			name: "minimum GPUs, smallest first", cluster: "1x4:t4",
			jobs: []policytest.JobState{ej("a", 0, 2, 4, 1000), ej("b", 1, 1, 1, 100), ej("c", 2, 3, 3, 100)},
			want: []string{"a:3", "b:1"},
		},
		{
			// Equal gains (identical jobs): the earlier submission, then the
			// smaller ID, gets the extra GPU.
			name: "ties by submission then ID", cluster: "1x3:t4",
			jobs: []policytest.JobState{ej("b", 0, 1, 4, 100), ej("a", 0, 1, 4, 100)},
			want: []string{"a:2", "b:1"},
		},
		{
			// Pools per type. x (type a) takes both a GPUs. y (type b) and z
			// (any type: b has 4-1 = 3 left, a 2-1 = 1) share the 4 b GPUs:
			// linear, y 100 -> 50 (gain 50), z 400 -> 200 (gain 200): z;
			// then z 200 -> 133 (67) beats y's 50: z.
			name: "one pool per GPU type", cluster: "1x2:a,1x4:b",
			jobs: []policytest.JobState{typed(ej("x", 0, 1, 4, 100), "a"), typed(ej("y", 1, 1, 4, 100), "b"), ej("z", 2, 1, 4, 400)},
			want: []string{"z:3:b", "x:2:a", "y:1:b"},
		},
		{
			// A job whose type the cluster lacks never runs.
			name: "missing type", cluster: "1x2:t4",
			jobs: []policytest.JobState{typed(ej("x", 0, 1, 4, 100), "v100"), ej("y", 1, 1, 4, 100)},
			want: []string{"y:2"},
		},
		{
			// From hints: a scales well (iter 1 -> 0.6), b poorly (1 ->
			// 0.85). a: r(1) = 100, r(2) = 60: gain 40. b: r(1) = 300,
			// r(2) = 255: gain 45: b.
			name: "hints: larger gain", cluster: "1x3:t4",
			hints: map[string]*goodput.Hints{"a": hintsGood, "b": hintsPoor},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 300), 64)},
			want:  []string{"b:2", "a:1"},
		},
		{
			// The same jobs with b at 120 left: b's gain 120 x 0.15 = 18 <
			// a's 40. (The duration model, linear, would say b: 60 > 50.)
			name: "hints: the better scaler wins", cluster: "1x3:t4",
			hints: map[string]*goodput.Hints{"a": hintsGood, "b": hintsPoor},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 120), 64)},
			want:  []string{"a:2", "b:1"},
		},
		{
			// A lone job with hints: gains 40, 17.2, 7.8 from 2 to 4 GPUs,
			// then batch 64 / per-GPU 16 caps it at 4 of its 8.
			name: "hints: maximum is batch / smallest per-GPU batch", cluster: "1x8:t4",
			hints: map[string]*goodput.Hints{"a": hintsGood},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64)},
			want:  []string{"a:4"},
		},
		{
			// Mixed: a from hints (gain 40), c without hints from the
			// duration model (100 -> 50: gain 50): c.
			name: "no hints: the model", cluster: "1x3:t4",
			hints: map[string]*goodput.Hints{"a": hintsGood},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), ej("c", 1, 1, 8, 100)},
			want:  []string{"c:2", "a:1"},
		},
	})
	// With the oracle, the hints are ignored: linear, a 100 -> 50 (gain 50),
	// b 120 -> 60 (gain 60): b, unlike "hints: the better scaler wins".
	checkElastic(t, "optimus:oracle=true", []elasticCase{{
		name: "oracle ignores hints", cluster: "1x3:t4",
		hints: map[string]*goodput.Hints{"a": hintsGood, "b": hintsPoor},
		jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 120), 64)},
		want:  []string{"b:2", "a:1"},
	}})
}

func TestOptimusAndAFSParse(t *testing.T) {
	for _, tc := range []struct{ spec, name string }{
		{"optimus", "optimus"},
		{"optimus:oracle=false", "optimus"},
		{"optimus:oracle=true", "optimus:oracle=true"},
		{"afs", "afs"},
		{"afs:oracle=true", "afs:oracle=true"},
	} {
		if got := fam.Parse(t, tc.spec, contract.Context{}).Name(); got != tc.name {
			t.Errorf("%s: Name() = %q, want %q", tc.spec, got, tc.name)
		}
	}
	for _, spec := range []string{"optimus:oracle=maybe", "afs:oracle=2", "optimus:x=1"} {
		if _, err := fam(spec, contract.Context{}); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", spec)
		}
	}
	for _, name := range []string{"optimus", "afs"} {
		i, ok := policytest.Lookup(Policies, name)
		if !ok || !i.Elastic || i.AdaptBatch || i.Knobs == "" {
			t.Errorf("%s: info %+v, want an elastic, fixed-batch policy with knobs", name, i)
		}
	}
}
