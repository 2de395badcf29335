package sim

import (
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/report"
)

// Every sample of the package's tests counts the fragmented GPUs afresh
// too: a kept count that strays from it panics (fairSample).
func init() { checkFrag = true }

// RunEager is Run advancing every running job at every round, as before
// lazy advance (lazy.go), to compare with it.
func RunEager(cfg Config, jobs []*job.Job) (*report.Run, error) {
	run, _, err := runSim(cfg, jobs, true)
	return run, err
}

// LazyStats says how lazy a run was: the rounds that left running jobs
// behind, and the running jobs a policy's read of their progress brought
// up to date (engine.Snapshot.Progress).
type LazyStats struct{ LazyRounds, Pulls int }

// RunStats is Run, with its LazyStats.
func RunStats(cfg Config, jobs []*job.Job) (*report.Run, LazyStats, error) {
	run, s, err := runSim(cfg, jobs, false)
	if err != nil {
		return nil, LazyStats{}, err
	}
	return run, LazyStats{s.lazyRounds, s.pulls}, nil
}

// SetMaxInstants sets how many round instants the simulator logs before
// bringing every running job up to date, and returns a function restoring
// it.
func SetMaxInstants(n int) (restore func()) {
	old := maxInstants
	maxInstants = n
	return func() { maxInstants = old }
}
