package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy"
)

// TestEveryPolicy: tide serve runs under every policy tide has, with its
// default knobs and with each of its presets (policy.Specs;
// tiresias-gittins needs a GPU-time distribution file and says so): a
// rigid and an elastic job both run to completion.
func TestEveryPolicy(t *testing.T) {
	for _, spec := range policy.Specs() {
		t.Run(spec, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Policy = spec
			if s, err := New(cfg); err != nil {
				// A policy that cannot run without a knob says which.
				if strings.Contains(err.Error(), "pass dist=FILE") {
					t.Skipf("needs a knob: %v", err)
				}
				t.Fatal(err)
			} else if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			ts := startServer(t, cfg)
			rigid := countSpec(2, 5, 10*time.Millisecond)
			elastic := countSpec(2, 5, 10*time.Millisecond)
			elastic.MinGPUs, elastic.MaxGPUs = 1, 2
			var ids []string
			for _, s := range []*api.JobSpec{rigid, elastic} {
				ids = append(ids, submit(t, ts.admin, s).ID)
			}
			for _, id := range ids {
				j := waitJob(t, ts.admin, id, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
				if j.State != api.StateFinished {
					t.Errorf("job %s: %s (%s)", id, j.State, j.Reason)
				}
			}
		})
	}
}

// TestDeclined: under a deadline policy with admission control, a job that
// cannot meet its deadline (an hour of work on one GPU, due in 20 seconds)
// ends declined, with the reason, in the API, the events and the metrics,
// and never launches; a job with time to spare runs to completion.
func TestDeclined(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "elasticflow"
	ts := startServer(t, cfg)
	late := countSpec(1, 5, 10*time.Millisecond)
	late.EstimateS = 3600
	late.Deadline = time.Now().Add(20 * time.Second).UTC().Format(time.RFC3339)
	ok := countSpec(1, 5, 10*time.Millisecond)
	ok.Deadline = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	lateID, okID := submit(t, ts.admin, late).ID, submit(t, ts.admin, ok).ID

	j := waitJob(t, ts.admin, lateID, 20*time.Second, "declined", inState(api.StateDeclined, api.StateFinished, api.StateFailed))
	if j.State != api.StateDeclined || !strings.Contains(j.Reason, "deadline") || len(j.Attempts) != 0 {
		t.Errorf("late job: state %s, reason %q, %d attempts; want declined for its deadline, never launched", j.State, j.Reason, len(j.Attempts))
	}
	if !api.Terminal(j.State) {
		t.Error("declined is not a terminal state")
	}
	if j := waitJob(t, ts.admin, okID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed, api.StateDeclined)); j.State != api.StateFinished {
		t.Errorf("job with time to spare: %s (%s)", j.State, j.Reason)
	}
	m := scrape(t, ts)
	for _, want := range []string{`tide_jobs{state="declined"} 1`, "tide_jobs_declined_total 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// fallingBack wraps a policy and reports a fallback in every round.
type fallingBack struct{ engine.Policy }

func (f fallingBack) Schedule(s *engine.Snapshot) engine.Plan {
	p := f.Policy.Schedule(s)
	p.Warnings = append(p.Warnings, engine.Warning{Kind: engine.WarnFallback, Reason: "test: solver failed, equal shares"})
	return p
}

// TestPolicyFallbackVisible: a policy's fallback reaches the job's events
// and the metrics.
func TestPolicyFallbackVisible(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.wrapPolicy = func(p engine.Policy) engine.Policy { return fallingBack{p} }
	ts := startServer(t, cfg)
	id := submit(t, ts.admin, countSpec(1, 5, 10*time.Millisecond)).ID
	waitJob(t, ts.admin, id, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	evs, err := ts.admin.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || (e.Kind == "policy-fallback" && strings.Contains(e.Message, "solver failed"))
	}
	if !found {
		t.Errorf("no policy-fallback event among %+v", evs)
	}
	if m := scrape(t, ts); !strings.Contains(m, "tide_policy_fallbacks_total ") || strings.Contains(m, "tide_policy_fallbacks_total 0\n") {
		t.Errorf("metrics do not count the fallback:\n%s", m)
	}
}

// TestWaitingJobExplained: a job waiting behind another under FIFO carries
// the policy's reason, its queue position and a predicted start (the
// running job's estimate says when its GPUs free up).
func TestWaitingJobExplained(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	long := countSpec(4, 600, 100*time.Millisecond)
	longID := submit(t, ts.admin, long).ID
	waitJob(t, ts.admin, longID, 20*time.Second, "running", inState(api.StateRunning))
	id := submit(t, ts.admin, countSpec(2, 5, 10*time.Millisecond)).ID
	j := waitJob(t, ts.admin, id, 20*time.Second, "explained", func(j *api.Job) bool { return j.Reason != "" })
	if j.State != api.StatePending || !strings.Contains(j.Reason, "waits") || !strings.Contains(j.Reason, "1 running and 0 waiting job(s) ahead") || j.QueuePosition != 1 {
		t.Errorf("waiting job: state %s, reason %q, position %d; want pending, waits behind 1 running job, position 1", j.State, j.Reason, j.QueuePosition)
	}
	if j.PredictedStart == nil || j.PredictedStart.Before(time.Now()) || j.PredictedStart.After(time.Now().Add(2*time.Minute)) {
		t.Errorf("predicted start %v: want within the running job's 60 s estimate", j.PredictedStart)
	}
	if _, err := ts.admin.Cancel(context.Background(), longID); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, ts.admin, id, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed)); j.Reason != "" || j.QueuePosition != 0 {
		t.Errorf("finished job keeps reason %q, position %d", j.Reason, j.QueuePosition)
	}
}

