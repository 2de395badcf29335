package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestJobShowsPerf: the step times and gradient statistics a job reports
// reach `tide job`, as the goodput model fitted to them, and under Pollux
// that model grows the job (it starts on one GPU, all Pollux gives a job
// it knows nothing about).
func TestJobShowsPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, countjob := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	const tok = "tide_test_admin_token_0123456789"
	s := serve(t, bin, dir, "--admin-token-file", writeToken(t, tok), "--policy", "pollux:restart_penalty=0")
	id := strings.Fields(cli(t, s, tok, "submit", "--name", "elastic", "--min-gpus", "1", "--max-gpus", "4", "--batch-size", "64",
		"--", countjob, "-steps", "100000", "-step-time", "2ms", "-batch", "64", "-sample-time", "500us", "-sync-time", "1ms", "-noise-scale", "500"))[0]
	waitFor(t, "the job to be grown to 4 GPUs", 20*time.Second, func() bool {
		j := cliJob(t, s, tok, id)
		return len(j.GPUs) == 4 && j.Perf != nil && len(j.Perf.Observations) == 3
	})
	out := cli(t, s, tok, "job", id)
	for _, want := range []string{
		"Gradients:  noise scale 500 samples",
		"Performance (goodput model fitted to 3 observed configurations, on 1, 2, 4 GPUs; predictions for one node):",
		"GPUS  BATCH        STEP     SAMPLES/S  SPEEDUP  OBSERVED STEP",
		// 2 ms + 64 x 0.5 ms on one GPU; 2 + 32 x 0.5 + 1 ms on two.
		"1     64 (64/GPU)  0.034 s  1882       1.00x    0.034 s (64/GPU)",
		"2     64 (32/GPU)  0.019 s  3368       1.79x    0.019 s (32/GPU)",
		"4     64 (16/GPU)  0.011 s  5818       3.09x    0.011 s (16/GPU)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tide job lacks %q:\n%s", want, out)
		}
	}
	cli(t, s, tok, "cancel", id)
	waitFor(t, "the cancelled job to exit", 10*time.Second, func() bool {
		a := cliJob(t, s, tok, id).Attempts
		return a[len(a)-1].Ended != nil
	})
}

// TestAbsoluteDeadline: a deadline given as a duration is fixed from the
// submission's time; an RFC 3339 time passes through; anything else, or a
// duration not in the future, is refused naming both forms.
func TestAbsoluteDeadline(t *testing.T) {
	now := time.Date(2026, 11, 29, 17, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "", want: ""},
		{in: "2h", want: "2026-11-29T18:00:00Z"},
		{in: "+90m", want: "2026-11-29T17:30:00Z"},
		{in: " 1h30m", want: "2026-11-29T17:30:00Z"},
		{in: "2027-01-02T15:04:05+01:00", want: "2027-01-02T15:04:05+01:00"},
		{in: "0s", err: "must be positive"},
		{in: "-5m", err: "must be positive"},
		{in: "tomorrow", err: "a duration from now such as 2h30m"},
		{in: "2027-01-02 15:04", err: "RFC 3339"},
	} {
		got, err := absoluteDeadline(c.in, now)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

// TestDeadlineStatus: `tide job` says whether a finished job met its
// deadline and, before it ends, how long is left.
func TestDeadlineStatus(t *testing.T) {
	d := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { t := d.Add(time.Duration(m) * time.Minute); return &t }
	for _, c := range []struct {
		state string
		ended *time.Time
		now   time.Time
		want  string
	}{
		{api.StateFinished, at(-5), *at(10), "(met)"},
		{api.StateFinished, at(0), *at(10), "(met)"},
		{api.StateFinished, at(75), *at(80), "(missed by 1h15m)"},
		{api.StateRunning, nil, *at(-12), "(in 12m)"},
		{api.StatePending, nil, *at(3), "(passed 3m ago)"},
	} {
		j := &api.Job{State: c.state, Ended: c.ended, Spec: api.JobSpec{Deadline: d.Format(time.RFC3339)}}
		if got := deadlineStatus(j, c.now); !strings.HasSuffix(got, c.want) || !strings.HasPrefix(got, stamp(&d)) {
			t.Errorf("%s ended %v at %v: %q, want %s %s", c.state, c.ended, c.now, got, stamp(&d), c.want)
		}
	}
	// A job that failed or was declined neither met nor missed it.
	j := &api.Job{State: api.StateDeclined, Ended: at(-30), Spec: api.JobSpec{Deadline: d.Format(time.RFC3339)}}
	if got := deadlineStatus(j, *at(10)); got != stamp(&d) {
		t.Errorf("declined: %q, want %q", got, stamp(&d))
	}
}
