package kube

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestEngineTimeline: the job view's timeline on tide kube, from what the
// engine keeps of a job: its first start, last start or resize, last stop
// and counts.
func TestEngineTimeline(t *testing.T) {
	for _, c := range []struct {
		name    string
		st      engine.Status
		moments string // kinds, in order
		attempt string // outcome of the last launch; "" none
		ended   bool
	}{
		{"never started", engine.Status{State: job.Pending, FirstStart: -1, LastStart: -1, Finish: -1}, "", "", false},
		{"running", engine.Status{State: job.Running, FirstStart: 10, LastStart: 10, LastStop: 0, Starts: 1, Finish: -1}, "start", "running", false},
		{"preempted, waiting", engine.Status{State: job.Preempted, FirstStart: 10, LastStart: 10, LastStop: 50, Starts: 1, Preemptions: 1, Finish: -1,
			Reason: engine.Reason{Text: "preempted; shorter jobs first"}}, "start preempted", "preempted", true},
		{"restarted", engine.Status{State: job.Running, FirstStart: 10, LastStart: 80, LastStop: 50, Starts: 2, Preemptions: 1, Finish: -1}, "start preempted restart", "running", false},
		{"resized", engine.Status{State: job.Running, FirstStart: 10, LastStart: 30, LastStop: 0, Starts: 1, Resizes: 1, Finish: -1}, "start resized", "running", false},
		{"finished", engine.Status{State: job.Finished, FirstStart: 10, LastStart: 10, Starts: 1, Finish: 90}, "start", "finished", true},
	} {
		var kinds []string
		for _, e := range engineMoments(&c.st) {
			kinds = append(kinds, e.Kind)
			if e.Kind == "preempted" && c.st.Reason.Text != "" && !strings.Contains(e.Message, c.st.Reason.Text) {
				t.Errorf("%s: the preemption %q lacks the policy's reason", c.name, e.Message)
			}
		}
		if got := strings.Join(kinds, " "); got != c.moments {
			t.Errorf("%s: moments %q, want %q", c.name, got, c.moments)
		}
		as := engineAttempt(&c.st)
		switch {
		case c.attempt == "" && len(as) != 0:
			t.Errorf("%s: launches %+v, want none", c.name, as)
		case c.attempt != "" && (len(as) != 1 || as[0].Outcome != c.attempt || (as[0].Ended != nil) != c.ended):
			t.Errorf("%s: launches %+v, want one %s (ended: %v)", c.name, as, c.attempt, c.ended)
		}
	}
}
