package job_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
)

// gpus sets the three GPU fields as given (0 = unset), bypassing the
// builder's rigid default.
func gpus(n, lo, hi int) func(*job.Job) {
	return func(j *job.Job) { j.GPUs, j.MinGPUs, j.MaxGPUs = n, lo, hi }
}

// TestValidateDefaults: Validate fills MinGPUs/MaxGPUs from GPUs and GPUs
// from MaxGPUs. Each expectation follows from those two rules, applied in
// that order: GPUs first (from MaxGPUs), then Min and Max (from GPUs).
func TestValidateDefaults(t *testing.T) {
	cases := []struct {
		name        string
		set         func(*job.Job)
		n, lo, hi   int
		wantElastic bool
	}{
		{"only gpus", gpus(4, 0, 0), 4, 4, 4, false},
		{"only max", gpus(0, 0, 8), 8, 8, 8, false},
		// GPUs <- Max = 8, Min stays 2.
		{"min and max", gpus(0, 2, 8), 8, 2, 8, true},
		// Max <- GPUs = 4.
		{"gpus and min", gpus(4, 1, 0), 4, 1, 4, true},
		// Min <- GPUs = 2.
		{"gpus and max", gpus(2, 0, 6), 2, 2, 6, true},
		{"all set", gpus(3, 1, 5), 3, 1, 5, true},
		{"rigid", gpus(2, 2, 2), 2, 2, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := enginetest.Job("a").Obj()
			tc.set(j)
			if err := j.Validate(); err != nil {
				t.Fatal(err)
			}
			if j.GPUs != tc.n || j.MinGPUs != tc.lo || j.MaxGPUs != tc.hi {
				t.Fatalf("gpus %d [%d, %d], want %d [%d, %d]", j.GPUs, j.MinGPUs, j.MaxGPUs, tc.n, tc.lo, tc.hi)
			}
			if j.Elastic() != tc.wantElastic {
				t.Fatalf("Elastic() = %v, want %v", j.Elastic(), tc.wantElastic)
			}
			// Validating again changes nothing: defaults are filled once.
			before := *j
			if err := j.Validate(); err != nil || *j != before {
				t.Fatalf("second Validate: %v, %+v -> %+v", err, before, *j)
			}
		})
	}
}

// TestValidateAccepts: values at the edge of each accepted range pass
// and leave the job as it was.
func TestValidateAccepts(t *testing.T) {
	cases := []struct {
		name string
		set  func(*job.Job)
	}{
		{"submit 0", func(j *job.Job) { j.Submit = 0 }},
		{"submit late", func(j *job.Job) { j.Submit = 1.7e9 }},
		{"tiny work", func(j *job.Job) { j.Work = math.SmallestNonzeroFloat64 }},
		{"iterations", func(j *job.Job) { j.Unit = job.Iterations }},
		{"samples", func(j *job.Job) { j.Unit = job.Samples }},
		{"epochs", func(j *job.Job) { j.Unit, j.Model, j.BatchSize = job.Epochs, "cifar10", 512 }},
		{"seconds", func(j *job.Job) { j.Unit = job.Seconds }},
		{"batch 0", func(j *job.Job) { j.BatchSize = 0 }},
		{"no deadline", func(j *job.Job) { j.Deadline = 0 }},
		{"deadline", func(j *job.Job) { j.Deadline = 3600 }},
		{"unknown duration", func(j *job.Job) { j.Duration = 0 }},
		{"negative priority", func(j *job.Job) { j.Priority = -5 }},
		{"any type", func(j *job.Job) { j.GPUType = "" }},
		{"times at the horizon", func(j *job.Job) { j.Submit, j.Deadline, j.Duration = job.MaxTime, job.MaxTime, job.MaxTime }},
		{"iterations past the horizon", func(j *job.Job) { j.Work, j.Unit = 1e15, job.Iterations }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := enginetest.Job("a").GPUs(2).Obj()
			tc.set(j)
			want := *j
			if err := j.Validate(); err != nil {
				t.Fatal(err)
			}
			if *j != want {
				t.Fatalf("Validate changed %+v to %+v", want, *j)
			}
		})
	}
}

