package classic

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// ---------------------------------------------------------------------------
// FIFO
// ---------------------------------------------------------------------------

// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

func TestFIFO(t *testing.T) {
	// Cases that behave the same with and without backfill.
	both := []policytest.PlanCase{
		{
			// Submission order, not ID order; equal times fall back to ID.
			Name: "submission order", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Wait("z", 0, 1, 60), policytest.Wait("b", 5, 1, 60), policytest.Wait("a", 5, 2, 60)},
			Want: []string{"z:1", "a:2", "b:1"},
		},
		{
			// 2 GPUs: z and a run; b (submitted last) waits.
			Name: "later jobs wait when full", Cluster: "1x2:t4",
			Jobs: []policytest.JobState{policytest.Wait("z", 0, 1, 60), policytest.Wait("a", 5, 1, 60), policytest.Wait("b", 9, 1, 60)},
			Want: []string{"z:1", "a:1"},
		},
		{
			// Non-preemptive: late runs on all 4 GPUs; early, submitted
			// before it, waits rather than preempting it.
			Name: "running job keeps its GPUs", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Wait("early", 0, 1, 60), policytest.Hold("late", 10, 4, 600)},
			Want: []string{"late:4"},
		},
		{
			// Running jobs come first in the plan so the placer keeps them.
			Name: "running jobs lead the plan", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Wait("early", 0, 1, 60), policytest.Hold("late", 10, 1, 600)},
			Want: []string{"late:1", "early:1"},
		},
	}
	// r holds 2 of 4 GPUs; the head of the queue, big, needs 4; small needs 1.
	blocked := []policytest.JobState{policytest.Hold("r", 0, 2, 600), policytest.Wait("big", 5, 4, 60), policytest.Wait("small", 10, 1, 60)}
	strict := append(slices.Clone(both),
		// Without backfill big blocks small, although 2 GPUs are idle.
		policytest.PlanCase{Name: "head-of-line blocking", Cluster: "1x4:t4", Jobs: blocked, Want: []string{"r:2"}},
		// The head blocks every job behind it, however small.
		policytest.PlanCase{Name: "head blocks all behind", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Hold("r", 0, 3, 600), policytest.Wait("big", 5, 2, 60), policytest.Wait("s1", 6, 1, 60), policytest.Wait("s2", 7, 1, 60)},
			Want: []string{"r:3"}},
	)
	backfill := append(slices.Clone(both),
		// With backfill small starts past big on the idle GPUs.
		policytest.PlanCase{Name: "backfill past the head", Cluster: "1x4:t4", Jobs: blocked, Want: []string{"r:2", "small:1"}},
		// Backfill is first fit in submission order, without a reservation
		// for the head: s1 and s2 fill the 3 idle GPUs, s3 no longer fits.
		policytest.PlanCase{Name: "backfill is first fit", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Hold("r", 0, 1, 600), policytest.Wait("big", 5, 4, 60), policytest.Wait("s1", 6, 1, 60), policytest.Wait("s2", 7, 2, 60), policytest.Wait("s3", 8, 1, 60)},
			Want: []string{"r:1", "s1:1", "s2:2"}},
	)
	t.Run("backfill=false", func(t *testing.T) { fam.CheckPlans(t, "fifo", strict) })
	t.Run("backfill=true", func(t *testing.T) { fam.CheckPlans(t, "fifo:backfill=true", backfill) })
}

