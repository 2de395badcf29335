package classic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// long is a rigid job that never finishes within a scenario.
func long(id string, at float64, gpus int) *job.Job {
	return enginetest.Job(id).At(at).GPUs(gpus).Seconds(1e6).Obj()
}

func TestTiresiasQueueOf(t *testing.T) {
	// Queue i holds service in [limit[i-1], limit[i]): reaching a limit
	// exactly demotes (Tiresias' simulator: "if j_gt >= queue_limit").
	for _, tc := range []struct {
		spec    string
		service []float64
		queue   []int
	}{
		{"tiresias", []float64{0, 3249.9, 3250, 7199, 7200, 17999, 18000, 1e9}, []int{0, 0, 1, 1, 2, 2, 3, 3}},
		{"tiresias:preset=pollux", []float64{0, 57599, 57600, 1e9}, []int{0, 0, 1, 1}},
		{"tiresias:limits=100", []float64{0, 99, 100, 101}, []int{0, 0, 1, 1}},
	} {
		p := fam.Parse(t, tc.spec, contract.Context{}).(*Tiresias)
		for i, s := range tc.service {
			if got := p.queueOf(s); got != tc.queue[i] {
				t.Errorf("%s: queueOf(%v) = %d, want %d", tc.spec, s, got, tc.queue[i])
			}
		}
	}
}

// TestTiresiasLASEngine: 2D-LAS on 2 GPUs with limits 100 and 300 GPU-s
// (three queues). a (2 GPUs) arrives at 0, b and c (1 GPU each) at 10; none
// finishes. Attained service is GPUs x seconds held.
func TestTiresiasLASEngine(t *testing.T) {
	fam.Play(t, "tiresias:limits=100/300", "1x2:t4", []policytest.Step{
		{At: 0, Submit: []*job.Job{long("a", 0, 2)}, Running: []string{"a"}},
		// a has 20 GPU-s, still Q0 and first in it (entered at 0): the
		// newcomers of the same queue do not preempt it.
		{At: 10, Submit: []*job.Job{long("b", 10, 1), long("c", 10, 1)}, Running: []string{"a"}},
		{At: 49, Running: []string{"a"}}, // 98 GPU-s: still Q0
		// 100 GPU-s: a drops to Q1; b and c, in Q0, preempt it.
		{At: 50, Running: []string{"b", "c"}},
		{At: 149, Running: []string{"b", "c"}}, // 99 GPU-s each
		// b and c reach 100 and enter Q1 at 150, after a (entered at 50):
		// a runs, b and c wait.
		{At: 150, Running: []string{"a"}},
		// a: 100 + 2 x 100 = 300 GPU-s at 250, Q2; b and c (Q1) run.
		{At: 250, Running: []string{"b", "c"}},
		{At: 349, Running: []string{"b", "c"}}, // 199 GPU-s each: Q1
		// b and c reach 300 at 450 and enter Q2 after a (entered at 250).
		{At: 450, Running: []string{"a"}},
	})
}

// TestTiresiasQueueEntryOrder: inside a queue jobs go by the time they
// entered it, not by submission. 3 GPUs, one limit of 100 GPU-s.
func TestTiresiasQueueEntryOrder(t *testing.T) {
	fam.Play(t, "tiresias:limits=100", "1x3:t4", []policytest.Step{
		{At: 0, Submit: []*job.Job{long("a", 0, 1)}, Running: []string{"a"}},
		{At: 10, Submit: []*job.Job{long("b", 10, 2)}, Running: []string{"a", "b"}},
		// b (2 GPUs) reaches 100 GPU-s at 60 and enters Q1; both still fit.
		{At: 60, Running: []string{"a", "b"}},
		// a reaches 100 at 100 and enters Q1 after b. d (Q0) takes one
		// GPU; of Q1, b (entered at 60) takes the other two and a, though
		// submitted first, waits.
		{At: 100, Submit: []*job.Job{long("d", 100, 1)}, Running: []string{"b", "d"}},
	})
}

