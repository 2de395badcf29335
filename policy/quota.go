package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/engine"
)

// Quota wraps a policy with per-tenant GPU quotas (Job.Tenant; "" is a
// tenant too). A tenant's jobs always get up to its quota when they ask:
// that is its guaranteed share. With Borrow, GPUs no tenant claims under its
// quota go to jobs over their tenant's quota (borrowing idle capacity), and
// come back by preemption when the owner's jobs need them: a borrowed job is
// planned only after every job within quota. Tenants without a quota have
// none guaranteed and can only borrow.
//
// The wrapped policy sets the order: the jobs it plans in its plan's order,
// with its GPU counts and types, then the jobs it left out, in submission
// order, on their requested counts. Each pass walks that order and admits a
// job when its GPUs fit (per GPU type, counted as the greedy policies do);
// like FIFO with backfill, a job that does not fit does not block the jobs
// behind it.
//
// A job larger than what is left of its tenant's quota is a borrower: it
// takes what is left and borrows the rest. BorrowLimits caps the GPUs a
// tenant may borrow beyond its quota (absent: no cap), so a tenant holds
// at most its quota and its borrow limit: a job of 6 GPUs on a quota of 4
// and a limit of 4 runs (4 and 2 borrowed). With Weights, borrowed GPUs
// are lent tenant by tenant, the
// tenant with the fewest borrowed GPUs per unit of weight first (absent
// weights count 1), instead of in the plan's order alone.
type Quota struct {
	Inner        engine.Policy
	Limits       map[string]int // GPUs guaranteed per tenant
	Borrow       bool
	BorrowLimits map[string]int // most GPUs borrowed per tenant; nil: no cap
	Weights      map[string]int // lending weights per tenant; nil: the plan's order
}

// Name implements engine.Policy.
func (q *Quota) Name() string {
	b := "no-borrow"
	if q.Borrow {
		b = "borrow"
	}
	return fmt.Sprintf("%s+quota(%s,%s)", q.Inner.Name(), FormatQuotas(q.Limits), b)
}

// Unwrap implements engine.Wrapper.
func (q *Quota) Unwrap() engine.Policy { return q.Inner }

// quotaUnit is what Quota admits at once: one job, or a packed pair (both
// members on the same GPUs, counted once against capacity and in full
// against each member's tenant).
type quotaUnit struct {
	as []engine.Assignment
}