// TestFIFOEngine runs FIFO through the engine on 4 GPUs: a (2 GPUs, 100 s)
// at 0, b (4 GPUs, 50 s) at 10, c (1 GPU, 30 s) at 20.
func TestFIFOEngine(t *testing.T) {
	arrivals := func() []policytest.Step {
		return []policytest.Step{
			{At: 0, Submit: []*job.Job{enginetest.Job("a").At(0).GPUs(2).Seconds(100).Obj()}},
			{At: 10, Submit: []*job.Job{enginetest.Job("b").At(10).GPUs(4).Seconds(50).Obj()}},
			{At: 20, Submit: []*job.Job{enginetest.Job("c").At(20).GPUs(1).Seconds(30).Obj()}},
		}
	}
	t.Run("backfill=false", func(t *testing.T) {
		s := arrivals()
		s[0].Running = []string{"a"}
		s[1].Running = []string{"a"} // b needs 4, 2 are free: it waits
		s[2].Running = []string{"a"} // c waits behind b although 2 GPUs are idle
		s = append(s,
			policytest.Step{At: 100, Running: []string{"b"}}, // a done: b, then c does not fit
			policytest.Step{At: 150, Running: []string{"c"}}, // b done at 100+50
			policytest.Step{At: 180, Running: []string{}},    // c done at 150+30
		)
		fam.Play(t, "fifo", "1x4:t4", s)
	})
	t.Run("backfill=true", func(t *testing.T) {
		s := arrivals()
		s[0].Running = []string{"a"}
		s[1].Running = []string{"a"}
		s[2].Running = []string{"a", "c"} // c backfills the 2 idle GPUs
		s = append(s,
			policytest.Step{At: 50, Running: []string{"a"}},  // c done at 20+30
			policytest.Step{At: 100, Running: []string{"b"}}, // a done: b gets all 4
			policytest.Step{At: 150, Running: []string{}},
		)
		fam.Play(t, "fifo:backfill=true", "1x4:t4", s)
	})
}

// ---------------------------------------------------------------------------
// SRTF
// ---------------------------------------------------------------------------

func TestSRTF(t *testing.T) {
	// Under the duration model a job on its requested GPUs has
	// Work - Progress seconds left.
	fam.CheckPlans(t, "srtf", []policytest.PlanCase{
		{
			// Left: a 300-250 = 50, b 100, c 60.
			Name: "least remaining first", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.WithProgress(policytest.Wait("a", 0, 1, 300), 250), policytest.Wait("b", 1, 1, 100), policytest.Wait("c", 2, 1, 60)},
			Want: []string{"a:1", "c:1", "b:1"},
		},
		{
			Name: "least remaining runs on one GPU", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithProgress(policytest.Wait("a", 0, 1, 300), 250), policytest.Wait("b", 1, 1, 100), policytest.Wait("c", 2, 1, 60)},
			Want: []string{"a:1"},
		},
		{
			// long has 500-100 = 400 s left, short 50: short preempts it.
			Name: "preempts a longer running job", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithProgress(policytest.Hold("long", 0, 1, 500), 100), policytest.Wait("short", 5, 1, 50)},
			Want: []string{"short:1"},
		},
		{
			// A running job with less left than the newcomer keeps running.
			Name: "keeps a shorter running job", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithProgress(policytest.Hold("run", 0, 1, 500), 460), policytest.Wait("new", 5, 1, 50)},
			Want: []string{"run:1"},
		},
		{
			// Remaining time, not GPU-time: wide has 100 s (400 GPU-s),
			// narrow 150 s (150 GPU-s).
			Name: "time not GPU-time", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Wait("narrow", 0, 1, 150), policytest.Wait("wide", 1, 4, 100)},
			Want: []string{"wide:4"},
		},
		{
			// Equal remaining times: earlier submission first.
			Name: "ties by submission", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.Wait("x", 5, 1, 100), policytest.Wait("y", 0, 1, 100)},
			Want: []string{"y:1"},
		},
		{
			// Equal remaining and submission times: by ID.
			Name: "ties by ID", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.Wait("y", 0, 1, 100), policytest.Wait("x", 0, 1, 100)},
			Want: []string{"x:1"},
		},
		{
			// w (20 s) takes all 4 GPUs; r (50 s) no longer fits and is
			// preempted; s (100 s) does not fit either.
			Name: "shorter wide job preempts", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Hold("r", 0, 2, 50), policytest.Wait("w", 1, 4, 20), policytest.Wait("s", 2, 1, 100)},
			Want: []string{"w:4"},
		},
		{
			// r (10 s) keeps 2 GPUs; w (20 s) needs 4 and is skipped; s
			// (100 s) starts on the idle GPUs.
			Name: "misfit skipped", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Hold("r", 0, 2, 10), policytest.Wait("w", 1, 4, 20), policytest.Wait("s", 2, 1, 100)},
			Want: []string{"r:2", "s:1"},
		},
	})
}

