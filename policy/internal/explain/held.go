package explain

import (
	"strconv"

	"github.com/tide-sched/tide/engine"
)

// The reasons PlanAppend writes without an order (nil), piece by piece,
// for policies that leave their waiting jobs' reasons to an
// engine.Explainer in every round (engine.ExplainsWhenRead: AlloX,
// Gandiva_fair) and still write those of the jobs they preempt or shrink
// in engine.Plan.Reasons: AppendWaits for a waiting job, AppendHeld for one
// that holds GPUs, PlanFree for the GPUs both state as free.

// AppendHeld appends to buf the reason PlanAppend writes, with no order,
// for job st, which holds GPUs of which the plan gives it g (fewer; 0: the
// plan does not run it): "shrunk 4->2 GPUs" or "preempted", then terms(st)
// and, for a preempted job, the GPUs it needs against the free GPUs the
// plan leaves (PlanFree). Its Reason.Position is 0.
func AppendHeld(buf []byte, st *engine.Status, g int, terms func(b []byte, st *engine.Status) []byte, free Free) []byte {
	buf = appendLoss(buf, st, g, g > 0)
	buf = withTerms(buf, st, terms)
	return standing(buf, st, place{}, false, g == 0, free)
}

// appendLoss appends what a plan does to job st, which holds GPUs: with
// shrunk, "shrunk H->g GPUs" (H the GPUs it holds), else "preempted".
func appendLoss(buf []byte, st *engine.Status, g int, shrunk bool) []byte {
	if !shrunk {
		return append(buf, "preempted"...)
	}
	buf = append(buf, "shrunk "...)
	buf = strconv.AppendInt(buf, int64(len(st.GPUs)), 10)
	buf = append(buf, "->"...)
	buf = strconv.AppendInt(buf, int64(g), 10)
	return append(buf, " GPUs"...)
}