// Schedule implements engine.Policy. It forwards the inner plan's declines,
// memos, warnings and reasons; a pair the inner plan packs is admitted
// whole or not at all (then each member is tried alone, unpacked). A job
// the quota holds back gets a reason naming its tenant's use against its
// quota, replacing the inner one.
func (q *Quota) Schedule(s *engine.Snapshot) engine.Plan {
	inner := q.Inner.Schedule(s)
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	declined := make(map[string]bool, len(inner.Decline))
	for _, id := range inner.Decline {
		declined[id] = true
	}
	innerRan := map[string]*engine.Assignment{}
	for i := range inner.Run {
		innerRan[inner.Run[i].Job] = &inner.Run[i]
	}
	// The order: the inner plan's, pairs kept together, then the jobs it
	// left out (declines excepted) on their requested counts.
	var order []quotaUnit
	seen := map[string]bool{}
	for _, a := range inner.Run {
		if byID[a.Job] == nil || seen[a.Job] {
			continue
		}
		seen[a.Job] = true
		u := quotaUnit{as: []engine.Assignment{a}}
		if b := innerRan[a.PackWith]; a.PackWith != "" && b != nil && b.PackWith == a.Job && !seen[b.Job] {
			seen[b.Job] = true
			u.as = append(u.as, *b)
		} else {
			u.as[0].PackWith = ""
		}
		order = append(order, u)
	}
	for _, st := range s.Jobs {
		if !seen[st.Job.ID] && !declined[st.Job.ID] {
			n := st.Job.GPUs
			if len(st.GPUs) > 0 {
				n = len(st.GPUs)
			}
			order = append(order, quotaUnit{as: []engine.Assignment{{Job: st.Job.ID, GPUs: n, GPUType: st.Job.GPUType}}})
		}
	}
	free := map[string]int{}
	for _, t := range s.Cluster.GPUTypes() {
		free[t] = s.Cluster.GPUsOfType(t)
	}
	// typeFor is the pool a's GPUs come from: its own type, or the one it
	// runs on now if that has room, else the pool with the most left.
	typeFor := func(a *engine.Assignment) string {
		t := a.GPUType
		if t == "" {
			if cur := byID[a.Job].Alloc.GPUType; cur != "" && free[cur] >= a.GPUs {
				t = cur
			} else {
				for _, c := range s.Cluster.GPUTypes() {
					if t == "" || free[c] > free[t] {
						t = c
					}
				}
			}
		}
		return t
	}
	used := map[string]int{}     // GPUs of each tenant's guarantee admitted
	borrowed := map[string]int{} // GPUs each tenant borrows beyond it
	// need is what u asks of each member's tenant.
	need := func(u quotaUnit) map[string]int {
		n := make(map[string]int, len(u.as))
		for _, a := range u.as {
			n[byID[a.Job].Job.Tenant] += a.GPUs
		}
		return n
	}
	// guarLeft is the GPUs of ten's guarantee not admitted yet.
	guarLeft := func(ten string) int { return max(0, q.Limits[ten]-used[ten]) }
	var plan engine.Plan
	// admit runs u when its GPUs fit: within its tenants' guarantees
	// (quota), or with borrowing, taking what is left of each guarantee
	// and borrowing the rest within the tenant's borrow limit (a job of 6
	// GPUs on a guarantee of 4 and a borrow limit of 4 runs: 4
	// guaranteed, 2 borrowed, as a TideQueue's status counts them).
	admit := func(u quotaUnit, quota bool) bool {
		for ten, n := range need(u) {
			over := n - guarLeft(ten)
			if quota && over > 0 {
				return false
			}
			if lim, ok := q.BorrowLimits[ten]; ok && over > 0 && borrowed[ten]+over > lim {
				return false
			}
		}
		t := typeFor(&u.as[0])
		if free[t] < u.as[0].GPUs {
			return false
		}
		free[t] -= u.as[0].GPUs
		for _, a := range u.as {
			ten := byID[a.Job].Job.Tenant
			g := min(a.GPUs, guarLeft(ten))
			used[ten] += g
			borrowed[ten] += a.GPUs - g
			plan.Run = append(plan.Run, a)
		}
		return true
	}
	var left []quotaUnit
	for _, u := range order {
		if !admit(u, true) {
			left = append(left, u)
		}
	}
	if q.Borrow {
		left = q.byWeight(left, byID, borrowed)
		rest := left[:0]
		for _, u := range left {
			if !admit(u, false) {
				rest = append(rest, u)
			}
		}
		left = rest
	}
	// A pair left out whole: its members may still fit alone. An elastic
	// job left out may run on fewer GPUs, down to its minimum, within its
	// tenant's quota (and borrow limit) and the GPUs left: planned on
	// more than those let it hold, it waited for ever though its minimum
	// fit.
	for _, u := range left {
		if len(u.as) < 2 {
			a, st := u.as[0], byID[u.as[0].Job]
			if a.GPUs <= st.Job.MinGPUs {
				continue
			}
			// The most it could get: what its tenant may still hold, and
			// the GPUs left of the most free type; then fewer until one
			// count is admitted (its type depends on its count).
			ten, most := st.Job.Tenant, 0
			for _, n := range free {
				most = max(most, n)
			}
			most = min(most, a.GPUs-1)
			if lim, ok := q.BorrowLimits[ten]; !q.Borrow || ok {
				if !q.Borrow {
					lim = 0
				}
				most = min(most, guarLeft(ten)+max(0, lim-borrowed[ten]))
			}
			for a.Nodes = nil; most >= st.Job.MinGPUs; most-- { // a shape was the planned count's
				if a.GPUs = most; admit(quotaUnit{as: []engine.Assignment{a}}, !q.Borrow) {
					break
				}
			}
			continue
		}
		for _, a := range u.as {
			a.PackWith = ""
			if !admit(quotaUnit{as: []engine.Assignment{a}}, true) && q.Borrow {
				admit(quotaUnit{as: []engine.Assignment{a}}, false)
			}
		}
	}
	plan.Decline = inner.Decline
	plan.Memo = inner.Memo
	plan.Warnings = inner.Warnings
	q.explain(s, &plan, inner, order, used, free)
	return plan
}