// TestTiresiasPresetsEngine checks the presets' thresholds through a run.
func TestTiresiasPresetsEngine(t *testing.T) {
	t.Run("paper", func(t *testing.T) {
		// One GPU; a at 0, b at 10, both 1 GPU. Limits 3250/7200/18000.
		fam.Play(t, "tiresias", "1x1:t4", []policytest.Step{
			{At: 0, Submit: []*job.Job{long("a", 0, 1)}, Running: []string{"a"}},
			{At: 10, Submit: []*job.Job{long("b", 10, 1)}, Running: []string{"a"}},
			{At: 3249, Running: []string{"a"}},
			{At: 3250, Running: []string{"b"}}, // a: 3250 GPU-s, Q1 (entered 3250)
			{At: 6499, Running: []string{"b"}},
			{At: 6500, Running: []string{"a"}},  // b: 3250, Q1 (entered 6500) after a
			{At: 10450, Running: []string{"b"}}, // a: 3250 + 3950 = 7200, Q2
			{At: 14400, Running: []string{"a"}}, // b: 3250 + 3950 = 7200, Q2 after a
			{At: 25200, Running: []string{"b"}}, // a: 7200 + 10800 = 18000, Q3
		})
	})
	t.Run("pollux", func(t *testing.T) {
		// Four GPUs; a (4 GPUs) at 0 reaches the one limit, 57600 GPU-s,
		// at 14400 s; b (1 GPU, Q0) then preempts it, and a waits although
		// 3 GPUs stay idle (Tiresias runs jobs on their requested count).
		fam.Play(t, "tiresias:preset=pollux", "1x4:t4", []policytest.Step{
			{At: 0, Submit: []*job.Job{long("a", 0, 4)}, Running: []string{"a"}},
			{At: 10, Submit: []*job.Job{long("b", 10, 1)}, Running: []string{"a"}},
			{At: 14399, Running: []string{"a"}},
			{At: 14400, Running: []string{"b"}},
		})
	})
}

// TestTiresiasStarvationEngine: one GPU, one limit of 100 GPU-s. l runs from
// 0 and drops to Q1 at 100, when s1 (80 s) arrives and preempts it. s2
// (80 s) arrives at 180 as s1 finishes, s3 (80 s) at 250.
//
// With knob=1, l, preempted at 100 after executing 100 s, is promoted to Q0
// once it has waited 1 x 100 s, at the round at 200. It enters Q0 then,
// after s2 (entered at 180) and before s3 (250), so it runs when s2
// finishes at 260, until its service since the promotion reaches 100 GPU-s
// again at 360; s3 then runs to 440.
//
// With knob=0, l stays in Q1: s3 runs from 260 to 340 before it.
func TestTiresiasStarvationEngine(t *testing.T) {
	short := func(id string, at float64) *job.Job { return enginetest.Job(id).At(at).Seconds(80).Obj() }
	start := func() []policytest.Step {
		return []policytest.Step{
			{At: 0, Submit: []*job.Job{long("l", 0, 1)}, Running: []string{"l"}},
			{At: 100, Submit: []*job.Job{short("s1", 100)}, Running: []string{"s1"}},
			{At: 180, Submit: []*job.Job{short("s2", 180)}, Running: []string{"s2"}},
			{At: 200, Running: []string{"s2"}},
			{At: 250, Submit: []*job.Job{short("s3", 250)}, Running: []string{"s2"}},
		}
	}
	fam.Play(t, "tiresias:limits=100:knob=1", "1x1:t4", append(start(),
		policytest.Step{At: 260, Running: []string{"l"}},
		policytest.Step{At: 359, Running: []string{"l"}},
		policytest.Step{At: 360, Running: []string{"s3"}},
		policytest.Step{At: 440, Running: []string{"l"}},
	))
	fam.Play(t, "tiresias:limits=100", "1x1:t4", append(start(),
		policytest.Step{At: 260, Running: []string{"s3"}},
		policytest.Step{At: 340, Running: []string{"l"}},
	))
}

