package engine

// Progress on demand (issue 19). A policy that reads a job's Progress
// (its remaining time, its rate at that progress) used to need every
// running job's progress reported before every round, so a simulator
// advanced every running job every round: a round cost what runs, not what
// changed. Now a policy may read it through Snapshot.Progress (and
// Snapshot.Remaining, which calls it), which pulls the progress of a running
// job from the executor when it is read (Config.Progress): a simulator then
// brings only that job up to date, and a policy that reads the progress of
// some running jobs pays for those alone. A live executor has no hook: its
// jobs report their progress as they make it (Engine.Report), and
// Snapshot.Progress returns what they reported.

// ProgressFree is an optional Policy interface: a policy whose
// ProgressFree reports true never reads a job's Progress, nor anything
// computed from it (Snapshot.Remaining), while it plans. An executor may
// then report the progress of a job that keeps running only when it
// needs to (when it stops or ends) instead of before every round
// (Engine.NeedsProgress); its Progress in a round's snapshot may be older.
// Only the policy the engine holds counts: wrappers do not forward it.
type ProgressFree interface {
	Policy
	ProgressFree() bool
}

// ProgressOnDemand is an optional Policy interface: a policy whose
// ProgressOnDemand reports true reads the progress of a job that holds
// GPUs only through Snapshot.Progress (or what calls it: Snapshot.Remaining),
// never through Status.Progress (nor Engine.Snapshot's copies), so an
// engine with a ProgressSource lets its executor skip reporting every
// running job's progress before each round (Engine.NeedsProgress). A
// waiting job's Status.Progress is always current (an executor reports a
// job's progress when it stops). Only the policy the engine holds counts:
// wrappers do not forward it.
type ProgressOnDemand interface {
	Policy
	ProgressOnDemand() bool
}

// ProgressSource is an executor that brings a running job's progress up to
// date when it is read (Config.Progress).
type ProgressSource interface {
	// PullProgress reports (Engine.ReportStatus) the progress active job st
	// has made by the current round, when it holds GPUs: exactly what the
	// executor would have reported for it had it reported every running job
	// before the round. It may be called for the same job several times a
	// round, and must change nothing but the job's progress.
	PullProgress(st *Status)
}

// Progress returns st's progress in model units as of the snapshot: for a
// job holding GPUs in a round's snapshot, pulled from the executor first
// when the engine has a ProgressSource (Config.Progress); Status.Progress
// otherwise. A ProgressOnDemand policy reads running jobs' progress only
// through it.
func (s *Snapshot) Progress(st *Status) float64 {
	if s.eng != nil && s.eng.cfg.Progress != nil && len(st.GPUs) > 0 {
		s.eng.cfg.Progress.PullProgress(st)
	}
	return st.Progress
}

// NeedsProgress reports whether the executor must report every running
// job's progress before each round: false when the engine's policy never
// reads progress (ProgressFree), or reads it only on demand
// (ProgressOnDemand) and the engine has a ProgressSource to pull it from.
func (e *Engine) NeedsProgress() bool {
	if p, ok := e.cfg.Policy.(ProgressFree); ok && p.ProgressFree() {
		return false
	}
	p, ok := e.cfg.Policy.(ProgressOnDemand)
	return !ok || !p.ProgressOnDemand() || e.cfg.Progress == nil
}