// TestSRTFEngine: one GPU; a (100 s) at 0, b (50 s) at 10, c (45 s) at 20.
// At 10 a has 90 s left and b 50: b preempts a. At 20 b has 40 s left, less
// than c's 45, so b keeps running although its total (50) exceeds c's. b
// finishes at 60, then c (45 < a's 90) runs to 105, then a to 195.
func TestSRTFEngine(t *testing.T) {
	fam.Play(t, "srtf", "1x1:t4", []policytest.Step{
		{At: 0, Submit: []*job.Job{enginetest.Job("a").At(0).Seconds(100).Obj()}, Running: []string{"a"}},
		{At: 10, Submit: []*job.Job{enginetest.Job("b").At(10).Seconds(50).Obj()}, Running: []string{"b"}},
		{At: 20, Submit: []*job.Job{enginetest.Job("c").At(20).Seconds(45).Obj()}, Running: []string{"b"}},
		{At: 60, Running: []string{"c"}},
		{At: 105, Running: []string{"a"}},
		{At: 195, Running: []string{}},
	})
}

// ---------------------------------------------------------------------------
// EDF
// ---------------------------------------------------------------------------

func TestEDF(t *testing.T) {
	fam.CheckPlans(t, "edf", []policytest.PlanCase{
		{
			Name: "earliest deadline first", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Wait("a", 0, 1, 60), 5000), policytest.WithDeadline(policytest.Wait("b", 1, 1, 60), 2000), policytest.WithDeadline(policytest.Wait("c", 2, 1, 60), 3000)},
			Want: []string{"b:1", "c:1", "a:1"},
		},
		{
			Name: "earliest deadline on one GPU", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Wait("a", 0, 1, 60), 5000), policytest.WithDeadline(policytest.Wait("b", 1, 1, 60), 2000), policytest.WithDeadline(policytest.Wait("c", 2, 1, 60), 3000)},
			Want: []string{"b:1"},
		},
		{
			// Jobs without a deadline go after those with one, in
			// submission order among themselves.
			Name: "no deadline last", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.Wait("n1", 0, 1, 60), policytest.WithDeadline(policytest.Wait("d", 5, 1, 60), 99999), policytest.Wait("n2", 1, 1, 60)},
			Want: []string{"d:1", "n1:1", "n2:1"},
		},
		{
			Name: "no deadline waits on one GPU", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.Hold("n", 0, 1, 600), policytest.WithDeadline(policytest.Wait("d", 5, 1, 60), 99999)},
			Want: []string{"d:1"},
		},
		{
			Name: "preempts a later deadline", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Hold("late", 0, 1, 600), 9000), policytest.WithDeadline(policytest.Wait("urgent", 5, 1, 60), 1100)},
			Want: []string{"urgent:1"},
		},
		{
			// The snapshot is at t=1000: a has missed its deadline and
			// still goes first.
			Name: "missed deadline still first", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Wait("b", 0, 1, 60), 1200), policytest.WithDeadline(policytest.Wait("a", 1, 1, 60), 900)},
			Want: []string{"a:1"},
		},
		{
			Name: "equal deadlines by submission", Cluster: "1x1:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Wait("x", 7, 1, 60), 2000), policytest.WithDeadline(policytest.Wait("y", 3, 1, 60), 2000)},
			Want: []string{"y:1"},
		},
		{
			// w (deadline 1100) needs all 4 GPUs and preempts r (1200).
			Name: "wide urgent job preempts", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Hold("r", 0, 1, 600), 1200), policytest.WithDeadline(policytest.Wait("w", 1, 4, 60), 1100), policytest.WithDeadline(policytest.Wait("s", 2, 1, 60), 1300)},
			Want: []string{"w:4"},
		},
		{
			// r (1100) keeps its GPU, w (1200) needs 4 and is skipped, s
			// (1300) takes an idle GPU.
			Name: "misfit skipped", Cluster: "1x4:t4",
			Jobs: []policytest.JobState{policytest.WithDeadline(policytest.Hold("r", 0, 1, 600), 1100), policytest.WithDeadline(policytest.Wait("w", 1, 4, 60), 1200), policytest.WithDeadline(policytest.Wait("s", 2, 1, 60), 1300)},
			Want: []string{"r:1", "s:1"},
		},
	})
}