// TestTiresiasStarvationRule checks the promotion rule at its boundary on
// hand-built snapshots. One GPU, one limit of 100 GPU-s. r runs in Q1
// (entered at 50). l waits in Q1 (entered at 100), preempted at 100 after
// executing 100 s, so with knob K it is promoted when now - 100 >= K x 100;
// promoted, it goes to Q0 and preempts r.
func TestTiresiasStarvationRule(t *testing.T) {
	c := enginetest.Cluster("1x1:t4")
	r := policytest.JobState{Job: long("r", 0, 1), Held: 1, Attained: 150, Executed: 150, Starts: 1, Memo: engine.Memo{2, 50, 0, 0}}
	l := policytest.JobState{Job: long("l", 1, 1), Attained: 100, Executed: 100, LastStop: 100, Starts: 1, Memo: engine.Memo{2, 100, 0, 0}}
	// Promoted once before: service 250 - 100 = 150 (Q1), executed 150 -
	// 100 = 50 s since the promotion, preempted at 300.
	again := policytest.JobState{Job: long("l", 1, 1), Attained: 250, Executed: 150, LastStop: 300, Starts: 2, Memo: engine.Memo{2, 300, 100, 100}}
	for _, tc := range []struct {
		spec string
		now  float64
		l    policytest.JobState
		want string      // the job that runs
		memo engine.Memo // l's memo after the round
	}{
		{"tiresias:limits=100:knob=1", 199, l, "r", engine.Memo{2, 100, 0, 0}},
		{"tiresias:limits=100:knob=1", 200, l, "l", engine.Memo{1, 200, 100, 100}},
		{"tiresias:limits=100:knob=2", 299, l, "r", engine.Memo{2, 100, 0, 0}},
		{"tiresias:limits=100:knob=2", 300, l, "l", engine.Memo{1, 300, 100, 100}},
		{"tiresias:limits=100:knob=0.5", 150, l, "l", engine.Memo{1, 150, 100, 100}},
		// knob=0 never promotes.
		{"tiresias:limits=100", 1e7, l, "r", engine.Memo{2, 100, 0, 0}},
		// The second promotion weighs only the 50 s executed since the
		// first: knob=2 promotes at 300 + 2 x 50 = 400.
		{"tiresias:limits=100:knob=2", 399, again, "r", engine.Memo{2, 300, 100, 100}},
		{"tiresias:limits=100:knob=2", 400, again, "l", engine.Memo{1, 400, 250, 150}},
		{"tiresias-gittins:limits=100:knob=2", 400, again, "l", engine.Memo{1, 400, 250, 150}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p := fam.Parse(t, tc.spec, contract.Context{Jobs: []*job.Job{enginetest.Job("x").Seconds(500).Obj()}})
			s := policytest.Snap(t, tc.now, c, r, tc.l)
			plan := p.Schedule(s)
			if got := policytest.Runs(plan); !slices.Equal(got, []string{tc.want + ":1"}) {
				t.Errorf("at %v: plan %v, want %s", tc.now, got, tc.want)
			}
			if got := memoAfter(plan, s, "l"); got != tc.memo {
				t.Errorf("at %v: l's memo %v, want %v", tc.now, got, tc.memo)
			}
			if got := memoAfter(plan, s, "r"); got != (engine.Memo{2, 50, 0, 0}) {
				t.Errorf("at %v: r's memo %v changed", tc.now, got)
			}
		})
	}
	// A job that never ran, or one in Q0, is never promoted: nothing to
	// reset. A Q0 job waiting long keeps its entry time.
	p := fam.Parse(t, "tiresias:limits=100:knob=1", contract.Context{})
	fresh := policytest.JobState{Job: long("f", 5, 1)}
	q0 := policytest.JobState{Job: long("q", 6, 1), Attained: 40, Executed: 40, LastStop: 50, Starts: 1, Memo: engine.Memo{1, 6, 0, 0}}
	s := policytest.Snap(t, 1e6, c, policytest.JobState{Job: long("r", 0, 1), Held: 1, Attained: 10, Executed: 10, Starts: 1, Memo: engine.Memo{1, 0, 0, 0}}, fresh, q0)
	plan := p.Schedule(s)
	if got := memoAfter(plan, s, "f"); got != (engine.Memo{1, 5, 0, 0}) {
		t.Errorf("never-run job: memo %v, want {1 5 0 0}", got)
	}
	if got := memoAfter(plan, s, "q"); got != (engine.Memo{1, 6, 0, 0}) {
		t.Errorf("waiting Q0 job: memo %v, want {1 6 0 0}", got)
	}
}

