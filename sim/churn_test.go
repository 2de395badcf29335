package sim

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
)

// spinner runs, at every round before settle, the jobs that hold no GPUs
// and none of those that do: two jobs that each fill the cluster swap
// places every round. From settle on it runs the jobs in arrival order.
// From idle on, until settle, it runs nothing.
type spinner struct{ settle, idle float64 }

func (spinner) Name() string { return "spinner" }

func (p spinner) Schedule(s *engine.Snapshot) engine.Plan {
	var plan engine.Plan
	if p.idle > 0 && s.Now >= p.idle && s.Now < p.settle {
		return plan
	}
	free := s.Cluster.TotalGPUs()
	for _, st := range s.Jobs {
		if (s.Now >= p.settle || len(st.GPUs) == 0) && st.Job.GPUs <= free {
			plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
			free -= st.Job.GPUs
		}
	}
	return plan
}

// churnRun replays two one-hour jobs of 4 GPUs on one node of 4 under
// spinner, with rounds of 60 s and restarts of restart seconds; with idle,
// a third job arrives at settle.
func churnRun(t *testing.T, settle, idle, restart float64) (*report.Run, error) {
	t.Helper()
	c, err := cluster.Parse("1x4:t4")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*job.Job{enginetest.Job("a").GPUs(4).Seconds(3600).Obj(), enginetest.Job("b").GPUs(4).Seconds(3600).At(1).Obj()}
	if idle > 0 {
		// Something to come, or the stuck test fails the wait.
		jobs = append(jobs, enginetest.Job("c").GPUs(1).Seconds(60).At(settle).Obj())
	}
	costs := perf.Costs{Start: restart, Restart: restart, Resize: restart}
	return Run(Config{Cluster: c, Model: perf.Duration{Cost: perf.CostTable{Default: costs}}, Round: 60, OnEvents: true,
		Policy: spinner{settle: settle, idle: idle}, Placer: place.Pack{}}, jobs)
}

// failedAt is the simulated time a livelock error says the run stopped.
func failedAt(t *testing.T, err error) float64 {
	t.Helper()
	m := regexp.MustCompile(`to t=([0-9]+) s`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q: no end time", err)
	}
	at, _ := strconv.ParseFloat(m[1], 64)
	return at
}

