package classic

import (
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/kept"
)

// 2D-Gittins' order, from the last round's (issue 19).
//
// 2D-Gittins orders each queue by Gittins index, which moves with a
// running job's attained service, so every round is planned in full and
// its queues were sorted afresh each round (the snapshot's order is by
// submission, far from the index's). But a waiting job's service stands
// still, and so does its index; the running jobs' indexes move a little
// from one round to the next. So each round now starts from the last
// round's order: the jobs still in the queue they were in, in that order,
// which an insertion pass puts back in order (a full sort when too much
// moved); the jobs that changed queue or arrived, sorted apart, are merged
// in (kept.Sort). The order is compareIn's, total (IDs are unique), so the result is
// the one sorting every queue gives (TestGittinsKeptOrder). And a job's
// index is computed again only when its service or its quantum changed
// (gittinsIndex): Index is a pure function of the two.

// gittinsMemo is a job's last Gittins index, by slot, with what it was
// computed from.
type gittinsMemo struct {
	ok             bool
	service, d, ix float64
}

// gittinsIndex is t.Gittins.Index(service, d) for job st, computed again
// only when service or d differ from st's slot's last.
func (t *Tiresias) gittinsIndex(st *engine.Status, service, d float64) float64 {
	if st.Slot < 0 {
		return t.Gittins.Index(service, d)
	}
	if st.Slot >= len(t.ixMemo) {
		t.ixMemo = slices.Grow(t.ixMemo, st.Slot+1-len(t.ixMemo))[:st.Slot+1]
	}
	m := &t.ixMemo[st.Slot]
	if !m.ok || m.service != service || m.d != d {
		*m = gittinsMemo{ok: true, service: service, d: d, ix: t.Gittins.Index(service, d)}
	}
	return m.ix
}

// sortGittins is sort, built from the last round's order (t.prev): jobs
// are the snapshot's jobs, in entries' order.
func (t *Tiresias) sortGittins(entries []tiresiasEntry, jobs []*engine.Status) []tiresiasEntry {
	// The jobs of the last order still active and in the same queue, in
	// that order, with this round's indexes, then the others.
	nq, next, mid, queued, ok := t.layKept(entries, jobs, false)
	if !ok {
		return t.sort(entries)
	}
	from := 0
	for q := range nq {
		t.merge = kept.Sort(queued[from:next[q]], mid[q]-from, t.inQueue, t.merge)
		from = next[q]
	}
	return queued
}