// TestTiresiasOrder checks whole plans on hand-built snapshots.
func TestTiresiasOrder(t *testing.T) {
	// Attained service and memos as the previous rounds left them.
	q2 := policytest.JobState{Job: long("q2", 0, 1), Attained: 500, Executed: 500, LastStop: 600, Starts: 1, Memo: engine.Memo{3, 400, 0, 0}}
	q1 := policytest.JobState{Job: long("q1", 1, 1), Attained: 150, Executed: 150, LastStop: 500, Starts: 1, Memo: engine.Memo{2, 300, 0, 0}}
	q0 := policytest.JobState{Job: long("q0", 2, 1), Attained: 50, Executed: 50, LastStop: 60, Starts: 1, Memo: engine.Memo{1, 2, 0, 0}}
	fresh := policytest.JobState{Job: long("new", 3, 1)}
	for _, tc := range []struct {
		name    string
		cluster string
		jobs    []policytest.JobState
		want    []string
	}{
		// Q0 first, then Q1, then Q2, whatever the submission order.
		{"higher queue first", "1x8:t4", []policytest.JobState{q2, q1, q0, fresh}, []string{"q0:1", "new:1", "q1:1", "q2:1"}},
		{"higher queue first on one GPU", "1x1:t4", []policytest.JobState{q2, q1, q0, fresh}, []string{"q0:1"}},
		// A running Q2 job is preempted by a waiting Q1 job.
		{"preempts a lower queue", "1x1:t4", []policytest.JobState{{Job: q2.Job, Held: 1, Attained: 500, Executed: 500, Starts: 1, Memo: q2.Memo}, q1}, []string{"q1:1"}},
		// Both in Q1: b entered at 200, before a (300), though submitted later.
		{"entry order inside a queue", "1x2:t4", []policytest.JobState{
			{Job: long("a", 0, 1), Attained: 200, Executed: 200, LastStop: 300, Starts: 1, Memo: engine.Memo{2, 300, 0, 0}},
			{Job: long("b", 5, 1), Attained: 100, Executed: 100, LastStop: 250, Starts: 1, Memo: engine.Memo{2, 200, 0, 0}},
		}, []string{"b:1", "a:1"}},
		// a and b both reach 100 GPU-s by this round and enter Q1 together
		// (at 1000): the earlier submission goes first, then the ID.
		{"same entry time by submission", "1x1:t4", []policytest.JobState{
			{Job: long("b", 5, 1), Attained: 100, Executed: 100, LastStop: 900, Starts: 1, Memo: engine.Memo{1, 5, 0, 0}},
			{Job: long("a", 7, 1), Attained: 120, Executed: 120, LastStop: 950, Starts: 1, Memo: engine.Memo{1, 7, 0, 0}},
		}, []string{"b:1"}},
		{"same entry and submission by ID", "1x1:t4", []policytest.JobState{{Job: long("n2", 9, 1)}, {Job: long("n1", 9, 1)}}, []string{"n1:1"}},
		// Entry order holds against running jobs too: big entered Q1 at
		// 50, small (running) at 80, so big takes the 4 GPUs and small is
		// preempted. (Tiresias' own simulator moves waiting jobs behind
		// running ones of the same queue each round and would keep small;
		// the Pollux artifact's version orders by entry, as here.)
		{"entry order preempts inside a queue", "1x4:t4", []policytest.JobState{
			{Job: long("big", 0, 4), Attained: 200, Executed: 50, LastStop: 60, Starts: 1, Memo: engine.Memo{2, 50, 0, 0}},
			{Job: long("small", 1, 1), Held: 1, Attained: 150, Executed: 150, Starts: 1, Memo: engine.Memo{2, 80, 0, 0}},
		}, []string{"big:4"}},
		// big (Q0, 4 GPUs) does not fit next to a; small, in Q1, starts on
		// an idle GPU instead of waiting behind it.
		{"smaller jobs pass a misfit", "1x4:t4", []policytest.JobState{
			{Job: long("a", 0, 2), Held: 2, Attained: 20, Executed: 10, Starts: 1, Memo: engine.Memo{1, 0, 0, 0}},
			{Job: long("big", 1, 4)},
			{Job: long("small", 2, 1), Attained: 150, Executed: 150, LastStop: 150, Starts: 1, Memo: engine.Memo{2, 150, 0, 0}},
		}, []string{"a:2", "small:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fam.Parse(t, "tiresias:limits=100/300", contract.Context{})
			if got := policytest.Runs(p.Schedule(policytest.Snap(t, 1000, enginetest.Cluster(tc.cluster), tc.jobs...))); !slices.Equal(got, tc.want) {
				t.Errorf("plan %v, want %v", got, tc.want)
			}
		})
	}
}

// memoAfter is a job's memo after a round: the plan's update, or the
// snapshot's memo when the plan leaves it unchanged (Plan.Memo holds only
// updated memos).
func memoAfter(p engine.Plan, s *engine.Snapshot, id string) engine.Memo {
	if m, ok := p.Memo[id]; ok {
		return m
	}
	for _, st := range s.Jobs {
		if st.Job.ID == id {
			return st.Memo
		}
	}
	panic("no job " + id)
}

