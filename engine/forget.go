package engine

import "fmt"

// Forget removes an ended (finished or failed) job from the engine, so
// that its ID may be submitted again: an executor that requeues a job (a
// new run of the same job, as Slurm's scontrol requeue) forgets it, then
// submits it anew. A job still waiting or running is refused: end it
// first (Fail frees its GPUs).
func (e *Engine) Forget(id string) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("forget: unknown job %s", id)
	}
	if !st.State.Terminal() {
		return fmt.Errorf("forget: job %s is %s: end it first", id, st.State)
	}
	e.compact() // drops it from active
	delete(e.jobs, id)
	// The last plan's lookup hints match by ID: a new job of this ID must
	// not be found as the old one.
	clear(e.scratch.last)
	e.scratch.last = e.scratch.last[:0]
	return nil
}