// explain fills plan.Reasons: the inner reasons of jobs the quota leaves
// as the inner plan did (waiting, or running as planned), and its own for
// jobs it holds back. Positions are in the quota's queue: the jobs it holds
// back, in its order.
func (q *Quota) explain(s *engine.Snapshot, plan *engine.Plan, inner engine.Plan, order []quotaUnit, used, free map[string]int) {
	ran := make(map[string]bool, len(plan.Run))
	for _, a := range plan.Run {
		ran[a.Job] = true
	}
	innerRan := make(map[string]bool, len(inner.Run))
	for _, a := range inner.Run {
		innerRan[a.Job] = true
	}
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	plan.Reasons = make(map[string]engine.Reason, len(inner.Reasons))
	for id, r := range inner.Reasons {
		if ran[id] == innerRan[id] {
			plan.Reasons[id] = r
		}
	}
	idle := 0
	for _, n := range free {
		idle += n
	}
	// The inner reasons count free GPUs and jobs ahead in the inner plan.
	// When the quota ran other jobs than that plan did, those counts no
	// longer describe the cluster, so they are said to be the policy's
	// and the free GPUs after quotas follow.
	changed := len(plan.Run) != len(inner.Run)
	for id := range innerRan {
		changed = changed || !ran[id]
	}
	pos := 0
	for _, u := range order {
		for _, a := range u.as {
			if ran[a.Job] {
				continue
			}
			pos++
			ten := byID[a.Job].Job.Tenant
			text := fmt.Sprintf("tenant %q uses %d of its quota of %d GPUs, needs %d more", ten, used[ten], q.Limits[ten], a.GPUs)
			switch {
			case used[ten]+a.GPUs <= q.Limits[ten]:
				text = fmt.Sprintf("tenant %q within quota (%d of %d GPUs) but %d GPUs free, needs %d", ten, used[ten], q.Limits[ten], idle, a.GPUs)
			case q.Borrow:
				text += fmt.Sprintf("; %d GPUs idle to borrow", idle)
			default:
				text += fmt.Sprintf("; borrowing is off; %d GPUs free", idle)
			}
			if r, ok := inner.Reasons[a.Job]; ok && !innerRan[a.Job] && r.Text != "" {
				if changed {
					text = "in the policy's plan: " + r.Text + "; after quotas: " + text
				} else {
					text = r.Text + "; " + text
				}
			}
			plan.Reasons[a.Job] = engine.Reason{Text: text, Position: pos}
		}
	}
}

// ParseQuotas reads "tenant=GPUs,tenant=GPUs" (spaces allowed around
// items).
func ParseQuotas(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, n, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("quota %q: want TENANT=GPUS", item)
		}
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("quota %q: GPUs: want a whole number >= 0, got %q", item, n)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("quota %q: tenant %s given twice", item, name)
		}
		out[name] = v
	}
	return out, nil
}

// FormatQuotas writes quotas as ParseQuotas reads them, sorted by tenant.
func FormatQuotas(q map[string]int) string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, q[n])
	}
	return strings.Join(parts, ",")
}

// byWeight orders the units waiting to borrow with Weights: round by
// round, the next unit of the tenant with the fewest GPUs lent per unit of
// weight so far, counting each unit as lent (ties: the tenant that came
// first). Without Weights the order stays.
func (q *Quota) byWeight(left []quotaUnit, byID map[string]*engine.Status, borrowed map[string]int) []quotaUnit {
	if q.Weights == nil || len(left) == 0 {
		return left
	}
	queue := map[string][]quotaUnit{}
	var tenants []string
	for _, u := range left {
		ten := byID[u.as[0].Job].Job.Tenant
		if queue[ten] == nil {
			tenants = append(tenants, ten)
		}
		queue[ten] = append(queue[ten], u)
	}
	weight := func(ten string) float64 {
		if w, ok := q.Weights[ten]; ok && w > 0 {
			return float64(w)
		}
		return 1
	}
	lent := map[string]int{}
	for t, n := range borrowed {
		lent[t] = n
	}
	out := make([]quotaUnit, 0, len(left))
	for len(out) < len(left) {
		b := -1
		for k, ten := range tenants {
			if len(queue[ten]) > 0 && (b < 0 || float64(lent[ten])/weight(ten) < float64(lent[tenants[b]])/weight(tenants[b])) {
				b = k
			}
		}
		ten := tenants[b]
		u := queue[ten][0]
		queue[ten] = queue[ten][1:]
		lent[ten] += u.as[0].GPUs
		out = append(out, u)
	}
	return out
}