// TestTiresiasMemo: the memo records queue+1 and the entry time. A job never
// started enters Q0 at its submission; a job that crosses a limit enters the
// new queue now.
func TestTiresiasMemo(t *testing.T) {
	p := fam.Parse(t, "tiresias:limits=100/300", contract.Context{})
	s := policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"),
		policytest.JobState{Job: long("new", 7, 1)},
		policytest.JobState{Job: long("stay", 1, 1), Held: 1, Attained: 50, Executed: 50, Starts: 1, Memo: engine.Memo{1, 1, 0, 0}},
		policytest.JobState{Job: long("down", 2, 1), Held: 1, Attained: 100, Executed: 100, Starts: 1, Memo: engine.Memo{1, 2, 0, 0}},
		policytest.JobState{Job: long("down2", 3, 1), Held: 1, Attained: 350, Executed: 350, Starts: 1, Memo: engine.Memo{2, 500, 0, 0}},
	)
	plan := p.Schedule(s)
	for id, want := range map[string]engine.Memo{
		"new":   {1, 7, 0, 0},
		"stay":  {1, 1, 0, 0},
		"down":  {2, 1000, 0, 0},
		"down2": {3, 1000, 0, 0},
	} {
		if got := memoAfter(plan, s, id); got != want {
			t.Errorf("%s: memo %v, want %v", id, got, want)
		}
	}
	// The snapshot itself is read-only: the policy must not write to it.
	if s.Jobs[1].Memo != (engine.Memo{1, 2, 0, 0}) {
		t.Errorf("Schedule modified the snapshot's memo: %v", s.Jobs[1].Memo)
	}
}

// ---------------------------------------------------------------------------
// 2D-Gittins
// ---------------------------------------------------------------------------

// TestGittinsIndex checks G(a, D) = P(S-a <= D | S > a) / E[min(S-a, D) | S > a]
// for the samples {100, 200, 400}, worked out by hand.
func TestGittinsIndex(t *testing.T) {
	g := NewGittins([]float64{400, 100, 200}, 200) // any order
	for _, tc := range []struct {
		a, d float64
		want float64
		why  string
	}{
		{0, 100, 1.0 / 300, "P = 1/3 (100); E = (100+100+100)/3 = 100"},
		{0, 200, 1.0 / 250, "P = 2/3 (100, 200); E = (100+200+200)/3 = 500/3"},
		{0, 400, 3.0 / 700, "P = 1; E = (100+200+400)/3 = 700/3"},
		{0, 1e6, 3.0 / 700, "D beyond every sample: P = 1, E = the mean"},
		{50, 100, 1.0 / 250, "P = 1/3 (100 in (50,150]); E = (50+100+100)/3 = 250/3"},
		{100, 100, 1.0 / 200, "alive {200, 400}; P = 1/2; E = (100+100)/2 = 100"},
		{100, 300, 1.0 / 200, "alive {200, 400}; P = 1; E = (100+300)/2 = 200"},
		{150, 50, 1.0 / 100, "alive {200, 400}; P = 1/2; E = (50+50)/2 = 50"},
		{200, 100, 0, "alive {400} (S > a is strict); none ends within 100: P = 0"},
		{200, 200, 1.0 / 200, "alive {400}; P = 1; E = 200"},
		{399, 1, 1, "alive {400}; P = 1; E = 1"},
		{400, 100, 0, "outlived every sample: lowest priority"},
		{1e9, 100, 0, "outlived every sample: lowest priority"},
		{0, 0, 1.0 / 250, "D <= 0 falls back to the quantum, 200"},
		{0, -5, 1.0 / 250, "D <= 0 falls back to the quantum, 200"},
	} {
		if got := g.Index(tc.a, tc.d); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Index(%v, %v) = %v, want %v: %s", tc.a, tc.d, got, tc.want, tc.why)
		}
	}
	// Duplicate samples weigh as many times as they appear: {100, 100,
	// 400} at a = 0, D = 100: P = 2/3, E = 100, G = 1/150.
	if got := NewGittins([]float64{100, 400, 100}, 1).Index(0, 100); math.Abs(got-1.0/150) > 1e-12 {
		t.Errorf("duplicates: Index(0, 100) = %v, want 1/150", got)
	}
}

// gittinsCtx gives Tiresias the distribution {100, 200, 400} GPU-s through
// the trace's jobs (Duration x GPUs).
var gittinsCtx = contract.Context{Jobs: []*job.Job{
	enginetest.Job("s1").Seconds(100).Obj(),
	enginetest.Job("s2").GPUs(2).Seconds(100).Obj(),
	enginetest.Job("s3").GPUs(4).Seconds(100).Obj(),
}}

