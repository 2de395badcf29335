package elastic

import (
	"testing"

	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// r(n) below is a job's remaining seconds on n GPUs. The pairwise rule gives
// the GPU to the shorter job l over the longer h iff
// r_l(n_l)/r_l(n_l+1) + r_h(n_h+1)/r_h(n_h) > 2. Under linear scaling that
// reads (n_l+1)/n_l + n_h/(n_h+1) > 2, i.e. n_l <= n_h.

func TestAFS(t *testing.T) {
	checkElastic(t, "afs", []elasticCase{
		{
			// Fewer GPUs than jobs: shortest remaining time first, whatever
			// the arrival order: b (100), c (200); a (300) waits.
			name: "fewer GPUs than jobs: shortest first", cluster: "1x2:t4",
			jobs: []policytest.JobState{ej("a", 0, 1, 4, 300), ej("b", 1, 1, 4, 100), ej("c", 2, 1, 4, 200)},
			want: []string{"b:1", "c:1"},
		},
		{
			// Linear: l = a (100), h = b (300): 100/50 + 150/300 = 2.5 > 2:
			// the shorter job a gets the third GPU.
			name: "pairwise: the shorter job wins", cluster: "1x3:t4",
			rates: rateModel{"a": linear(3), "b": linear(3)},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100), ej("b", 1, 1, 3, 300)},
			want:  []string{"a:2", "b:1"},
		},
		{
			// The rule flips when the shorter job scales poorly: a on 2 GPUs
			// runs 1.2x: 100/83.3 + 150/300 = 1.2 + 0.5 = 1.7 < 2: b.
			name: "pairwise: flips to the longer job", cluster: "1x3:t4",
			rates: rateModel{"a": {1, 1.2, 1.3}, "b": linear(3)},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100), ej("b", 1, 1, 3, 300)},
			want:  []string{"b:2", "a:1"},
		},
		{
			// Exactly 2 (a 1.5x: 1.5 + 0.5) is not more than 2: b.
			name: "pairwise: a tie goes to the longer job", cluster: "1x3:t4",
			rates: rateModel{"a": {1, 1.5}, "b": linear(3)},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100), ej("b", 1, 1, 3, 300)},
			want:  []string{"b:2", "a:1"},
		},
		{
			// Three linear jobs, 5 GPUs, 2 after one each.
			// GPU 4: a vs b: l = a, 2 + 0.5 > 2: a; a vs c: a again.
			// GPU 5: a (2 GPUs, r 50) vs b (r 200): l = a, 50/33.3 + 100/200
			// = 1.5 + 0.5 = 2, not > 2: b. b vs c (r 400): l = b,
			// 2 + 0.5 > 2: b.
			name: "tournament over three jobs", cluster: "1x5:t4",
			jobs: []policytest.JobState{ej("a", 0, 1, 5, 100), ej("b", 1, 1, 5, 200), ej("c", 2, 1, 5, 400)},
			want: []string{"a:2", "b:2", "c:1"},
		},
		{
			// a (the shorter) is at its maximum 1: every extra GPU goes to
			// b up to its 2; the fourth GPU stays idle.
			name: "maximum GPUs", cluster: "1x4:t4",
			jobs: []policytest.JobState{ej("a", 0, 1, 1, 100), ej("b", 1, 1, 2, 300)},
			want: []string{"b:2", "a:1"},
		},
		{
			// GPUs go out even when they no longer help (as alg_c does):
			// a alone slows down on 2 GPUs, still gets both.
			name: "work-conserving", cluster: "1x2:t4",
			rates: rateModel{"a": {1, 0.5}},
			jobs:  []policytest.JobState{ej("a", 0, 1, 2, 100)},
			want:  []string{"a:2"},
		},
		{
			// ...but not GPUs the model says it cannot run on (rate 0 on 3).
			name: "cannot run on one more", cluster: "1x3:t4",
			rates: rateModel{"a": {1, 2, 0}},
			jobs:  []policytest.JobState{ej("a", 0, 1, 3, 100)},
			want:  []string{"a:2"},
		},
		{
			// Minimums, shortest r(min) first. The duration model counts
			// work in seconds on the minimum: r(min) = a 1000, b 900, c 500.
			// c takes 1, b 2, and a's 3 no longer fit the one left. That GPU:
			// c (r 500) vs b (r 900): l = c, 500/250 + 600/900 = 2.67 > 2: c.
			name: "minimum GPUs, shortest first", cluster: "1x4:t4",
			jobs: []policytest.JobState{ej("a", 0, 3, 4, 1000), ej("b", 1, 2, 4, 900), ej("c", 2, 1, 4, 500)},
			want: []string{"b:2", "c:2"},
		},
		{
			// a's work is done (r = 0 on any count: the ratio 0/0 counts as
			// 1): 1 + 150/300 = 1.5 < 2, the GPU goes to b.
			name: "finished job gets no extra", cluster: "1x3:t4",
			jobs: []policytest.JobState{policytest.WithProgress(ej("a", 0, 1, 3, 100), 100), ej("b", 1, 1, 3, 300)},
			want: []string{"b:2", "a:1"},
		},
		{
			// Identical jobs, one GPU: the earlier submission, then the
			// smaller ID.
			name: "ties by submission then ID", cluster: "1x1:t4",
			jobs: []policytest.JobState{ej("b", 0, 1, 4, 100), ej("a", 0, 1, 4, 100), ej("c", 0, 1, 4, 100)},
			want: []string{"a:1"},
		},
		{
			// Pools per type: x, alone in a, takes both. In b, y (type b)
			// and z (any type, bound to b: 3 GPUs left there against a's 1),
			// linear: y (100) vs z (400): l = y, 100/50 + 200/400 = 2.5 > 2:
			// y; then y (2 GPUs, r 50) vs z: 50/33.3 + 0.5 = 2, not > 2: z.
			name: "one pool per GPU type", cluster: "1x2:a,1x4:b",
			jobs: []policytest.JobState{typed(ej("x", 0, 1, 4, 100), "a"), typed(ej("y", 1, 1, 4, 100), "b"), ej("z", 2, 1, 4, 400)},
			want: []string{"x:2:a", "y:2:b", "z:2:b"},
		},
		{
			// From hints: a (left 100) scales well, b (left 300) poorly.
			// l = a: r_a(1)/r_a(2) = 1/0.6 = 1.667, r_b(2)/r_b(1) = 0.85:
			// 2.517 > 2: a. Swap the hints: 1/0.85 + 0.6 = 1.776 < 2: b.
			name: "hints: shorter job scales well", cluster: "1x3:t4",
			hints: map[string]*goodput.Hints{"a": hintsGood, "b": hintsPoor},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 300), 64)},
			want:  []string{"a:2", "b:1"},
		},
		{
			name: "hints: shorter job scales poorly", cluster: "1x3:t4",
			hints: map[string]*goodput.Hints{"a": hintsPoor, "b": hintsGood},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 300), 64)},
			want:  []string{"b:2", "a:1"},
		},
		{
			// Hints cap a job at batch / smallest per-GPU batch: 4 of 6.
			// Two GPUs stay idle (no other job).
			name: "hints: maximum is batch / smallest per-GPU batch", cluster: "1x6:t4",
			hints: map[string]*goodput.Hints{"a": hintsPoor},
			jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 6, 100), 64)},
			want:  []string{"a:4"},
		},
	})
	// The oracle ignores the hints: linear, so the shorter job (1 GPU each)
	// wins: a, even where its hints say it scales poorly.
	checkElastic(t, "afs:oracle=true", []elasticCase{{
		name: "oracle ignores hints", cluster: "1x3:t4",
		hints: map[string]*goodput.Hints{"a": hintsPoor, "b": hintsGood},
		jobs:  []policytest.JobState{withBatch(ej("a", 0, 1, 8, 100), 64), withBatch(ej("b", 1, 1, 8, 300), 64)},
		want:  []string{"a:2", "b:1"},
	}})
}
