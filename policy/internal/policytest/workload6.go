package policytest

import (
	"testing"

	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/trace"
)

// Workload6 reads what tide sim replays by default: the embedded Pollux
// workload-6 (160 jobs) and the embedded Pollux profiles.
func Workload6(tb testing.TB) ([]*job.Job, *pollux.Model) {
	tb.Helper()
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Read(f, data.DefaultTrace, trace.Pollux, trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := pollux.Load(data.FS, data.ProfilesDir)
	if err != nil {
		tb.Fatal(err)
	}
	return tr.Jobs, m
}
