package server

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/perf/goodput"
)

// TestRunToCompletion runs the CPU example job through the whole path: it
// is launched with its GPUs in CUDA_VISIBLE_DEVICES, reports its progress
// over HTTP, writes its log and finishes with exit code 0.
func TestRunToCompletion(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	j := submit(t, ts.admin, countSpec(2, 10, 20*time.Millisecond))
	if j.State != api.StatePending || j.ID == "" || j.Tenant != "admin" {
		t.Fatalf("submitted job: %+v", j)
	}
	j = waitJob(t, ts.admin, j.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished || j.Progress != 1 || j.Failures != 0 || len(j.Attempts) != 1 {
		t.Fatalf("job: state %s progress %v failures %d attempts %+v", j.State, j.Progress, j.Failures, j.Attempts)
	}
	a := j.Attempts[0]
	if a.Outcome != "finished" || a.ExitCode == nil || *a.ExitCode != 0 || len(a.GPUs) != 2 || a.PID == 0 {
		t.Errorf("attempt: %+v", a)
	}
	out := logs(t, ts.admin, j.ID)
	for _, want := range []string{`GPUs "0,1"`, "step 10/10", "countjob: done", "attempt 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "progress report failed") {
		t.Errorf("the job's progress reports failed:\n%s", out)
	}
	if j.Message != "step 10/10" || j.Throughput != 50 {
		t.Errorf("last report: message %q throughput %v", j.Message, j.Throughput)
	}
	evs, err := ts.admin.Events(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "submitted,start,launched,finished" {
		t.Errorf("events %s", got)
	}
}

// TestPreemptAndResume has SRTF preempt a long job for a short one: the long
// job gets SIGTERM, checkpoints, exits; the short one starts only once it
// has exited; the long one then restarts from its checkpoint and finishes.
func TestPreemptAndResume(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "srtf"
	ts := startServer(t, cfg)
	long := countSpec(4, 100, 20*time.Millisecond)
	long.EstimateS = 1000
	a := submit(t, ts.admin, long)
	waitJob(t, ts.admin, a.ID, 10*time.Second, "running with progress", func(j *api.Job) bool { return j.Progress > 0.05 })
	short := countSpec(4, 5, 20*time.Millisecond)
	short.EstimateS = 1
	b := submit(t, ts.admin, short)
	jb := waitJob(t, ts.admin, b.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	ja := waitJob(t, ts.admin, a.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if ja.State != api.StateFinished || jb.State != api.StateFinished {
		t.Fatalf("states %s %s", ja.State, jb.State)
	}
	if len(ja.Attempts) != 2 || ja.Attempts[0].Outcome != "preempted" || ja.Attempts[1].Outcome != "finished" {
		t.Fatalf("long job attempts %+v", ja.Attempts)
	}
	if m := eventMessages(t, ts.admin, a.ID, "preempted"); len(m) != 1 || !strings.Contains(m[0], ": preempted") {
		t.Errorf("preempted events %q: want one with the policy's reason", m)
	}
	if c := ja.Attempts[0].ExitCode; c == nil || *c != 143 {
		t.Errorf("preempted attempt exit code %v, want 143 (checkpointed on SIGTERM)", c)
	}
	if ja.Preemptions != 1 || ja.Restarts != 1 || ja.Failures != 0 {
		t.Errorf("long job: preemptions %d restarts %d failures %d", ja.Preemptions, ja.Restarts, ja.Failures)
	}
	if !jb.Attempts[0].Started.After(*ja.Attempts[0].Ended) && !jb.Attempts[0].Started.Equal(*ja.Attempts[0].Ended) {
		t.Errorf("short job launched at %v, before the preempted one exited at %v", jb.Attempts[0].Started, ja.Attempts[0].Ended)
	}
	out := logs(t, ts.admin, a.ID)
	if !strings.Contains(out, "checkpointed, exiting") || strings.Contains(out, "resuming at step 0 of 100 (attempt 2") ||
		!strings.Contains(out, "(attempt 2, restarts 1") {
		t.Errorf("the long job did not checkpoint and resume:\n%s", out)
	}
	m := scrape(t, ts)
	for _, want := range []string{"tide_preemptions_total 1", "tide_jobs_finished_total 2", "tide_queue_length 0", "tide_running_jobs 0", "tide_gpus_allocated 0", "tide_gpus_total 4"} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}

// TestRetries: a job that keeps failing is retried up to its limit, then
// failed; one that fails once is retried from its checkpoint and finishes.
func TestRetries(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	two := 2
	bad := submit(t, ts.admin, &api.JobSpec{Command: []string{"sh", "-c", "echo trying; exit 3"}, GPUs: 1, MaxRetries: &two})
	flaky := submit(t, ts.admin, countSpec(1, 6, 10*time.Millisecond, "-fail-attempts", "1"))
	jb := waitJob(t, ts.admin, bad.ID, 20*time.Second, "failed", inState(api.StateFinished, api.StateFailed))
	if jb.State != api.StateFailed || jb.Failures != 3 || len(jb.Attempts) != 3 || !strings.Contains(jb.Reason, "exit code 3") || !strings.Contains(jb.Reason, "retry limit 2") {
		t.Errorf("failing job: state %s failures %d attempts %d reason %q", jb.State, jb.Failures, len(jb.Attempts), jb.Reason)
	}
	if n := strings.Count(logs(t, ts.admin, bad.ID), "\ntrying\n"); n != 3 {
		t.Errorf("the failing job ran %d times, want 3", n)
	}
	jf := waitJob(t, ts.admin, flaky.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if jf.State != api.StateFinished || jf.Failures != 1 || len(jf.Attempts) != 2 || jf.Attempts[0].Outcome != "failed" {
		t.Errorf("flaky job: state %s failures %d attempts %+v", jf.State, jf.Failures, jf.Attempts)
	}
	if out := logs(t, ts.admin, flaky.ID); !strings.Contains(out, "resuming at step 2 of 6 (attempt 2") {
		t.Errorf("the flaky job did not resume from its checkpoint:\n%s", out)
	}
}

// TestKilledFromOutside kills a running job's process group with SIGKILL
// behind tide's back: the attempt counts as a failure and the job is
// retried from its checkpoint.
func TestKilledFromOutside(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	j := submit(t, ts.admin, countSpec(1, 60, 20*time.Millisecond))
	j = waitJob(t, ts.admin, j.ID, 10*time.Second, "past step 10", func(j *api.Job) bool { return j.Progress >= 10.0/60 })
	pid := j.Attempts[0].PID
	if err := killGroup(pid); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, ts.admin, j.ID, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished || j.Failures != 1 || len(j.Attempts) != 2 {
		t.Fatalf("state %s failures %d attempts %+v", j.State, j.Failures, j.Attempts)
	}
	if c := j.Attempts[0].ExitCode; j.Attempts[0].Outcome != "failed" || c == nil || *c != 137 {
		t.Errorf("killed attempt: %+v", j.Attempts[0])
	}
	out := logs(t, ts.admin, j.ID)
	if !strings.Contains(out, "(attempt 2, restarts 1") || strings.Contains(out, "resuming at step 0 of 60 (attempt 2") {
		t.Errorf("the job did not resume from its checkpoint:\n%s", out)
	}
}

// TestCancel cancels a running and a pending job.
func TestCancel(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	run := submit(t, ts.admin, countSpec(4, 1000, 20*time.Millisecond))
	waitJob(t, ts.admin, run.ID, 10*time.Second, "running", func(j *api.Job) bool { return j.Progress > 0 })
	queued := submit(t, ts.admin, countSpec(4, 10, 20*time.Millisecond))
	ctx := context.Background()
	// The gauges while one job runs on every GPU and another waits. The
	// queue's gauge counts the waiting job from its submission on; the
	// round that considers it comes after (a second round in all).
	waitJob(t, ts.admin, queued.ID, 5*time.Second, "considered by a round", func(*api.Job) bool {
		m := scrape(t, ts)
		return strings.Contains(m, "tide_queue_length 1\n") && metricValue(t, m, "tide_round_duration_seconds_count") >= 2
	})
	m := scrape(t, ts)
	for _, want := range []string{"tide_running_jobs 1", "tide_gpus_allocated 4", `tide_jobs{state="pending"} 1`, `tide_jobs{state="running"} 1`, "tide_jobs_submitted_total 2", "tide_jobs_started_total 1"} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if n := metricValue(t, m, "tide_round_duration_seconds_count"); n < 2 || metricValue(t, m, `tide_round_duration_seconds_bucket{le="+Inf"}`) != n {
		t.Errorf("round histogram: count %v:\n%s", n, m)
	}
	for _, id := range []string{queued.ID, run.ID} {
		j, err := ts.admin.Cancel(ctx, id)
		if err != nil || j.State != api.StateCancelled {
			t.Fatalf("cancel %s: %v %+v", id, err, j)
		}
	}
	j := waitJob(t, ts.admin, run.ID, 10*time.Second, "stopped", func(j *api.Job) bool { return j.Attempts[0].Ended != nil })
	if j.Attempts[0].Outcome != "cancelled" || j.Ended == nil {
		t.Errorf("cancelled attempt %+v", j.Attempts[0])
	}
	if alive(j.Attempts[0].PID) {
		t.Errorf("the cancelled job's process %d still runs", j.Attempts[0].PID)
	}
	q, _ := ts.admin.Job(ctx, queued.ID)
	if len(q.Attempts) != 0 || q.State != api.StateCancelled {
		t.Errorf("cancelled queued job: %+v", q)
	}
	if _, err := ts.admin.Cancel(ctx, run.ID); !isStatus(err, 409) {
		t.Errorf("second cancel: %v, want 409", err)
	}
}

// TestReportFile: a job without HTTP reports progress by appending to
// $TIDE_REPORT_FILE.
func TestReportFile(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	script := `echo '{"progress": 0.25, "message": "a quarter"}' >> "$TIDE_REPORT_FILE"; echo 'not json' >> "$TIDE_REPORT_FILE"; ` +
		`printf '{"step": 3, "total_steps": 6, "throughput": 12.5}\n' >> "$TIDE_REPORT_FILE"; sleep 30`
	j := submit(t, ts.admin, &api.JobSpec{Command: []string{"sh", "-c", script}, GPUs: 1})
	j = waitJob(t, ts.admin, j.ID, 10*time.Second, "reporting half", func(j *api.Job) bool { return j.Progress == 0.5 })
	if j.Message != "a quarter" || j.Throughput != 12.5 {
		t.Errorf("report: message %q throughput %v", j.Message, j.Throughput)
	}
	if _, err := ts.admin.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
}

// TestGoodputHints: step times a job reports are fitted into the goodput
// model the engine hands elastic policies, shown in the job's view, and
// kept across a server restart.
func TestGoodputHints(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.StopJobsOnExit = false
	ts := startServer(t, cfg)
	j := submit(t, ts.admin, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 2, BatchSize: 256})
	waitJob(t, ts.admin, j.ID, 10*time.Second, "running", inState(api.StateRunning))
	ctx := context.Background()
	for _, r := range []api.Report{
		{StepTime: 0.5, ComputeTime: 0.4, LocalBsz: 128, Replicas: 2, GradSqr: 1, GradVar: 10},
		{StepTime: 0.3, ComputeTime: 0.25, LocalBsz: 64, Replicas: 2},
		{StepTime: 9, ComputeTime: 9, LocalBsz: 64, Replicas: 2}, // a configuration already seen: ignored
	} {
		if err := ts.admin.Report(ctx, j.ID, &r); err != nil {
			t.Fatal(err)
		}
	}
	hints := func(ts *testServer) *goodput.Hints {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.eng.Job(j.ID).Hints
	}
	h := hints(ts)
	// The gradient statistics of the first report stay until others come.
	if h == nil || !h.Fitted || h.MaxReplicas != 2 || h.Limits.InitBatch != 256 || h.Grad.Var != 10 || h.Grad.Sqr != 1 {
		t.Fatalf("hints %+v", h)
	}
	if f := h.Function(); !(f.Throughput(1, 2, 128, 0) > 0) {
		t.Errorf("fitted throughput %v", f.Throughput(1, 2, 128, 0))
	}
	want := goodput.Fit([]goodput.Observation{{Nodes: 1, Replicas: 2, LocalBsz: 128, ComputeTime: 0.4, StepTime: 0.5},
		{Nodes: 1, Replicas: 2, LocalBsz: 64, ComputeTime: 0.25, StepTime: 0.3}})
	if h.Perf != want {
		t.Errorf("fitted %+v, want %+v", h.Perf, want)
	}
	v, err := ts.admin.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := v.Perf; p == nil || len(p.Observations) != 2 || p.Model == nil || p.Model.BetaC != want.BetaC || p.NoiseScale != 2560 ||
		len(p.Predicted) != 2 || p.Predicted[0].GPUs != 1 || p.Predicted[1].LocalBsz != 128 || p.Predicted[0].Speedup != 1 {
		t.Fatalf("perf view %+v", v.Perf)
	}
	ts.close(t)
	cfg.StopJobsOnExit = true // the last close waits for the job to exit
	ts = startServer(t, cfg)
	if h2 := hints(ts); h2 == nil || h2.Perf != want || h2.Grad != h.Grad || h2.MaxReplicas != 2 {
		t.Errorf("hints after a restart %+v, want %+v", h2, h)
	}
	if _, err := ts.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
}

// TestResize: under an elastic policy (Optimus) a job that holds every GPU
// is shrunk when a second one arrives: it is stopped (SIGTERM), and
// relaunched from its checkpoint on fewer GPUs, in a new
// CUDA_VISIBLE_DEVICES, once its old process is gone.
func TestResize(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "optimus"
	ts := startServer(t, cfg)
	elastic := func(steps int) *api.JobSpec {
		s := countSpec(4, steps, 20*time.Millisecond)
		s.MinGPUs, s.MaxGPUs, s.EstimateS = 1, 4, 100
		return s
	}
	a := submit(t, ts.admin, elastic(80))
	waitJob(t, ts.admin, a.ID, 10*time.Second, "running on 4 GPUs", func(j *api.Job) bool { return len(j.GPUs) == 4 && j.Progress > 0.1 })
	b := submit(t, ts.admin, elastic(20))
	done := inState(api.StateFinished, api.StateFailed)
	jb := waitJob(t, ts.admin, b.ID, 20*time.Second, "finished", done)
	ja := waitJob(t, ts.admin, a.ID, 20*time.Second, "finished", done)
	if ja.State != api.StateFinished || jb.State != api.StateFinished {
		t.Fatalf("states %s %s", ja.State, jb.State)
	}
	if len(ja.Attempts) < 2 || ja.Attempts[0].Outcome != "resized" || len(ja.Attempts[1].GPUs) >= 4 || ja.Preemptions != 0 {
		t.Fatalf("job a was not resized: preemptions %d attempts %+v", ja.Preemptions, ja.Attempts)
	}
	// The event says why, in the policy's terms.
	if m := eventMessages(t, ts.admin, a.ID, "resized"); len(m) == 0 || !strings.Contains(m[0], "shrunk 4->") {
		t.Errorf("resized events %q: want the policy's reason (shrunk 4->N GPUs)", m)
	}
	out := logs(t, ts.admin, a.ID)
	if line := lineWith(out, "(attempt 2,"); line == "" || strings.Contains(line, "at step 0 of") || strings.Contains(line, `GPUs "0,1,2,3"`) {
		t.Errorf("job a did not resume on fewer GPUs: %q\n%s", line, out)
	}
	if !jb.Attempts[0].Started.After(*ja.Attempts[0].Ended) && !jb.Attempts[0].Started.Equal(*ja.Attempts[0].Ended) {
		t.Errorf("job b launched at %v, before job a's old process exited at %v", jb.Attempts[0].Started, ja.Attempts[0].Ended)
	}
}

// lineWith returns the first line of s containing sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestPolluxLearnsFromReports: under Pollux the step times a job reports
// decide how many GPUs it gets. Both jobs are elastic (1 to 4 GPUs) and
// start on one GPU, all Pollux allows a job it knows nothing about. The
// one whose reports show it scales is grown, as its fitted model allows
// (twice the most replicas observed), to 2 then 4 GPUs; the one whose
// reports show that a second GPU makes its steps slower is tried on 2 and
// given back 1.
func TestPolluxLearnsFromReports(t *testing.T) {
	elastic := func(sync time.Duration) *api.JobSpec {
		s := countSpec(4, 100000, 0, "-step-time", "2ms", "-batch", "64", "-sample-time", "500us", "-sync-time", sync.String(), "-noise-scale", "500")
		s.MinGPUs, s.MaxGPUs, s.BatchSize, s.EstimateS = 1, 4, 64, 3600
		return s
	}
	replicas := func(j *api.Job) []int {
		var out []int
		if j.Perf != nil {
			for _, o := range j.Perf.Observations {
				out = append(out, o.Replicas)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		sync time.Duration
		// done says the job got where its reports should lead.
		done func(j *api.Job) bool
	}{
		{"scales", time.Millisecond, func(j *api.Job) bool { return len(j.GPUs) == 4 && len(replicas(j)) == 3 }},
		{"does not scale", 100 * time.Millisecond, func(j *api.Job) bool { return len(j.GPUs) == 1 && len(replicas(j)) == 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Policy = "pollux:restart_penalty=0"
			ts := startServer(t, cfg)
			j := submit(t, ts.admin, elastic(tc.sync))
			j = waitJob(t, ts.admin, j.ID, 20*time.Second, "resized as its reports say", tc.done)
			var sizes []int
			for _, a := range j.Attempts {
				sizes = append(sizes, len(a.GPUs))
			}
			p := j.Perf
			if p.Model == nil || len(p.Predicted) != 3 || p.NoiseScale < 499 || p.NoiseScale > 501 {
				t.Fatalf("perf view %+v", p)
			}
			speedup2 := p.Predicted[1].Speedup
			switch tc.name {
			case "scales":
				if fmt.Sprint(sizes) != "[1 2 4]" || fmt.Sprint(replicas(j)) != "[1 2 4]" {
					t.Errorf("attempts on %v GPUs, observations on %v replicas; want 1, 2, 4", sizes, replicas(j))
				}
				if speedup2 < 1.5 || p.Predicted[2].Speedup < speedup2 {
					t.Errorf("predicted %+v: want the fit to show the job scales", p.Predicted)
				}
			default:
				if fmt.Sprint(sizes[:3]) != "[1 2 1]" || fmt.Sprint(replicas(j)) != "[1 2]" {
					t.Errorf("attempts on %v GPUs, observations on %v replicas; want 1, 2, 1", sizes, replicas(j))
				}
				if speedup2 >= 1 {
					t.Errorf("predicted %+v: want the fit to show 2 GPUs are slower than 1", p.Predicted)
				}
			}
			// The observation on 2 GPUs is the one reported there.
			if o := p.Observations[1]; o.LocalBsz != 32 || math.Abs(o.StepTime-(0.002+0.016+tc.sync.Seconds())) > 1e-9 {
				t.Errorf("observation on 2 GPUs %+v", o)
			}
			if _, err := ts.admin.Cancel(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// metricValue is the value of the sample named name in a scrape.
func metricValue(t *testing.T, scrape, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics:\n%s", name, scrape)
	return 0
}

// TestPolluxAdaptsBatch: a job that allows a range of batch sizes gets,
// at each launch under Pollux, the batch of highest predicted goodput on
// its GPUs, which its reported gradient statistics decide: with a large
// gradient noise scale a larger batch trains as well per sample and runs
// faster, with a small one it wastes samples. The job starts on 1 GPU with
// its own batch (64), reports, and is grown to 2 GPUs with the batch its
// noise scale calls for.
func TestPolluxAdaptsBatch(t *testing.T) {
	for _, tc := range []struct {
		noise            string
		minBatch, maxBat int // the batch the second attempt must get
	}{
		{"1000000", 512, 1024},
		{"16", 64, 64},
	} {
		t.Run("noise scale "+tc.noise, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Policy = "pollux:restart_penalty=0"
			ts := startServer(t, cfg)
			s := countSpec(2, 100000, 0, "-step-time", "2ms", "-batch", "64", "-sample-time", "500us", "-sync-time", "1ms", "-noise-scale", tc.noise)
			s.MinGPUs, s.MaxGPUs, s.BatchSize, s.MaxBatchSize, s.EstimateS = 1, 2, 64, 1024, 3600
			j := submit(t, ts.admin, s)
			j = waitJob(t, ts.admin, j.ID, 20*time.Second, "relaunched on 2 GPUs", func(j *api.Job) bool {
				return len(j.Attempts) >= 2 && j.Attempts[1].PID > 0 && j.Perf != nil && len(j.Perf.Observations) == 2
			})
			a1, a2 := j.Attempts[0], j.Attempts[1]
			if len(a1.GPUs) != 1 || a1.BatchSize != 64 || a1.LocalBsz != 64 || a1.AccumSteps != 0 {
				t.Errorf("first attempt %+v: want 1 GPU with the job's own batch 64", a1)
			}
			if len(a2.GPUs) != 2 || a2.BatchSize < tc.minBatch || a2.BatchSize > tc.maxBat || a2.BatchSize != 2*a2.LocalBsz*(a2.AccumSteps+1) {
				t.Errorf("second attempt %+v: want 2 GPUs with a batch in [%d, %d]", a2, tc.minBatch, tc.maxBat)
			}
			t.Logf("attempts %+v", j.Attempts)
			// The job ran the batch it was given, and reported it.
			if o := j.Perf.Observations[1]; o.Replicas != 2 || o.LocalBsz != a2.LocalBsz {
				t.Errorf("observation on 2 GPUs %+v, attempt %+v", o, a2)
			}
			if line := lineWith(logs(t, ts.admin, j.ID), fmt.Sprintf("countjob: batch %d (%d per GPU on 2 GPUs", a2.BatchSize, a2.LocalBsz)); line == "" {
				t.Errorf("the job did not use its batch:\n%s", logs(t, ts.admin, j.ID))
			}
			if _, err := ts.admin.Cancel(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}
