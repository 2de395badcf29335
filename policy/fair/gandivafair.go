package fair

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// gandivaFairPolicies registers the policies this file defines; Policies calls it.
func gandivaFairPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "gandiva-fair",
		Summary: "Gandiva_fair (EuroSys'20): per-tenant tickets, stride scheduling of each GPU type, and automatic " +
			"trading of fast GPUs to the tenants that gain most from them",
		Knobs: "tickets=T@W/..: tenant tickets (default 1; tenant \"\" is -); trade=true: trade fast-GPU share for " +
			"slow-GPU share between tenants at the mean of their speedups; quantum=60: seconds a running job keeps " +
			"its GPUs before its tenant's turn is re-evaluated",
		Defaults: DefaultGandivaFair,
		Build:    contract.Typed(DefaultGandivaFair, func(_ contract.Context, k GandivaFair) (*GandivaFair, error) { return NewGandivaFair(k) }),
	})
}

// GandivaFair is Gandiva_fair (Chaudhary et al., EuroSys'20) on tide's
// engine.
//
// Each active tenant is entitled to a share of every GPU type in proportion
// to its tickets. With Trade, tenants then swap shares: for each pair of
// types (fast F, slow S, ordered by typesBySpeed) the tenant whose jobs gain
// most from F over S (mean rate ratio) buys F share from the tenant who
// gains least, paying p GPUs of S per GPU of F, p the mean of their two
// ratios, so both come out ahead in throughput; trading goes on while a
// buyer's ratio exceeds a seller's.
//
// Each round, every type is handed out fastest first by stride scheduling:
// the tenant with the least GPU time received on the type relative to its
// entitlement there (GPU-seconds on the type by its active jobs, plus
// Quantum for each GPU planned this round, over entitled GPUs times the
// time since its earliest active job arrived plus Quantum) picks its
// next job, the one of its jobs that has run least; a job is placed once.
// Running jobs inside their quantum keep their GPUs. A tenant entitled to
// none of a type can still use it when nobody entitled wants it.
type GandivaFair struct {
	Tickets contract.Weights `knob:"tickets"`
	Trade   bool             `knob:"trade"`
	Quantum float64          `knob:"quantum"` // seconds, > 0
}

// DefaultGandivaFair holds Gandiva_fair's default knobs.
var DefaultGandivaFair = GandivaFair{Trade: true, Quantum: 60}

// NewGandivaFair builds Gandiva_fair with the knobs k holds, refusing
// values out of range.
func NewGandivaFair(k GandivaFair) (*GandivaFair, error) {
	if !(k.Quantum > 0) {
		return nil, fmt.Errorf("policy gandiva-fair: quantum must be > 0 seconds, got %v", k.Quantum)
	}
	return &k, nil
}

// Name implements engine.Policy.
func (g *GandivaFair) Name() string { return "gandiva-fair" }

// ProgressOnDemand implements engine.ProgressOnDemand: Gandiva_fair reads
// progress only through the model's rates (alloc.Rate, which pulls it:
// Snapshot.Progress): on a cluster of several types every active job's on
// each type every round (the types' order and, with Trade, the tenants'
// speedups, as its rule must: they move with every job's rate); on one
// type none (whether a job can run on the type reads no progress:
// alloc.Runs).
func (g *GandivaFair) ProgressOnDemand() bool { return true }

// Entitlements returns each tenant's entitled GPUs of each type, after
// trading when Trade is set, and the types fastest first.
func (g *GandivaFair) Entitlements(s *engine.Snapshot) (map[string]map[string]float64, []string) {
	tenants, groups := alloc.ByTenant(s.Jobs)
	types := alloc.TypesBySpeed(s, s.Jobs)
	total := 0.0
	for _, u := range tenants {
		total += g.Tickets.Of(u)
	}
	ent := map[string]map[string]float64{}
	for _, u := range tenants {
		ent[u] = map[string]float64{}
		for _, t := range types {
			ent[u][t] = float64(s.Available("", t)) * g.Tickets.Of(u) / total
		}
	}
	if !g.Trade {
		return ent, types
	}
	for i, fast := range types {
		for _, slow := range types[i+1:] {
			ratio := map[string]float64{}
			for _, u := range tenants {
				ratio[u] = alloc.Speedup(s, groups[u], fast, slow)
			}
			order := slices.Clone(tenants)
			slices.SortStableFunc(order, func(a, b string) int { return -cmp.Compare(ratio[a], ratio[b]) })
			for b, sl := 0, len(order)-1; b < sl; {
				buyer, seller := order[b], order[sl]
				if !(ratio[buyer] > ratio[seller]) {
					break
				}
				price := (ratio[buyer] + ratio[seller]) / 2
				x := math.Min(ent[seller][fast], ent[buyer][slow]/price)
				ent[seller][fast] -= x
				ent[buyer][fast] += x
				ent[buyer][slow] -= x * price
				ent[seller][slow] += x * price
				if ent[seller][fast] <= 1e-9 {
					sl--
				} else {
					b++
				}
			}
		}
	}
	return ent, types
}