// TestGittinsOrder: inside a queue 2D-Gittins orders by descending index,
// 2D-LAS by entry. Limit 1000 GPU-s, so D = 1000 - a in Q0; samples
// {100, 200, 400}:
//
//	x  a=0    D=1000: P = 1, E = 700/3              G = 3/700 ~ 0.0043
//	y  a=150  D=850:  alive {200,400}, P = 1, E = 150  G = 1/150 ~ 0.0067
//	z  a=300  D=700:  alive {400}, P = 1, E = 100      G = 1/100
//	w  a=500  outlived every sample                    G = 0
//	v  a=1200 Q1                                       G = 0
//
// The index favours jobs close to a likely completion; v stays last because
// it is in a lower queue.
func TestGittinsOrder(t *testing.T) {
	jobs := []policytest.JobState{
		{Job: long("x", 0, 1)},
		{Job: long("y", 10, 1), Attained: 150, Executed: 150, LastStop: 500, Starts: 1, Memo: engine.Memo{1, 10, 0, 0}},
		{Job: long("z", 20, 1), Attained: 300, Executed: 300, LastStop: 600, Starts: 1, Memo: engine.Memo{1, 20, 0, 0}},
		{Job: long("w", 30, 1), Attained: 500, Executed: 500, LastStop: 700, Starts: 1, Memo: engine.Memo{1, 30, 0, 0}},
		{Job: long("v", 40, 1), Attained: 1200, Executed: 1200, LastStop: 800, Starts: 1, Memo: engine.Memo{2, 700, 0, 0}},
	}
	for _, tc := range []struct {
		spec, cluster string
		want          []string
	}{
		{"tiresias-gittins:limits=1000", "1x8:t4", []string{"z:1", "y:1", "x:1", "w:1", "v:1"}},
		{"tiresias-gittins:limits=1000", "1x1:t4", []string{"z:1"}},
		{"tiresias:limits=1000", "1x8:t4", []string{"x:1", "y:1", "z:1", "w:1", "v:1"}},
		{"tiresias:limits=1000", "1x1:t4", []string{"x:1"}},
	} {
		p := fam.Parse(t, tc.spec, gittinsCtx)
		if got := policytest.Runs(p.Schedule(policytest.Snap(t, 1000, enginetest.Cluster(tc.cluster), jobs...))); !slices.Equal(got, tc.want) {
			t.Errorf("%s on %s: plan %v, want %v", tc.spec, tc.cluster, got, tc.want)
		}
	}
}

// TestGittinsQuantum: the service quantum D is the distance to the queue's
// limit in every queue but the last, and the quantum knob in the last.
// Samples {100, 200, 400}, one limit of 150 GPU-s.
func TestGittinsQuantum(t *testing.T) {
	// In Q0: y (a=120, submitted first) has D = 30; no sample ends in
	// (120, 150], so G = 0. x (a=0) has D = 150: P = 1/3, E = (100+150+150)/3,
	// G = 1/400. x goes first. (With D = 3250 for both, y would lead:
	// 1/180 against 3/700.)
	q0 := []policytest.JobState{
		{Job: long("y", 0, 1), Attained: 120, Executed: 120, LastStop: 120, Starts: 1, Memo: engine.Memo{1, 0, 0, 0}},
		{Job: long("x", 10, 1)},
	}
	// In Q1 D is the quantum. p (a=160), q (a=250):
	//   quantum 100: p: P = 1/2 (200), E = (40+100)/2 = 70, G = 1/140;
	//                q: alive {400}, none ends by 350, G = 0.      p first.
	//   quantum 200: p: P = 1/2, E = (40+200)/2 = 120, G = 1/240;
	//                q: P = 1, E = 150, G = 1/150.                 q first.
	q1 := []policytest.JobState{
		{Job: long("p", 0, 1), Attained: 160, Executed: 160, LastStop: 160, Starts: 1, Memo: engine.Memo{2, 150, 0, 0}},
		{Job: long("q", 10, 1), Attained: 250, Executed: 250, LastStop: 260, Starts: 1, Memo: engine.Memo{2, 160, 0, 0}},
	}
	for _, tc := range []struct {
		spec string
		jobs []policytest.JobState
		want []string
	}{
		{"tiresias-gittins:limits=150", q0, []string{"x:1", "y:1"}},
		{"tiresias:limits=150", q0, []string{"y:1", "x:1"}},
		{"tiresias-gittins:limits=150:quantum=100", q1, []string{"p:1", "q:1"}},
		{"tiresias-gittins:limits=150:quantum=200", q1, []string{"q:1", "p:1"}},
	} {
		p := fam.Parse(t, tc.spec, gittinsCtx)
		if got := policytest.Runs(p.Schedule(policytest.Snap(t, 1000, enginetest.Cluster("1x4:t4"), tc.jobs...))); !slices.Equal(got, tc.want) {
			t.Errorf("%s: plan %v, want %v", tc.spec, got, tc.want)
		}
	}
}