// TestValidateErrors: each case breaks one rule of Validate and must fail
// with an error naming the job, the field and the bad value.
func TestValidateErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name string
		set  func(*job.Job)
		want []string // substrings of the error
	}{
		{"no id", func(j *job.Job) { j.ID = "" }, []string{"job: id: missing"}},
		{"negative submit", func(j *job.Job) { j.Submit = -1 }, []string{"job a: submit time", "got -1"}},
		{"nan submit", func(j *job.Job) { j.Submit = nan }, []string{"job a: submit time", "got NaN"}},
		{"infinite submit", func(j *job.Job) { j.Submit = inf }, []string{"job a: submit time", "got +Inf"}},
		{"no gpus", gpus(0, 0, 0), []string{"job a: gpus: want at least 1 GPU, got 0"}},
		{"negative gpus", gpus(-2, 0, 0), []string{"job a: gpus: want at least 1 GPU, got -2"}},
		// GPUs <- Max = -3, which is then too few.
		{"negative max only", gpus(0, 0, -3), []string{"job a: gpus: want at least 1 GPU, got -3"}},
		// Only MinGPUs is wrong: the message must name it and its value,
		// not GPUs (which is fine at 2).
		{"negative min", gpus(2, -1, 2), []string{"job a: min gpus: want at least 1 GPU, got -1"}},
		{"min above max", gpus(2, 4, 3), []string{"job a: min gpus 4 > max gpus 3"}},
		// Min <- GPUs = 2 > Max.
		{"max negative with gpus", gpus(2, 0, -1), []string{"job a: min gpus 2 > max gpus -1"}},
		{"gpus below min", gpus(1, 2, 4), []string{"job a: gpus 1 outside [min 2, max 4]"}},
		{"gpus above max", gpus(5, 2, 4), []string{"job a: gpus 5 outside [min 2, max 4]"}},
		{"no work", func(j *job.Job) { j.Work = 0 }, []string{"job a: work", "got 0"}},
		{"negative work", func(j *job.Job) { j.Work = -10 }, []string{"job a: work", "got -10"}},
		{"nan work", func(j *job.Job) { j.Work = nan }, []string{"job a: work", "got NaN"}},
		{"infinite work", func(j *job.Job) { j.Work = inf }, []string{"job a: work", "got +Inf"}},
		{"no unit", func(j *job.Job) { j.Unit = "" }, []string{"job a: work unit: missing"}},
		{"unknown unit", func(j *job.Job) { j.Unit = "steps" }, []string{`job a: work unit "steps": want iterations, samples, epochs or seconds`}},
		{"unit case", func(j *job.Job) { j.Unit = "Seconds" }, []string{`work unit "Seconds"`}},
		{"negative batch", func(j *job.Job) { j.BatchSize = -1 }, []string{"job a: batch size", "got -1"}},
		{"negative deadline", func(j *job.Job) { j.Deadline = -5 }, []string{"job a: deadline", "got -5"}},
		{"negative cpus", func(j *job.Job) { j.CPUs = -1 }, []string{"job a: cpus", "got -1"}},
		{"nan memory", func(j *job.Job) { j.MemGiB = nan }, []string{"job a: mem_gib", "got NaN"}},
		{"nan deadline", func(j *job.Job) { j.Deadline = nan }, []string{"job a: deadline", "got NaN"}},
		{"negative duration", func(j *job.Job) { j.Duration = -0.5 }, []string{"job a: duration", "got -0.5"}},
		{"nan duration", func(j *job.Job) { j.Duration = nan }, []string{"job a: duration", "got NaN"}},
		// Past job.MaxTime: a trace's 1e300 once hung tide sim.
		{"submit past the horizon", func(j *job.Job) { j.Submit = 1e300 }, []string{"job a: submit time: want seconds in [0, 1e+10]", "got 1e+300"}},
		{"deadline past the horizon", func(j *job.Job) { j.Deadline = 2e10 }, []string{"job a: deadline: want seconds in [0, 1e+10]", "got 2e+10"}},
		{"duration past the horizon", func(j *job.Job) { j.Duration = 1.5e10 }, []string{"job a: duration", "got 1.5e+10"}},
		{"seconds of work past the horizon", func(j *job.Job) { j.Work, j.Unit = 3e10, job.Seconds }, []string{"job a: work: want at most 1e+10 seconds", "got 3e+10"}},
		{"infinite deadline", func(j *job.Job) { j.Deadline = inf }, []string{"job a: deadline", "got +Inf"}},
		{"infinite duration", func(j *job.Job) { j.Duration = inf }, []string{"job a: duration", "got +Inf"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := enginetest.Job("a").Obj()
			tc.set(j)
			err := j.Validate()
			if err == nil {
				t.Fatalf("%+v: want an error", *j)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestValidateOrder: with several bad fields the first rule in Validate's
// order reports (id, submit, gpus, work, unit, ...), so one fix at a time
// converges.
func TestValidateOrder(t *testing.T) {
	j := &job.Job{Submit: -1, Work: -1}
	for _, want := range []string{"id: missing", "submit time", "gpus: want at least 1", "work:", "work unit: missing"} {
		err := j.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		switch {
		case j.ID == "":
			j.ID = "x"
		case j.Submit < 0:
			j.Submit = 0
		case j.GPUs <= 0:
			j.GPUs = 1
		case j.Work <= 0:
			j.Work = 1
		}
	}
	j.Unit = job.Epochs
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestState: the lifecycle diagram in job.go: finished, failed and
// declined never run again; pending and preempted wait for GPUs; running
// does neither. An unknown state is neither.
func TestState(t *testing.T) {
	cases := []struct {
		s                 job.State
		terminal, waiting bool
	}{
		{job.Pending, false, true},
		{job.Running, false, false},
		{job.Preempted, false, true},
		{job.Finished, true, false},
		{job.Failed, true, false},
		{job.Declined, true, false},
		{"", false, false},
		{"Finished", false, false},
	}
	for _, tc := range cases {
		if got := tc.s.Terminal(); got != tc.terminal {
			t.Errorf("%q.Terminal() = %v, want %v", tc.s, got, tc.terminal)
		}
		if got := tc.s.Waiting(); got != tc.waiting {
			t.Errorf("%q.Waiting() = %v, want %v", tc.s, got, tc.waiting)
		}
	}
}

// TestStateNames: the states are written to reports and traces by their
// string value, so the values are part of the format.
func TestStateNames(t *testing.T) {
	for s, want := range map[job.State]string{
		job.Pending: "pending", job.Running: "running", job.Preempted: "preempted",
		job.Finished: "finished", job.Failed: "failed", job.Declined: "declined",
	} {
		if string(s) != want {
			t.Errorf("state %q, want %q", s, want)
		}
	}
}

// TestUtilityMoved: a soft job's options move with its times; values stay;
// the original is untouched; nil stays nil.
func TestUtilityMoved(t *testing.T) {
	u := &job.Utility{Deadlines: []float64{100, 150}, Values: []float64{10, 5}}
	m := u.Moved(func(d float64) float64 { return d - 40 })
	if m.Deadlines[0] != 60 || m.Deadlines[1] != 110 || m.Values[1] != 5 || u.Deadlines[0] != 100 {
		t.Fatalf("moved %+v from %+v", m, u)
	}
	var none *job.Utility
	if none.Moved(func(d float64) float64 { return d }) != nil {
		t.Fatal("nil moved to non-nil")
	}
}

// TestUnix: a time in seconds since the epoch, exact in years where
// UnixNano overflows; LiveTime refuses what a job's times may not be.
func TestUnix(t *testing.T) {
	for _, tc := range []struct {
		at   string
		unix float64
		live bool
	}{
		{"1970-01-01T00:00:00Z", 0, true},
		{"2026-11-29T17:00:00.5Z", 1795971600.5, true},
		{"2286-11-20T17:46:40Z", job.MaxTime, true},
		{"2286-11-20T17:46:41Z", job.MaxTime + 1, false},
		{"9999-01-01T00:00:00Z", 253370764800, false}, // UnixNano: -4.9e9
		{"1600-01-01T00:00:00Z", -11676096000, false}, // UnixNano: +6.8e9
	} {
		at, err := time.Parse(time.RFC3339, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if got := job.Unix(at); got != tc.unix {
			t.Errorf("Unix(%s) = %v, want %v", tc.at, got, tc.unix)
		}
		s, err := job.LiveTime(at)
		if (err == nil) != tc.live || (err == nil && s != tc.unix) {
			t.Errorf("LiveTime(%s) = %v, %v; want accepted %v", tc.at, s, err, tc.live)
		}
	}
}