// Schedule implements engine.Policy.
func (g *GandivaFair) Schedule(s *engine.Snapshot) engine.Plan {
	ent, types := g.Entitlements(s)
	tenants, groups := alloc.ByTenant(s.Jobs)
	// A tenant's entitlement accrues from its earliest active job's
	// submission, so a newcomer is not owed the time before it came.
	span := map[string]float64{}
	for _, u := range tenants {
		first := math.Inf(1)
		for _, st := range groups[u] {
			first = math.Min(first, st.Job.Submit)
		}
		span[u] = math.Max(s.Now-first, 0) + g.Quantum
	}
	planned := map[*engine.Status]bool{}
	var plan engine.Plan
	left := map[string]int{}
	used := map[string]map[string]float64{} // type -> tenant -> GPU-seconds received and planned
	for _, t := range types {
		left[t] = s.Available("", t)
		used[t] = map[string]float64{}
		for _, st := range s.Jobs {
			used[t][st.Job.Tenant] += st.TypeSeconds(t) * float64(st.Job.GPUs)
		}
	}
	add := func(st *engine.Status, t string) {
		planned[st] = true
		left[t] -= st.Job.GPUs
		used[t][st.Job.Tenant] += g.Quantum * float64(st.Job.GPUs)
		a := engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: t}
		if len(types) == 1 {
			a.GPUType = st.Job.GPUType
		}
		plan.Run = append(plan.Run, a)
	}
	// Jobs inside their quantum stay where they are.
	for _, st := range s.Jobs {
		if t := st.Alloc.GPUType; len(st.GPUs) > 0 && s.Now-st.LastStart < g.Quantum && st.Job.GPUs <= left[t] {
			add(st, t)
		}
	}
	// Each tenant's jobs, least run first: a tenant's next job is the first
	// of them still unplanned that fits. What is left of a type only
	// shrinks while it is handed out, so a job skipped once stays skipped
	// for that type and a cursor per tenant walks each list once.
	sorted := map[string][]*engine.Status{}
	for _, u := range tenants {
		sorted[u] = slices.Clone(groups[u])
		slices.SortStableFunc(sorted[u], func(a, b *engine.Status) int { return cmp.Compare(a.Executed, b.Executed) })
	}
	for _, t := range types {
		cursor := map[string]int{}
		next := func(u string) *engine.Status {
			js := sorted[u]
			for cursor[u] < len(js) {
				st := js[cursor[u]]
				if !planned[st] && st.Job.GPUs <= left[t] && (st.Job.GPUType == "" || st.Job.GPUType == t) &&
					alloc.Runs(s, st, st.Job.GPUs, t) {
					return st
				}
				cursor[u]++
			}
			return nil
		}
		for left[t] > 0 {
			bestV := math.Inf(1)
			var pick *engine.Status
			for _, u := range tenants {
				cand := next(u)
				if cand == nil {
					continue
				}
				v := math.Inf(1)
				if e := ent[u][t]; e > 1e-9 {
					v = used[t][u] / (e * span[u])
				}
				if pick == nil || v < bestV {
					bestV, pick = v, cand
				}
			}
			if pick == nil {
				break
			}
			add(pick, t)
		}
	}
	explain.Plan(s, &plan, nil, func(st *engine.Status) string {
		u := st.Job.Tenant
		recv, owed := 0.0, 0.0
		for _, t := range types {
			recv += used[t][u]
			owed += ent[u][t] * span[u]
		}
		return fmt.Sprintf("tenant %q received %.2f of its entitled GPU-h (%.2f); within a tenant the least run job first, run %.0f s", u, recv/3600, owed/3600, st.Executed)
	})
	return plan
}