// TestGittinsSamplesFromContext: without dist=, the distribution is each
// trace job's Duration x GPUs, or Context.Service when set; samples that
// are not positive and finite are dropped.
func TestGittinsSamplesFromContext(t *testing.T) {
	jobs := []*job.Job{
		enginetest.Job("a").Seconds(100).Obj(),         // 100 GPU-s
		enginetest.Job("b").GPUs(2).Seconds(100).Obj(), // 200 GPU-s
		enginetest.Job("c").Epochs("cifar10", 5, 128).Obj(),
	}
	for _, tc := range []struct {
		name    string
		service func(*job.Job) float64
		want    float64 // Index(0, 1000): every sample ends within D, so 1/mean
	}{
		{"duration x gpus", nil, 1.0 / 150},
		{"service", func(j *job.Job) float64 { return 2 * j.Duration * float64(j.GPUs) }, 1.0 / 300},
		{"bad service values dropped", func(j *job.Job) float64 {
			return map[string]float64{"a": math.Inf(1), "b": 400, "c": -1}[j.ID]
		}, 1.0 / 400},
	} {
		p := fam.Parse(t, "tiresias-gittins", contract.Context{Jobs: jobs, Service: tc.service}).(*Tiresias)
		if got := p.Gittins.Index(0, 1000); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Index(0, 1000) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadServiceSamples(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       []float64
		err        string
	}{
		// Tiresias' yarn-gput files: a "duration" header, CRLF lines.
		{"yarn", "duration\r\n121\r\n122\r\n124\r\n", []float64{121, 122, 124}, ""},
		{"blank lines and extra columns", "duration,x\n\n5,a\n  7 \n0\n", []float64{5, 7, 0}, ""},
		{"no final newline", "duration\n3.5", []float64{3.5}, ""},
		{"header only", "duration\n", nil, "no samples"},
		{"empty", "", nil, "no samples"},
		{"not a number", "duration\n12\nabc\n", nil, "line 3 field duration: \"abc\""},
		{"negative", "duration\n-4\n", nil, "line 2"},
		{"NaN", "duration\nNaN\n", nil, "line 2"},
		{"Inf", "duration\n1\n+Inf\n", nil, "line 3"},
		{"line too long", "duration\n" + strings.Repeat("1", 70000) + "\n", nil, "token too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".csv")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadServiceSamples(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err %v, want one naming %s and containing %q", err, path, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			// dist=FILE hands the same samples to the policy.
			p := fam.Parse(t, "tiresias-gittins:dist="+path, contract.Context{}).(*Tiresias)
			if !slices.Equal(p.Gittins.sorted, slices.Sorted(slices.Values(tc.want))) {
				t.Errorf("dist=%s: samples %v, want %v", path, p.Gittins.sorted, tc.want)
			}
		})
	}
	if _, err := ReadServiceSamples(filepath.Join(dir, "missing.csv")); err == nil || !strings.Contains(err.Error(), "gittins distribution") {
		t.Errorf("missing file: err %v", err)
	}
}

// gittinsByDefinition computes the index straight from its definition, one
// sample at a time, to cross-check the prefix-sum version.
func gittinsByDefinition(samples []float64, a, d float64) float64 {
	var alive, done, expect float64
	for _, s := range samples {
		if s <= a {
			continue
		}
		alive++
		if s-a <= d {
			done++
			expect += s - a
		} else {
			expect += d
		}
	}
	if alive == 0 {
		return 0
	}
	return (done / alive) / (expect / alive)
}

