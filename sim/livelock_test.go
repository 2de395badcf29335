package sim

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/classic"
)

// TestLivelockFails: a node that fails a second after each repair never
// lets a job reach its first checkpoint, so the run would go on forever
// (the stuck test does not fire: a repair is always to come). It must fail
// with an error that says so and blames the faults, after two windows of
// simulated time: the churn check, which every failure and repair starts
// afresh, leaves it alone.
func TestLivelockFails(t *testing.T) {
	c := multiSite(t, 1, 0, 0)
	jobs := []*job.Job{enginetest.Job("a").GPUs(4).Seconds(7200).Obj()}
	sites := &Sites{Faults: []capacity.Faults{{Site: "cloud", MTBF: 1, MTTR: 3600, Seed: 1}}, CheckpointInterval: 600}
	_, err := Run(Config{Cluster: c, Model: perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 10}}},
		Policy: &classic.FIFO{}, Placer: place.Pack{}, Sites: sites}, jobs)
	if err == nil {
		t.Fatal("the run ended without an error, want the livelock reported")
	}
	for _, want := range []string{"none finished, arrived or got further", "[a]", "fifo",
		"node faults stopped running jobs", "next checkpoint (every 600 s of running)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
}

// TestLivelockSpares: runs that take years but move keep going. One job of
// three years alone on a cloud, bare and with a fault a month (it loses at
// most a checkpoint interval each time), and jobs that arrive a year and a
// half apart must all finish.
func TestLivelockSpares(t *testing.T) {
	const year = 365 * 86400.0
	long := func() []*job.Job { return []*job.Job{enginetest.Job("a").GPUs(4).Seconds(3 * year).Obj()} }
	apart := []*job.Job{enginetest.Job("a").GPUs(4).Seconds(3600).Obj(),
		enginetest.Job("b").GPUs(4).Seconds(3600).At(1.5 * year).Obj(),
		enginetest.Job("c").GPUs(4).Seconds(3600).At(3 * year).Obj()}
	for _, tc := range []struct {
		name  string
		sites *Sites
		jobs  []*job.Job
	}{
		{"bare", nil, long()},
		{"monthly faults", &Sites{Faults: []capacity.Faults{{Site: "cloud", MTBF: 30 * 86400, MTTR: 3600, Seed: 1}}, CheckpointInterval: 600}, long()},
		{"arrivals apart", nil, apart},
	} {
		r, err := Run(Config{Cluster: multiSite(t, 1, 0, 0), Model: perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 10}}},
			Policy: &classic.FIFO{}, Placer: place.Pack{}, Sites: tc.sites}, tc.jobs)
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

// slow is a model under which every job does a second of its work in a
// hundred years.
type slow struct{ perf.Duration }

func (m slow) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	r, until := m.Duration.Rate(j, a, p)
	return r / (100 * 365 * 86400), until
}

// TestHorizonFails: a run whose work no GPU could do before the horizon
// (job.MaxTime twice over) fails saying so, rather than running for hours
// or, past the point where float64 seconds can count rounds, for ever.
// Periodic rounds are a day apart here, to get there within the test.
func TestHorizonFails(t *testing.T) {
	jobs := []*job.Job{enginetest.Job("a").GPUs(4).Seconds(3600).Obj()}
	_, err := Run(Config{Cluster: multiSite(t, 1, 0, 0), Model: slow{}, Round: 86400,
		Policy: &classic.FIFO{}, Placer: place.Pack{}}, jobs)
	if err == nil {
		t.Fatal("the run ended without an error, want the horizon reported")
	}
	for _, want := range []string{"past 634 simulated years", "[a]", "work far more than its GPUs can do"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
}
