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
// BorrowLimits caps the GPUs a tenant may borrow beyond its quota (absent:
// no cap). With Weights, borrowed GPUs are lent tenant by tenant, the
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

// Schedule implements engine.Policy.
func (q *Quota) Schedule(s *engine.Snapshot) engine.Plan {
	inner := q.Inner.Schedule(s)
	order := make([]engine.Assignment, 0, len(s.Jobs))
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	planned := map[string]bool{}
	for _, a := range inner.Run {
		if byID[a.Job] != nil {
			order = append(order, a)
			planned[a.Job] = true
		}
	}
	for _, st := range s.Jobs {
		if !planned[st.Job.ID] {
			n := st.Job.GPUs
			if len(st.GPUs) > 0 {
				n = len(st.GPUs)
			}
			order = append(order, engine.Assignment{Job: st.Job.ID, GPUs: n, GPUType: st.Job.GPUType})
		}
	}
	free := map[string]int{}
	for _, t := range s.Cluster.GPUTypes() {
		free[t] = s.Cluster.GPUsOfType(t)
	}
	// fits takes a's GPUs from its type's pool, or from the pool with the
	// most left when it names none.
	fits := func(a *engine.Assignment) bool {
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
		if free[t] < a.GPUs {
			return false
		}
		free[t] -= a.GPUs
		return true
	}
	used := map[string]int{}
	var plan engine.Plan
	plan.Memo = inner.Memo
	admitted := make([]bool, len(order))
	for i := range order {
		a := &order[i]
		ten := byID[a.Job].Job.Tenant
		if used[ten]+a.GPUs <= q.Limits[ten] && fits(a) {
			used[ten] += a.GPUs
			admitted[i] = true
			plan.Run = append(plan.Run, *a)
		}
	}
	if q.Borrow {
		plan.Run = append(plan.Run, q.lend(order, admitted, byID, fits)...)
	}
	return plan
}

// lend hands the GPUs left to the jobs not admitted within quota: in the
// plan's order, or tenant by tenant by weight (Weights), each tenant up to
// its BorrowLimits. A job that does not fit when its turn comes is passed
// over for good: free GPUs only shrink as lending goes on.
func (q *Quota) lend(order []engine.Assignment, admitted []bool, byID map[string]*engine.Status, fits func(*engine.Assignment) bool) []engine.Assignment {
	borrowed := map[string]int{}
	capped := func(ten string, n int) bool {
		lim, ok := q.BorrowLimits[ten]
		return ok && borrowed[ten]+n > lim
	}
	var out []engine.Assignment
	if q.Weights == nil {
		for i := range order {
			ten := byID[order[i].Job].Job.Tenant
			if !admitted[i] && !capped(ten, order[i].GPUs) && fits(&order[i]) {
				borrowed[ten] += order[i].GPUs
				out = append(out, order[i])
			}
		}
		return out
	}
	queue := map[string][]int{} // tenant -> its waiting jobs, in order
	var tenants []string
	for i := range order {
		if admitted[i] {
			continue
		}
		ten := byID[order[i].Job].Job.Tenant
		if queue[ten] == nil {
			tenants = append(tenants, ten)
		}
		queue[ten] = append(queue[ten], i)
	}
	weight := func(ten string) float64 {
		if w, ok := q.Weights[ten]; ok && w > 0 {
			return float64(w)
		}
		return 1
	}
	for {
		b := -1
		for k, ten := range tenants { // first-come order breaks ties
			if len(queue[ten]) > 0 && (b < 0 || float64(borrowed[ten])/weight(ten) < float64(borrowed[tenants[b]])/weight(tenants[b])) {
				b = k
			}
		}
		if b < 0 {
			return out
		}
		best := tenants[b]
		i := queue[best][0]
		queue[best] = queue[best][1:]
		if !capped(best, order[i].GPUs) && fits(&order[i]) {
			borrowed[best] += order[i].GPUs
			out = append(out, order[i])
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
