package policy

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
)

// Shorthands for the tables below: a waiting job and a running one.
func wait(id string, submit float64, gpus int, seconds float64) js {
	return js{j: enginetest.Job(id).At(submit).GPUs(gpus).Seconds(seconds).Obj()}
}

func hold(id string, submit float64, gpus int, seconds float64) js {
	return js{j: enginetest.Job(id).At(submit).GPUs(gpus).Seconds(seconds).Obj(), held: gpus}
}

// withDeadline sets a job's absolute deadline.
func withDeadline(x js, d float64) js { x.j.Deadline = d; return x }

// withProgress sets the seconds of work already done.
func withProgress(x js, p float64) js { x.progress = p; return x }

type planCase struct {
	name    string
	cluster string
	jobs    []js
	want    []string // plan.Run as "id:gpus", most important first
}

func checkPlans(t *testing.T, spec string, cases []planCase) {
	t.Helper()
	p := mustParse(t, spec, Context{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := snap(t, 1000, enginetest.Cluster(tc.cluster), tc.jobs...)
			got := runs(p.Schedule(s))
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: plan %v, want %v", spec, got, tc.want)
			}
			// Deterministic: the same snapshot gives the same plan.
			if again := runs(p.Schedule(s)); !slices.Equal(again, got) {
				t.Errorf("%s: second plan %v differs from first %v", spec, again, got)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// FIFO
// ---------------------------------------------------------------------------

func TestFIFO(t *testing.T) {
	// Cases that behave the same with and without backfill.
	both := []planCase{
		{
			// Submission order, not ID order; equal times fall back to ID.
			name: "submission order", cluster: "1x4:t4",
			jobs: []js{wait("z", 0, 1, 60), wait("b", 5, 1, 60), wait("a", 5, 2, 60)},
			want: []string{"z:1", "a:2", "b:1"},
		},
		{
			// 2 GPUs: z and a run; b (submitted last) waits.
			name: "later jobs wait when full", cluster: "1x2:t4",
			jobs: []js{wait("z", 0, 1, 60), wait("a", 5, 1, 60), wait("b", 9, 1, 60)},
			want: []string{"z:1", "a:1"},
		},
		{
			// Non-preemptive: late runs on all 4 GPUs; early, submitted
			// before it, waits rather than preempting it.
			name: "running job keeps its GPUs", cluster: "1x4:t4",
			jobs: []js{wait("early", 0, 1, 60), hold("late", 10, 4, 600)},
			want: []string{"late:4"},
		},
		{
			// Running jobs come first in the plan so the placer keeps them.
			name: "running jobs lead the plan", cluster: "1x4:t4",
			jobs: []js{wait("early", 0, 1, 60), hold("late", 10, 1, 600)},
			want: []string{"late:1", "early:1"},
		},
	}
	// r holds 2 of 4 GPUs; the head of the queue, big, needs 4; small needs 1.
	blocked := []js{hold("r", 0, 2, 600), wait("big", 5, 4, 60), wait("small", 10, 1, 60)}
	strict := append(slices.Clone(both),
		// Without backfill big blocks small, although 2 GPUs are idle.
		planCase{name: "head-of-line blocking", cluster: "1x4:t4", jobs: blocked, want: []string{"r:2"}},
		// The head blocks every job behind it, however small.
		planCase{name: "head blocks all behind", cluster: "1x4:t4",
			jobs: []js{hold("r", 0, 3, 600), wait("big", 5, 2, 60), wait("s1", 6, 1, 60), wait("s2", 7, 1, 60)},
			want: []string{"r:3"}},
	)
	backfill := append(slices.Clone(both),
		// With backfill small starts past big on the idle GPUs.
		planCase{name: "backfill past the head", cluster: "1x4:t4", jobs: blocked, want: []string{"r:2", "small:1"}},
		// Backfill is first fit in submission order, without a reservation
		// for the head: s1 and s2 fill the 3 idle GPUs, s3 no longer fits.
		planCase{name: "backfill is first fit", cluster: "1x4:t4",
			jobs: []js{hold("r", 0, 1, 600), wait("big", 5, 4, 60), wait("s1", 6, 1, 60), wait("s2", 7, 2, 60), wait("s3", 8, 1, 60)},
			want: []string{"r:1", "s1:1", "s2:2"}},
	)
	t.Run("backfill=false", func(t *testing.T) { checkPlans(t, "fifo", strict) })
	t.Run("backfill=true", func(t *testing.T) { checkPlans(t, "fifo:backfill=true", backfill) })
}

// TestFIFOEngine runs FIFO through the engine on 4 GPUs: a (2 GPUs, 100 s)
// at 0, b (4 GPUs, 50 s) at 10, c (1 GPU, 30 s) at 20.
func TestFIFOEngine(t *testing.T) {
	arrivals := func() []step {
		return []step{
			{at: 0, submit: []*job.Job{enginetest.Job("a").At(0).GPUs(2).Seconds(100).Obj()}},
			{at: 10, submit: []*job.Job{enginetest.Job("b").At(10).GPUs(4).Seconds(50).Obj()}},
			{at: 20, submit: []*job.Job{enginetest.Job("c").At(20).GPUs(1).Seconds(30).Obj()}},
		}
	}
	t.Run("backfill=false", func(t *testing.T) {
		s := arrivals()
		s[0].running = []string{"a"}
		s[1].running = []string{"a"} // b needs 4, 2 are free: it waits
		s[2].running = []string{"a"} // c waits behind b although 2 GPUs are idle
		s = append(s,
			step{at: 100, running: []string{"b"}}, // a done: b, then c does not fit
			step{at: 150, running: []string{"c"}}, // b done at 100+50
			step{at: 180, running: []string{}},    // c done at 150+30
		)
		play(t, "fifo", "1x4:t4", s)
	})
	t.Run("backfill=true", func(t *testing.T) {
		s := arrivals()
		s[0].running = []string{"a"}
		s[1].running = []string{"a"}
		s[2].running = []string{"a", "c"} // c backfills the 2 idle GPUs
		s = append(s,
			step{at: 50, running: []string{"a"}},  // c done at 20+30
			step{at: 100, running: []string{"b"}}, // a done: b gets all 4
			step{at: 150, running: []string{}},
		)
		play(t, "fifo:backfill=true", "1x4:t4", s)
	})
}

// ---------------------------------------------------------------------------
// SRTF
// ---------------------------------------------------------------------------

func TestSRTF(t *testing.T) {
	// Under the duration model a job on its requested GPUs has
	// Work - Progress seconds left.
	checkPlans(t, "srtf", []planCase{
		{
			// Left: a 300-250 = 50, b 100, c 60.
			name: "least remaining first", cluster: "1x4:t4",
			jobs: []js{withProgress(wait("a", 0, 1, 300), 250), wait("b", 1, 1, 100), wait("c", 2, 1, 60)},
			want: []string{"a:1", "c:1", "b:1"},
		},
		{
			name: "least remaining runs on one GPU", cluster: "1x1:t4",
			jobs: []js{withProgress(wait("a", 0, 1, 300), 250), wait("b", 1, 1, 100), wait("c", 2, 1, 60)},
			want: []string{"a:1"},
		},
		{
			// long has 500-100 = 400 s left, short 50: short preempts it.
			name: "preempts a longer running job", cluster: "1x1:t4",
			jobs: []js{withProgress(hold("long", 0, 1, 500), 100), wait("short", 5, 1, 50)},
			want: []string{"short:1"},
		},
		{
			// A running job with less left than the newcomer keeps running.
			name: "keeps a shorter running job", cluster: "1x1:t4",
			jobs: []js{withProgress(hold("run", 0, 1, 500), 460), wait("new", 5, 1, 50)},
			want: []string{"run:1"},
		},
		{
			// Remaining time, not GPU-time: wide has 100 s (400 GPU-s),
			// narrow 150 s (150 GPU-s).
			name: "time not GPU-time", cluster: "1x4:t4",
			jobs: []js{wait("narrow", 0, 1, 150), wait("wide", 1, 4, 100)},
			want: []string{"wide:4"},
		},
		{
			// Equal remaining times: earlier submission first.
			name: "ties by submission", cluster: "1x1:t4",
			jobs: []js{wait("x", 5, 1, 100), wait("y", 0, 1, 100)},
			want: []string{"y:1"},
		},
		{
			// Equal remaining and submission times: by ID.
			name: "ties by ID", cluster: "1x1:t4",
			jobs: []js{wait("y", 0, 1, 100), wait("x", 0, 1, 100)},
			want: []string{"x:1"},
		},
		{
			// w (20 s) takes all 4 GPUs; r (50 s) no longer fits and is
			// preempted; s (100 s) does not fit either.
			name: "shorter wide job preempts", cluster: "1x4:t4",
			jobs: []js{hold("r", 0, 2, 50), wait("w", 1, 4, 20), wait("s", 2, 1, 100)},
			want: []string{"w:4"},
		},
		{
			// r (10 s) keeps 2 GPUs; w (20 s) needs 4 and is skipped; s
			// (100 s) starts on the idle GPUs.
			name: "misfit skipped", cluster: "1x4:t4",
			jobs: []js{hold("r", 0, 2, 10), wait("w", 1, 4, 20), wait("s", 2, 1, 100)},
			want: []string{"r:2", "s:1"},
		},
	})
}

// TestSRTFEngine: one GPU; a (100 s) at 0, b (50 s) at 10, c (45 s) at 20.
// At 10 a has 90 s left and b 50: b preempts a. At 20 b has 40 s left, less
// than c's 45, so b keeps running although its total (50) exceeds c's. b
// finishes at 60, then c (45 < a's 90) runs to 105, then a to 195.
func TestSRTFEngine(t *testing.T) {
	play(t, "srtf", "1x1:t4", []step{
		{at: 0, submit: []*job.Job{enginetest.Job("a").At(0).Seconds(100).Obj()}, running: []string{"a"}},
		{at: 10, submit: []*job.Job{enginetest.Job("b").At(10).Seconds(50).Obj()}, running: []string{"b"}},
		{at: 20, submit: []*job.Job{enginetest.Job("c").At(20).Seconds(45).Obj()}, running: []string{"b"}},
		{at: 60, running: []string{"c"}},
		{at: 105, running: []string{"a"}},
		{at: 195, running: []string{}},
	})
}

// ---------------------------------------------------------------------------
// EDF
// ---------------------------------------------------------------------------

func TestEDF(t *testing.T) {
	checkPlans(t, "edf", []planCase{
		{
			name: "earliest deadline first", cluster: "1x4:t4",
			jobs: []js{withDeadline(wait("a", 0, 1, 60), 5000), withDeadline(wait("b", 1, 1, 60), 2000), withDeadline(wait("c", 2, 1, 60), 3000)},
			want: []string{"b:1", "c:1", "a:1"},
		},
		{
			name: "earliest deadline on one GPU", cluster: "1x1:t4",
			jobs: []js{withDeadline(wait("a", 0, 1, 60), 5000), withDeadline(wait("b", 1, 1, 60), 2000), withDeadline(wait("c", 2, 1, 60), 3000)},
			want: []string{"b:1"},
		},
		{
			// Jobs without a deadline go after those with one, in
			// submission order among themselves.
			name: "no deadline last", cluster: "1x4:t4",
			jobs: []js{wait("n1", 0, 1, 60), withDeadline(wait("d", 5, 1, 60), 99999), wait("n2", 1, 1, 60)},
			want: []string{"d:1", "n1:1", "n2:1"},
		},
		{
			name: "no deadline waits on one GPU", cluster: "1x1:t4",
			jobs: []js{hold("n", 0, 1, 600), withDeadline(wait("d", 5, 1, 60), 99999)},
			want: []string{"d:1"},
		},
		{
			name: "preempts a later deadline", cluster: "1x1:t4",
			jobs: []js{withDeadline(hold("late", 0, 1, 600), 9000), withDeadline(wait("urgent", 5, 1, 60), 1100)},
			want: []string{"urgent:1"},
		},
		{
			// The snapshot is at t=1000: a has missed its deadline and
			// still goes first.
			name: "missed deadline still first", cluster: "1x1:t4",
			jobs: []js{withDeadline(wait("b", 0, 1, 60), 1200), withDeadline(wait("a", 1, 1, 60), 900)},
			want: []string{"a:1"},
		},
		{
			name: "equal deadlines by submission", cluster: "1x1:t4",
			jobs: []js{withDeadline(wait("x", 7, 1, 60), 2000), withDeadline(wait("y", 3, 1, 60), 2000)},
			want: []string{"y:1"},
		},
		{
			// w (deadline 1100) needs all 4 GPUs and preempts r (1200).
			name: "wide urgent job preempts", cluster: "1x4:t4",
			jobs: []js{withDeadline(hold("r", 0, 1, 600), 1200), withDeadline(wait("w", 1, 4, 60), 1100), withDeadline(wait("s", 2, 1, 60), 1300)},
			want: []string{"w:4"},
		},
		{
			// r (1100) keeps its GPU, w (1200) needs 4 and is skipped, s
			// (1300) takes an idle GPU.
			name: "misfit skipped", cluster: "1x4:t4",
			jobs: []js{withDeadline(hold("r", 0, 1, 600), 1100), withDeadline(wait("w", 1, 4, 60), 1200), withDeadline(wait("s", 2, 1, 60), 1300)},
			want: []string{"r:1", "s:1"},
		},
	})
}