// TestPriorityClassesServe: under tiresias:priority=preempt a priority-100
// job does not wait behind priority-0 work: it takes the GPUs of the
// running priority-0 job at once, and the priority-0 job waiting says why.
func TestPriorityClassesServe(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "tiresias:priority=preempt"
	ts := startServer(t, cfg)
	low := submit(t, ts.admin, countSpec(4, 600, 100*time.Millisecond)).ID
	waitJob(t, ts.admin, low, 20*time.Second, "running", inState(api.StateRunning))
	queued := submit(t, ts.admin, countSpec(4, 5, 10*time.Millisecond)).ID
	high := countSpec(4, 5, 10*time.Millisecond)
	high.Priority = 100
	hid := submit(t, ts.admin, high).ID
	j := waitJob(t, ts.admin, hid, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished {
		t.Fatalf("priority-100 job: %s (%s)", j.State, j.Reason)
	}
	l, err := ts.admin.Job(context.Background(), low)
	if err != nil {
		t.Fatal(err)
	}
	if l.Preemptions == 0 {
		t.Errorf("the running priority-0 job was not preempted: %+v", l)
	}
	if q, err := ts.admin.Job(context.Background(), queued); err != nil {
		t.Fatal(err)
	} else if q.State == api.StateFinished && q.Ended.Before(*j.Ended) {
		t.Errorf("the waiting priority-0 job finished before the priority-100 job")
	}
	_, _ = ts.admin.Cancel(context.Background(), low)
}

// mistaken wraps a policy and gives every job asking for a GPU type
// another type, as the deadline and loan policies once did.
type mistaken struct{ engine.Policy }

func (m mistaken) Schedule(s *engine.Snapshot) engine.Plan {
	p := m.Policy.Schedule(s)
	pinned := map[string]bool{}
	for _, st := range s.Jobs {
		pinned[st.Job.ID] = st.Job.GPUType != ""
	}
	run := make([]engine.Assignment, len(p.Run))
	copy(run, p.Run)
	for i, a := range run {
		if pinned[a.Job] {
			run[i].GPUType = "v100"
		}
	}
	p.Run = run
	return p
}

// TestDroppedAssignment: a policy's mistake about one job (a GPU type the
// job did not ask for) no longer stops every job: the engine drops that
// job's assignment, the others run, and the job gets one policy-dropped
// event naming the mistake, however many rounds repeat it.
func TestDroppedAssignment(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.wrapPolicy = func(p engine.Policy) engine.Policy { return mistaken{p} }
	ts := startServer(t, cfg)
	pinned := countSpec(1, 1000, 10*time.Millisecond)
	pinned.GPUType = "t4"
	badID := submit(t, ts.admin, pinned).ID
	okID := submit(t, ts.admin, countSpec(1, 5, 10*time.Millisecond)).ID
	waitJob(t, ts.admin, okID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	time.Sleep(3 * cfg.Round) // more rounds repeat the mistake
	j, err := ts.admin.Job(context.Background(), badID)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 0 {
		t.Errorf("the job the policy got wrong ran %d attempts, want none", len(j.Attempts))
	}
	if !strings.Contains(j.Reason, "the engine dropped it") {
		t.Errorf("the job's reason %q does not say its assignment was dropped", j.Reason)
	}
	evs, err := ts.admin.Events(context.Background(), badID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == "policy-"+engine.WarnDropped {
			n++
			if !strings.Contains(e.Message, "plan gives job "+badID+" v100 GPUs, it asks for t4") {
				t.Errorf("event %q does not name the mistake", e.Message)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d policy-dropped events among %+v, want 1", n, evs)
	}
	if m := scrape(t, ts); !strings.Contains(m, "tide_policy_dropped_total ") || strings.Contains(m, "tide_policy_dropped_total 0\n") {
		t.Errorf("metrics do not count the dropped assignments:\n%s", m)
	}
	if okEvs, _ := ts.admin.Events(context.Background(), okID); slices.ContainsFunc(okEvs, func(e api.Event) bool { return e.Kind == "policy-"+engine.WarnDropped }) {
		t.Errorf("the job that ran got a policy-dropped event: %+v", okEvs)
	}
}