// TestGittinsYarnDistribution loads Tiresias' own GPU-time distribution
// (yarn-gput1000.csv: 1001 samples summing to 150,989,997 GPU-s, from 121
// to 53,294,624) from the shared data folder.
func TestGittinsYarnDistribution(t *testing.T) {
	path := filepath.Join(enginetest.SharedData(t), "tiresias", "yarn-gput1000.csv")
	samples, err := ReadServiceSamples(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, s := range samples {
		sum += s
	}
	if len(samples) != 1001 || sum != 150989997 || slices.Min(samples) != 121 || slices.Max(samples) != 53294624 {
		t.Fatalf("read %d samples, sum %v, min %v, max %v", len(samples), sum, slices.Min(samples), slices.Max(samples))
	}
	p := fam.Parse(t, "tiresias-gittins:dist="+path, contract.Context{}).(*Tiresias)
	g := p.Gittins
	if g.Quantum != 3250 {
		t.Errorf("quantum %v, want the default 3250", g.Quantum)
	}
	for _, a := range []float64{0, 120, 121, 500, 3249, 3250, 7200, 1e5, 1e7, 53294623, 53294624} {
		for _, d := range []float64{1, 3250, 3950, 10800, 1e6} {
			want := gittinsByDefinition(samples, a, d)
			if got := g.Index(a, d); math.Abs(got-want) > 1e-9*math.Max(want, 1e-300) {
				t.Errorf("Index(%v, %v) = %v, definition gives %v", a, d, got, want)
			}
		}
	}
}

// twinTiresias schedules with one long-lived Tiresias (which builds each
// order from the last, sortKept) and checks every plan against a fresh
// instance's, which sorts every job: the same runs in the same order, the
// same memos.
type twinTiresias struct {
	t      *testing.T
	spec   string
	kept   engine.Policy
	rounds int
}

func (w *twinTiresias) Name() string { return w.kept.Name() }
func (w *twinTiresias) Schedule(s *engine.Snapshot) engine.Plan {
	fresh := fam.Parse(w.t, w.spec, contract.Context{})
	want := fresh.Schedule(s)
	got := w.kept.Schedule(s)
	w.rounds++
	if !reflect.DeepEqual(got.Run, want.Run) && !(len(got.Run) == 0 && len(want.Run) == 0) {
		w.t.Fatalf("%s round %d at %v: kept order runs %v, a fresh sort %v", w.spec, s.Round, s.Now, got.Run, want.Run)
	}
	if len(got.Memo) != len(want.Memo) {
		w.t.Fatalf("%s round %d: %d memos, a fresh sort %d", w.spec, s.Round, len(got.Memo), len(want.Memo))
	}
	for id, m := range want.Memo {
		if got.Memo[id] != m {
			w.t.Fatalf("%s round %d: memo of %s %v, a fresh sort %v", w.spec, s.Round, id, got.Memo[id], m)
		}
	}
	return got
}

// TestTiresiasKeptOrder drives Tiresias through random arrivals,
// completions and demotions (and starvation promotions, with a knob) on a
// cluster too small for its jobs, and checks that the order it keeps from
// round to round is, every round, the one sorting every job gives.
func TestTiresiasKeptOrder(t *testing.T) {
	for _, spec := range []string{"tiresias:limits=100/300", "tiresias:limits=50/200/400:knob=1", "tiresias:preset=pollux"} {
		rng := rand.New(rand.NewPCG(7, uint64(len(spec))))
		w := &twinTiresias{t: t, spec: spec, kept: fam.Parse(t, spec, contract.Context{})}
		clk := &policytest.Clock{}
		e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("2x4:t4"), Model: perf.Duration{}, Policy: w, Placer: policytest.FirstFree{}, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for step := 0; step < 400; step++ {
			clk.T += float64(rng.IntN(40))
			for range rng.IntN(3) {
				// Several jobs at the same instant (ties go by ID), some
				// submitted before the round sees them (they enter Q0 at
				// their submission, before jobs promoted now).
				at := max(0, clk.T-float64(rng.IntN(2)*rng.IntN(30)))
				j := enginetest.Job(fmt.Sprintf("j%03d", n)).At(at).GPUs(1 << rng.IntN(3)).Seconds(1e6).Obj()
				n++
				if _, err := e.Submit(j); err != nil {
					t.Fatal(err)
				}
			}
			if act := e.Active(); len(act) > 0 && rng.IntN(3) == 0 {
				if err := e.Finish(act[rng.IntN(len(act))].Job.ID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Schedule(); err != nil {
				t.Fatal(err)
			}
		}
		if w.rounds != 400 {
			t.Errorf("%s: %d rounds", spec, w.rounds)
		}
	}
}
