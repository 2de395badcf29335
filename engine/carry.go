package engine

import "fmt"

// Carry copies a job's history from prev, the status the same job had in an
// earlier engine: service attained, time executed (per GPU type too) and waited, first and last
// start, last stop, launch, preemption and resize counts, progress, the
// policy's memo and the job's hints. State and GPUs are left alone (Adopt
// sets those). Executors whose cluster changes under them (Kubernetes nodes
// come and go) rebuild their engine on the new cluster and carry each job's
// history over, so that policies that rank by attained service (Tiresias)
// or launches keep their view. It fails when the job is unknown or
// terminal, or prev belongs to another job.
func (e *Engine) Carry(id string, prev *Status) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("carry: unknown job %s", id)
	}
	if st.State.Terminal() {
		return fmt.Errorf("carry: job %s is %s", id, st.State)
	}
	if prev == nil || prev.Job == nil || prev.Job.ID != id {
		return fmt.Errorf("carry: job %s: history of another job", id)
	}
	e.accountJob(st, e.cfg.Clock.Now())
	e.touch(st)
	st.Attained, st.Executed, st.Waited = prev.Attained, prev.Executed, prev.Waited
	st.TypeExecuted = prev.typeExecutedNow()
	st.clearOne() // the map holds prev's every type
	st.restartSegment()
	st.FirstStart, st.LastStop = prev.FirstStart, prev.LastStop
	if prev.LastStart >= 0 {
		st.LastStart = prev.LastStart
	}
	st.Starts, st.Preemptions, st.Resizes = prev.Starts, prev.Preemptions, prev.Resizes
	st.Memo, st.Hints = prev.Memo, prev.Hints
	if prev.Progress > st.Progress {
		st.Progress = min(prev.Progress, st.Work)
	}
	return nil
}
