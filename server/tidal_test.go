package server

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestTidalHoldsLive: tide serve under tidal holds a deadline job that
// EdgeFlow's admission would decline (policy/flow
// TestTidalHoldsInsteadOfDeclining), and the API says so, with tidal's
// reason and its times as UTC times; the job starts once the GPUs free and
// meets its deadline. A job the whole cloud can no longer end in time is
// declined, with tidal's reason in the API and the events.
//
// On 4 GPUs, a (40 min of work on 4 GPUs by its estimate, due in 45 min)
// holds them all; its process ends in about 30 s. b (20 min on 4 GPUs,
// due in 50 min) would end after a's planned end, too late: EdgeFlow
// declines it, tidal holds it since the whole cloud would end it in 20
// min. c (20 min on 4 GPUs, due in 20 min 10 s) is held until the whole
// cloud would end it too late, about 10 s later. swap=off: under the
// default swap=mh, b would take a's place instead (TestTidalSwapsLive).
func TestTidalHoldsLive(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "tidal:swap=off"
	ts := startServer(t, cfg)
	due := func(d time.Duration) (string, time.Time) {
		at := time.Now().Add(d).Truncate(time.Second).UTC()
		return at.Format(time.RFC3339), at
	}
	a := countSpec(4, 60, 500*time.Millisecond)
	a.EstimateS = 2400
	a.Deadline, _ = due(45 * time.Minute)
	aID := submit(t, ts.admin, a).ID
	waitJob(t, ts.admin, aID, 30*time.Second, "running", inState(api.StateRunning))
	b := countSpec(4, 5, 10*time.Millisecond)
	b.EstimateS = 1200
	var bDue time.Time
	b.Deadline, bDue = due(50 * time.Minute)
	c := countSpec(4, 5, 10*time.Millisecond)
	c.EstimateS = 1200
	c.Deadline, _ = due(20*time.Minute + 10*time.Second)
	bID, cID := submit(t, ts.admin, b).ID, submit(t, ts.admin, c).ID

	// Both are held at first: pending, never launched, tidal's reason.
	heldAs := map[string]*api.Job{}
	for _, id := range []string{bID, cID} {
		j := waitJob(t, ts.admin, id, 20*time.Second, "held", func(j *api.Job) bool {
			return strings.HasPrefix(j.Reason, "held, not declined") || api.Terminal(j.State)
		})
		if j.State != api.StatePending || len(j.Attempts) != 0 {
			t.Fatalf("job %s: state %s, %d attempts, reason %q; want pending, held, never launched", id, j.State, len(j.Attempts), j.Reason)
		}
		t.Logf("job %s held: %s", id, j.Reason)
		heldAs[id] = j
	}
	// b's reason names the latest admission that still ends it by its
	// deadline (its deadline less its 20 min of work) and its deadline,
	// as UTC times.
	jb := heldAs[bID]
	if want := "deadline " + bDue.Format(time.RFC3339); !strings.Contains(jb.Reason, want) {
		t.Errorf("b's reason %q does not name its deadline as %q", jb.Reason, want)
	}
	if m := regexp.MustCompile(`admitted by (\S+);`).FindStringSubmatch(jb.Reason); m == nil {
		t.Errorf("b's reason %q does not say by when it must be admitted", jb.Reason)
	} else if at, err := time.Parse(time.RFC3339, m[1]); err != nil {
		t.Errorf("b's reason: the latest admission %q is not an RFC 3339 time: %v", m[1], err)
	} else if want := bDue.Add(-20 * time.Minute); at.After(want.Add(time.Second)) || at.Before(want.Add(-time.Minute)) {
		t.Errorf("b's reason: latest admission %v, want its deadline less 20 min of work, %v (up to a minute earlier for start-up)", at, want)
	}

	// c is declined, with tidal's reason, while a still runs.
	j := waitJob(t, ts.admin, cID, 60*time.Second, "declined", inState(api.StateDeclined, api.StateRunning, api.StateFinished, api.StateFailed))
	t.Logf("c: %s: %s", j.State, j.Reason)
	if j.State != api.StateDeclined || len(j.Attempts) != 0 || !strings.Contains(j.Reason, "the whole cloud from now would not end it in time") {
		t.Errorf("c: state %s, %d attempts, reason %q; want declined with tidal's reason, never launched", j.State, len(j.Attempts), j.Reason)
	}
	evs, err := ts.admin.Events(context.Background(), cID)
	if err != nil {
		t.Fatal(err)
	}
	declined := 0
	for _, ev := range evs {
		if ev.Kind == "declined" && strings.Contains(ev.Message, "the whole cloud from now would not end it in time") {
			declined++
		}
	}
	if declined != 1 {
		t.Errorf("c's events %+v: want one declined event with tidal's reason", evs)
	}

	// b starts once a has ended, and ends by its deadline.
	j = waitJob(t, ts.admin, bID, 2*time.Minute, "finished", inState(api.StateFinished, api.StateFailed, api.StateDeclined))
	aj := waitJob(t, ts.admin, aID, 30*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
	if j.State != api.StateFinished || j.Started == nil || aj.Ended == nil || j.Started.Before(*aj.Ended) || j.Ended.After(bDue) {
		t.Errorf("b: state %s (%s), started %v, ended %v; a ended %v; want finished, started after a ended, by %v", j.State, j.Reason, j.Started, j.Ended, aj.Ended, bDue)
	}
}

// TestTidalSwapsLive: under tidal's default swap=mh, tide serve takes a
// running job out for a newcomer that meets in its place, and says so.
// TestTidalHoldsLive's a (40 min of work on all 4 GPUs by its estimate,
// due in 45 min) runs; b (20 min, due in 50 min) would end after a's
// planned end, so EdgeFlow declines it. a has more work left and has run
// less than swap_age, and the whole cloud could still end it in time: b
// takes its place. a is preempted, with the reason, and held; b runs
// once and ends; a is admitted again once b's GPUs free, and ends.
//
// b reports no progress. Admission would take a back once b's reports
// have half of b's work done (b's work left then fits before b's deadline
// behind a's), and a, due first, would run first: b is preempted, a
// legitimate plan. Whether a round comes between b's reports and b's exit
// is down to the machine's load: under load it came at b's step 3 of 5,
// and b ended after a's second run (30 s). Without reports b's work left
// is its estimate less the time it has run, and a waits for b's end.
func TestTidalSwapsLive(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Policy = "tidal"
	ts := startServer(t, cfg)
	due := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	a := countSpec(4, 60, 500*time.Millisecond)
	a.EstimateS = 2400
	a.Deadline = due(45 * time.Minute)
	aID := submit(t, ts.admin, a).ID
	waitJob(t, ts.admin, aID, 30*time.Second, "running", inState(api.StateRunning))
	b := countSpec(4, 5, 100*time.Millisecond)
	b.Command = append([]string{"/bin/sh", "-c", `unset TIDE_REPORT_URL TIDE_REPORT_FILE TIDE_REPORT_TOKEN; exec "$@"`, "b"}, b.Command...)
	b.EstimateS = 1200
	b.Deadline = due(50 * time.Minute)
	bID := submit(t, ts.admin, b).ID

	// a is held only while b runs (b's 0.5 s): a poll of a's reason can
	// miss it under load (it did, under the race detector at a load of
	// 8), so the preemption's event, which keeps the reason, says too.
	const why = "a newcomer with less work left took its place (Moore-Hodgson)"
	aj := waitJob(t, ts.admin, aID, 30*time.Second, "taken out for b", func(j *api.Job) bool {
		return strings.Contains(j.Reason, why) || len(j.Attempts) > 1 || api.Terminal(j.State)
	})
	t.Logf("a: %s: %s", aj.State, aj.Reason)
	if !strings.Contains(aj.Reason, why) {
		evs, err := ts.admin.Events(context.Background(), aID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Kind == "preempted" && strings.Contains(ev.Message, why) }) {
			t.Fatalf("a: state %s, reason %q, events %+v; want taken out for b with %q", aj.State, aj.Reason, evs, why)
		}
	}
	bj := waitJob(t, ts.admin, bID, time.Minute, "finished", inState(api.StateFinished, api.StateFailed, api.StateDeclined))
	aj = waitJob(t, ts.admin, aID, 2*time.Minute, "finished", inState(api.StateFinished, api.StateFailed, api.StateDeclined))
	if bj.State != api.StateFinished || aj.State != api.StateFinished {
		t.Fatalf("b %s (%s), a %s (%s): want both finished", bj.State, bj.Reason, aj.State, aj.Reason)
	}
	if len(aj.Attempts) < 2 || aj.Started == nil || bj.Started == nil || bj.Ended == nil || !aj.Ended.After(*bj.Ended) {
		t.Errorf("a: %d attempts, ended %v; b started %v, ended %v: want a run twice, ending after b", len(aj.Attempts), aj.Ended, bj.Started, bj.Ended)
	}
	if len(bj.Attempts) != 1 || bj.Attempts[0].Outcome != "finished" {
		t.Errorf("b's attempts %+v: want one, finished (b never taken out for a)", bj.Attempts)
	}
	if n := len(aj.Attempts); n >= 2 && bj.Ended != nil {
		if last := aj.Attempts[n-1]; last.Started == nil || last.Started.Before(*bj.Ended) {
			t.Errorf("a's last attempt started %v, b ended %v: want a launched again once b has ended", last.Started, bj.Ended)
		}
	}
}