// TestChurnFails: a policy that preempts every job it starts before the job
// has paid its restart cost (rounds of 60 s, restarts of 90 s) never lets
// one run. The run fails once churnRounds rounds have gone by that way,
// saying what it saw, not after the year check's two simulated years.
func TestChurnFails(t *testing.T) {
	_, err := churnRun(t, 1e18, 0, 90)
	if err == nil {
		t.Fatal("the run ended without an error, want the churn reported")
	}
	for _, want := range []string{"spinner", "none got past its start or restart cost", "none held its GPUs more than 60 s",
		"a start or restart costs 90 s or more", "[a b]", "re-plans more often than a job can restart", "rounds are 60 s apart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
	window := churnRounds * 60.0
	if at := failedAt(t, err); at < window || at > window+86400 {
		t.Errorf("failed at t=%v s, want it within a day after the window of %v s", at, window)
	}
}

// TestChurnRoundAsLongAsRestart: rounds of 60 s and restarts of 60 s. The
// policy stops every run at the round its cost ends, before it did any
// work; the end of the cost counted as getting past it, so the churn
// check never fired, and the year check blamed faults or capacity (a
// random search's gandiva:quantum=17 with 30 s rounds and restarts).
func TestChurnRoundAsLongAsRestart(t *testing.T) {
	_, err := churnRun(t, 1e18, 0, 60)
	if err == nil {
		t.Fatal("the run ended without an error, want the churn reported")
	}
	for _, want := range []string{"none got past its start or restart cost", "none held its GPUs more than 60 s", "re-plans more often than a job can restart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
	if at, window := failedAt(t, err), churnRounds*60.0; at > window+86400 {
		t.Errorf("failed at t=%v s, want it within a day after the window of %v s", at, window)
	}
}

// TestChurnSpares: runs that spin for a while and then move, that spin and
// then wait (nothing running) for longer than the window before they move,
// or whose restarts are shorter than the rounds, finish.
func TestChurnSpares(t *testing.T) {
	const window = churnRounds * 60
	for _, tc := range []struct {
		name                  string
		settle, idle, restart float64
	}{
		{"settles within the window", 0.9 * window, 0, 90},
		{"waits past the window", 0.5*window + 2*window, 0.5 * window, 90},
		{"restarts shorter than rounds", 1e18, 0, 50},
	} {
		r, err := churnRun(t, tc.settle, tc.idle, tc.restart)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, rec := range r.Jobs {
			if rec.Finish < 0 {
				t.Errorf("%s: job %s did not finish", tc.name, rec.ID)
			}
		}
	}
}

// TestChurnGavel: what a random search found. Gavel's FIFO as Gavel's
// simulator picks types (pick=gavel) over-commits the V100s, and its
// rounds then rotate jobs through them; re-planning every 26 s with
// restarts of 30 s, no job ever runs. The run used to fail after two
// simulated years (a minute of wall time, 300 MB), blaming faults or
// capacity; it fails within days, blaming the rounds.
func TestChurnGavel(t *testing.T) {
	c, err := cluster.Parse("1x4:v100,1x4:p100,1x4:k80")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*job.Job
	gpus := []int{1, 4, 2, 2, 4, 4, 2, 4, 1, 2, 4, 2}
	secs := []float64{7200, 1800, 7200, 7200, 1800, 1800, 3600, 1800, 7200, 7200, 3600, 7200}
	for i := range gpus {
		jobs = append(jobs, enginetest.Job(strconv.Itoa(i)).GPUs(gpus[i]).Seconds(secs[i]).At(float64(5*i)).Obj())
	}
	p, err := policy.Parse("gavel-fifo:pick=gavel:round=26", policy.Context{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	costs := perf.Costs{Start: 30, Restart: 30, Resize: 30}
	model := perf.SpeedFactors{Base: perf.Duration{Cost: perf.CostTable{Default: costs}}, Speed: map[string]float64{"v100": 1, "p100": 0.6, "k80": 0.25}}
	_, err = Run(Config{Cluster: c, Model: model, Round: 26, OnEvents: true, Policy: p, Placer: place.Pack{}}, jobs)
	if err == nil {
		t.Fatal("the run ended without an error, want the churn reported")
	}
	for _, want := range []string{"gavel-fifo", "none got past its start or restart cost", "a start or restart costs 30 s or more", "rounds are 26 s apart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
	if at := failedAt(t, err); at > 7*86400 {
		t.Errorf("failed at t=%v s, want it within a week", at)
	}
}

// TestChurnBesideFaults: a policy that preempts every job it starts, on a
// node that fails now and then. Each failure and repair starts the churn
// check's window afresh, so the year check fails the run; it must blame
// the rounds, which stopped nearly every run, not the faults, which
// stopped a few (a random search's tiresias:knob=3:limits=22 on a faulty
// cloud was told its faults were too frequent).
func TestChurnBesideFaults(t *testing.T) {
	c := multiSite(t, 1, 0, 0)
	jobs := []*job.Job{enginetest.Job("a").GPUs(4).Seconds(3600).Obj(), enginetest.Job("b").GPUs(4).Seconds(3600).At(1).Obj()}
	sites := &Sites{Faults: []capacity.Faults{{Site: "cloud", MTBF: 86400, MTTR: 600, Seed: 1}}, CheckpointInterval: 600}
	costs := perf.Costs{Start: 90, Restart: 90, Resize: 90}
	_, err := Run(Config{Cluster: c, Model: perf.Duration{Cost: perf.CostTable{Default: costs}}, Round: 60, OnEvents: true,
		Policy: spinner{settle: 1e18}, Placer: place.Pack{}, Sites: sites}, jobs)
	if err == nil {
		t.Fatal("the run ended without an error, want the livelock reported")
	}
	for _, want := range []string{"none finished, arrived or got further", "the policy stopped", "before they got past their start or restart cost (node faults stopped ",
		"re-plan (the simulator's rounds are 60 s apart)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
}
