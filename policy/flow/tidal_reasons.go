package flow

import (
	"bytes"

	"github.com/tide-sched/tide/engine"
)

// tideRound is the memory tidal keeps from round to round so that a round
// in which nothing changed allocates nothing (issue #19 point 1; a steady
// round allocated 321 times at 200 GPUs, most of it reasons): the
// snapshot's jobs indexed by ID, what the round decided of each, and each
// job's reason. A round's steps add to a reason in turn (the deadline
// planner's terms, held or declined, parked, loaned or waiting), so a
// reason is built as bytes in one buffer, each step writing the joined
// text anew at its end, and made a string once, when the plan is
// returned, and then only when it is not the job's last reason as it
// stands (most waiting jobs' text is the same from one round to the
// next). Nothing in it is read across rounds but the index.
type tideRound struct {
	jobs  []*engine.Status // the snapshot's jobs, which at indexes
	ids   []string         // their IDs when indexed
	at    map[string]int   // index in jobs by ID
	slots []tideSlot       // per job of jobs
	stamp int              // this round's: a slot's fields are this round's when its stamp is
	named []int            // the jobs given a reason this round, in that order
	buf   []byte           // the round's texts, slices of it
	out   map[string]engine.Reason
}

// tideSlot is what a round decided of one job and its reason so far.
type tideSlot struct {
	reason, placed, declined, parked int // stamps: it has a reason, is planned, is declined, is parked
	lo, hi                           int // its reason's text: buf[lo:hi]
	r                                engine.Reason
}

// begin starts a round on s's jobs: the index is rebuilt only when the
// jobs are not those of the last round, in the same order.
func (tr *tideRound) begin(s *engine.Snapshot) {
	tr.stamp++
	tr.named, tr.buf = tr.named[:0], tr.buf[:0]
	if tr.at == nil {
		tr.at = map[string]int{}
	}
	same := len(s.Jobs) == len(tr.jobs)
	for i := 0; same && i < len(s.Jobs); i++ {
		same = s.Jobs[i] == tr.jobs[i] && s.Jobs[i].Job.ID == tr.ids[i] // a status written over (tests' snapshots) is not the same
	}
	if same {
		return
	}
	// Emptied key by key, not with clear: clear draws the map a new hash
	// seed, and refilled under it a large map may split its tables again
	// (docs/scale.md, ninth round).
	for id := range tr.at {
		delete(tr.at, id)
	}
	tr.jobs, tr.ids = append(tr.jobs[:0], s.Jobs...), tr.ids[:0]
	for i, st := range tr.jobs {
		tr.at[st.Job.ID] = i
		tr.ids = append(tr.ids, st.Job.ID)
	}
	if len(tr.slots) < len(tr.jobs) {
		tr.slots = append(tr.slots, make([]tideSlot, len(tr.jobs)-len(tr.slots))...)
	}
	for i := range tr.slots {
		tr.slots[i] = tideSlot{} // stamps of another job
	}
}

// index is the job of ID id's index in the round's jobs.
func (tr *tideRound) index(id string) (int, bool) {
	i, ok := tr.at[id]
	return i, ok
}

// has reports whether job i has a reason this round.
func (tr *tideRound) has(i int) bool { return tr.slots[i].reason == tr.stamp }

// text is job i's reason's text so far (nil when it has none).
func (tr *tideRound) text(i int) []byte {
	if !tr.has(i) {
		return nil
	}
	sl := &tr.slots[i]
	return tr.buf[sl.lo:sl.hi]
}

// mark begins a text at the end of the buffer, for set.
func (tr *tideRound) mark() int { return len(tr.buf) }

// set makes the text written since lo (mark) job i's reason, r's figures
// beside it.
func (tr *tideRound) set(i, lo int, r engine.Reason) {
	sl := &tr.slots[i]
	if sl.reason != tr.stamp {
		sl.reason = tr.stamp
		tr.named = append(tr.named, i)
	}
	sl.lo, sl.hi, sl.r = lo, len(tr.buf), r
}

// reason is job i's reason's figures so far (the zero Reason when none).
func (tr *tideRound) reason(i int) engine.Reason {
	if !tr.has(i) {
		return engine.Reason{}
	}
	return tr.slots[i].r
}

// join appends to tr's buffer "; " and b when both what was written
// since lo and b are non-empty, b alone when nothing was: two reason
// texts joined, skipping an empty one. b may be a slice of the buffer
// itself.
func join[T string | []byte](tr *tideRound, lo int, b T) {
	if len(b) == 0 {
		return
	}
	if len(tr.buf) > lo {
		tr.buf = append(tr.buf, "; "...)
	}
	tr.buf = append(tr.buf, b...)
}

// prepend makes job i's reason the text written since lo joined with the
// text it had (dropDeclined first when drop), keeping its figures.
func (tr *tideRound) prepend(i, lo int, drop bool) {
	old := tr.text(i)
	if drop {
		old = dropDeclined(old)
	}
	join(tr, lo, old)
	tr.set(i, lo, tr.reason(i))
}

// prependHeld is prepend for a held job (dropping "declined" too): the
// shared explanation's " (predicted end t=+Inf s)", which live reasons
// write as "predicted end never", is left out. A held job is outside the
// admitted jobs' plan, so the planner has no end for it; "never" would say
// it cannot end, where the head says admission tries it again.
func (tr *tideRound) prependHeld(i, lo int) {
	old := dropDeclined(tr.text(i))
	if k := bytes.Index(old, noEnd); k >= 0 {
		join(tr, lo, old[:k])
		tr.buf = append(tr.buf, old[k+len(noEnd):]...)
	} else {
		join(tr, lo, old)
	}
	tr.set(i, lo, tr.reason(i))
}

// noEnd is how the shared explanation says a job has no predicted end.
var noEnd = []byte(" (predicted end t=+Inf s)")

// dropDeclined takes the shared explanation's leading "declined" off a
// reason text whose own words say what happened to the job.
func dropDeclined(text []byte) []byte {
	if string(text) == "declined" {
		return nil
	}
	if rest, ok := bytes.CutPrefix(text, []byte("declined; ")); ok {
		return rest
	}
	return text
}

// reasons writes the round's reasons into a map of tr's memory (the engine
// keeps no map of a plan after its round), each text a string only when
// it differs from the job's last reason: that reason's own string when
// not.
func (tr *tideRound) reasons() map[string]engine.Reason {
	if tr.out == nil {
		tr.out = map[string]engine.Reason{}
	}
	for id := range tr.out {
		delete(tr.out, id)
	}
	for _, i := range tr.named {
		sl, st := &tr.slots[i], tr.jobs[i]
		r := sl.r
		r.Text = keptText(tr.buf[sl.lo:sl.hi], st)
		tr.out[st.Job.ID] = r
	}
	return tr.out
}

// keptText is text as a string: st's last reason's own string when the
// text has not changed (no allocation).
func keptText(text []byte, st *engine.Status) string {
	if r := st.Reason().Text; string(text) == r {
		return r
	}
	return string(text)
}

// emptyKeys returns *m emptied key by key (see tideRound.begin), made
// when nil.
func emptyKeys[K comparable, V any](m *map[K]V) map[K]V {
	if *m == nil {
		*m = map[K]V{}
	}
	for k := range *m {
		delete(*m, k)
	}
	return *m
}
