package engine

// SetMaxLog sets how many round times a lazy log holds before every
// active job is counted up to date, and returns a function restoring it.
func SetMaxLog(n int) (restore func()) {
	old := maxLog
	maxLog = n
	return func() { maxLog = old }
}

// Tombs counts the tombstones in the active list (rounds.go).
func (e *Engine) Tombs() int { return e.tombs }

// Compact drops the jobs that ended since the last compact from the
// active list as a round's start does (rounds.go), without the round.
func (e *Engine) Compact() { e.compact() }
