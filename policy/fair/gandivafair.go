package fair

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

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
// A type's GPUs are those up (Snapshot.Available: not taken by inference
// or down), and a job is handed a type only when one job could hold its
// GPUs of it (Snapshot.Largest: a job never spans sites).
// Running jobs inside their quantum keep their GPUs. A tenant entitled to
// none of a type can still use it when nobody entitled wants it.
type GandivaFair struct {
	Tickets contract.Weights `knob:"tickets"`
	Trade   bool             `knob:"trade"`
	Quantum float64          `knob:"quantum"` // seconds, > 0

	x gfScratch
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

// gfTenant is a tenant's part of a Gandiva_fair round, by type index (in
// the round's types, fastest first): its entitled GPUs and the GPU-seconds
// it received and is planned; the time its entitlement accrues over; its
// speedup of the pair of types being traded; its jobs least run first,
// and the cursor of the type being handed out.
type gfTenant struct {
	ent, used []float64
	span      float64
	ratio     float64
	sorted    []*engine.Status
	cursor    int
}

// gfScratch is the memory Gandiva_fair keeps from round to round, so that
// a steady round on a cluster of one GPU type allocates nothing but the
// reasons whose text changed (issue 19): the tenants, the types in order,
// the GPUs left of each, the jobs planned, the model's shapes, the last
// plan's Run (the engine keeps none of a plan's slices) and the reasons'
// memory.
type gfScratch struct {
	tenants tenantGroups[gfTenant]
	order   []*tenantGroup[gfTenant]
	types   []string
	left    []int
	largest []int
	planned map[*engine.Status]bool
	shapes  packedShapes
	run     []engine.Assignment
	explain explain.Scratch
	terms   func(b []byte, st *engine.Status) []byte
	// waits works the waiting jobs' reasons out when read (waits.go);
	// figs is GandivaFair.figsOf, made once.
	waits waitReasons
	figs  func(st *engine.Status) waitFigs
}

// Entitlements returns each tenant's entitled GPUs of each type, after
// trading when Trade is set, and the types fastest first.
func (g *GandivaFair) Entitlements(s *engine.Snapshot) (map[string]map[string]float64, []string) {
	tenants, types := g.entitle(s)
	ent := map[string]map[string]float64{}
	for _, u := range tenants {
		ent[u.name] = map[string]float64{}
		for ti, t := range types {
			ent[u.name][t] = u.v.ent[ti]
		}
	}
	return ent, slices.Clone(types)
}

// entitle works out each tenant's entitled GPUs of each type, after
// trading when Trade is set, in g's memory: the round's tenants (by name)
// and the types fastest first, valid until the next call.
func (g *GandivaFair) entitle(s *engine.Snapshot) ([]*tenantGroup[gfTenant], []string) {
	x := &g.x
	tenants := x.tenants.Group(s.Jobs)
	if cl := s.Cluster.GPUTypes(); len(cl) < 2 {
		x.types = append(x.types[:0], cl...) // nothing to order (alloc.TypesBySpeed reads no rate)
	} else {
		x.types = append(x.types[:0], alloc.TypesBySpeed(s, s.Jobs)...)
	}
	types := x.types
	total := 0.0
	for _, u := range tenants {
		total += g.Tickets.Of(u.name)
	}
	for _, u := range tenants {
		u.v.ent = slices.Grow(u.v.ent[:0], len(types))[:len(types)]
		for ti, t := range types {
			u.v.ent[ti] = float64(s.Available("", t)) * g.Tickets.Of(u.name) / total
		}
	}
	if !g.Trade {
		return tenants, types
	}
	for fi, fast := range types {
		for si := fi + 1; si < len(types); si++ {
			slow := types[si]
			for _, u := range tenants {
				u.v.ratio = alloc.Speedup(s, u.jobs, fast, slow)
			}
			order := append(x.order[:0], tenants...)
			x.order = order
			slices.SortStableFunc(order, func(a, b *tenantGroup[gfTenant]) int { return -cmp.Compare(a.v.ratio, b.v.ratio) })
			for b, sl := 0, len(order)-1; b < sl; {
				buyer, seller := &order[b].v, &order[sl].v
				if !(buyer.ratio > seller.ratio) {
					break
				}
				price := (buyer.ratio + seller.ratio) / 2
				q := math.Min(seller.ent[fi], buyer.ent[si]/price)
				seller.ent[fi] -= q
				buyer.ent[fi] += q
				buyer.ent[si] -= q * price
				seller.ent[si] += q * price
				if seller.ent[fi] <= 1e-9 {
					sl--
				} else {
					b++
				}
			}
		}
	}
	clear(x.order)
	return tenants, types
}

// Schedule implements engine.Policy.
func (g *GandivaFair) Schedule(s *engine.Snapshot) engine.Plan {
	x := &g.x
	x.waits.Next(s.Round)
	tenants, types := g.entitle(s)
	// A tenant's entitlement accrues from its earliest active job's
	// submission, so a newcomer is not owed the time before it came.
	for _, u := range tenants {
		first := math.Inf(1)
		for _, st := range u.jobs {
			first = math.Min(first, st.Job.Submit)
		}
		u.v.span = math.Max(s.Now-first, 0) + g.Quantum
	}
	if x.planned == nil {
		x.planned = map[*engine.Status]bool{}
	}
	planned := x.planned
	empty(planned)
	plan := engine.Plan{Run: x.run[:0]}
	left := slices.Grow(x.left[:0], len(types))[:len(types)]
	x.left = left
	largest := slices.Grow(x.largest[:0], len(types))[:len(types)]
	x.largest = largest
	// A job never spans sites, so on a multi-site cluster a type holds a
	// job only if one site (or edge server) has its GPUs up: counting the
	// type over every site planned a job of 4 on 3 a100 of a cloud plus 2
	// of an inference site, which the placer cannot honour, and the job,
	// planned on that type and so on no other, waited for ever beside idle
	// GPUs of a type that could hold it. alloc.Pool counts the same way.
	// On one site the cap is what is left, so such runs are unchanged.
	multiSite := len(s.Cluster.Sites()) > 1
	// GPU-seconds received and planned, by type and tenant.
	for _, u := range tenants {
		u.v.used = slices.Grow(u.v.used[:0], len(types))[:len(types)]
		clear(u.v.used)
	}
	for ti, t := range types {
		left[ti] = s.Available("", t)
		largest[ti] = left[ti]
		if multiSite {
			largest[ti] = s.Largest(t)
		}
		for _, u := range tenants {
			for _, st := range u.jobs {
				u.v.used[ti] += st.TypeSeconds(t) * float64(st.Job.GPUs)
			}
		}
	}
	add := func(st *engine.Status, ti int) {
		planned[st] = true
		left[ti] -= st.Job.GPUs
		x.tenants.Of(st.Job.Tenant).v.used[ti] += g.Quantum * float64(st.Job.GPUs)
		a := engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: types[ti]}
		if len(types) == 1 {
			a.GPUType = st.Job.GPUType
		}
		plan.Run = append(plan.Run, a)
		x.waits.Give(st, a.GPUs)
	}
	// Jobs inside their quantum stay where they are.
	for _, st := range s.Jobs {
		if len(st.GPUs) == 0 || !(s.Now-st.LastStart < g.Quantum) {
			continue
		}
		if ti := slices.Index(types, st.Alloc.GPUType); ti >= 0 && st.Job.GPUs <= left[ti] {
			add(st, ti)
		}
	}
	// Each tenant's jobs, least run first: a tenant's next job is the first
	// of them still unplanned that fits. What is left of a type only
	// shrinks while it is handed out (and largest stays), so a job skipped
	// once stays skipped for that type and a cursor per tenant walks each
	// list once.
	for _, u := range tenants {
		clear(u.v.sorted) // the last round's statuses
		u.v.sorted = append(u.v.sorted[:0], u.jobs...)
		slices.SortStableFunc(u.v.sorted, func(a, b *engine.Status) int { return cmp.Compare(a.Executed, b.Executed) })
	}
	for ti, t := range types {
		for _, u := range tenants {
			u.v.cursor = 0
		}
		// A job asking for part of each GPU runs only on a type whose
		// GPUs have the memory for its part (alloc.PartFits), as the
		// engine places it: given T4s (16 GiB) for a 20 GiB part, it was
		// never placed and waited for ever beside the GPUs that could
		// hold it. mem is t's GPU memory, once such a job is met.
		mem := -1.0
		partFits := func(st *engine.Status) bool {
			if !st.Job.Fractional() {
				return true
			}
			if mem < 0 {
				mem = alloc.TypeMem(s.Cluster, t)
			}
			return alloc.PartFits(st.Job, mem)
		}
		next := func(u *gfTenant) *engine.Status {
			js := u.sorted
			for u.cursor < len(js) {
				st := js[u.cursor]
				if !planned[st] && st.Job.GPUs <= left[ti] && st.Job.GPUs <= largest[ti] && (st.Job.GPUType == "" || st.Job.GPUType == t) &&
					partFits(st) && g.runs(s, st, t) {
					return st
				}
				u.cursor++
			}
			return nil
		}
		for left[ti] > 0 {
			bestV := math.Inf(1)
			var pick *engine.Status
			for _, u := range tenants {
				cand := next(&u.v)
				if cand == nil {
					continue
				}
				v := math.Inf(1)
				if e := u.v.ent[ti]; e > 1e-9 {
					v = u.v.used[ti] / (e * u.v.span)
				}
				if pick == nil || v < bestV {
					bestV, pick = v, cand
				}
			}
			if pick == nil {
				break
			}
			add(pick, ti)
		}
	}
	if x.terms == nil { // made once: a closure made every round is allocated every round
		x.terms, x.figs, x.waits.terms = g.appendTerms, g.figsOf, gandivaFairTerms
	}
	if explain.Lazy(s) {
		// The waiting jobs' reasons are worked out when read.
		x.waits.Record(s, &plan, x.figs, x.terms)
	} else {
		x.explain.PlanAppend(s, &plan, nil, x.terms)
	}
	x.run = plan.Run
	empty(planned) // the statuses are the engine's
	return plan
}

// runs is alloc.Runs with the shapes kept: whether st can run on its GPU
// count of type t.
func (g *GandivaFair) runs(s *engine.Snapshot, st *engine.Status, t string) bool {
	r, _ := s.Model.Rate(st.Job, g.x.shapes.packed(t, st.Job.GPUs, s.GPUsPerNode[t]), 0)
	return r > 0
}

// appendTerms appends a waiting job's standing to b: "tenant "a" received
// 1.50 of its entitled GPU-h (2.00); within a tenant the least run job
// first, run 120 s", its tenant's figures as this round left them.
func (g *GandivaFair) appendTerms(b []byte, st *engine.Status) []byte {
	return gandivaFairTerms(b, st, g.figsOf(st))
}

// figsOf is what appendTerms states of st as this round left its tenant:
// the GPU-seconds the tenant received and is planned, those it is
// entitled to, and st's seconds run.
func (g *GandivaFair) figsOf(st *engine.Status) waitFigs {
	recv, owed := 0.0, 0.0
	if t := g.x.tenants.Of(st.Job.Tenant); t != nil {
		for ti := range g.x.types {
			recv += t.v.used[ti]
			owed += t.v.ent[ti] * t.v.span
		}
	}
	return waitFigs{recv, owed, st.Executed}
}

// gandivaFairTerms is appendTerms from the figures figsOf gave (the text a
// reason worked out when read states: waitReasons).
func gandivaFairTerms(b []byte, st *engine.Status, f waitFigs) []byte {
	b = append(b, "tenant "...)
	b = strconv.AppendQuote(b, st.Job.Tenant)
	b = append(b, " received "...)
	b = strconv.AppendFloat(b, f[0]/3600, 'f', 2, 64)
	b = append(b, " of its entitled GPU-h ("...)
	b = strconv.AppendFloat(b, f[1]/3600, 'f', 2, 64)
	b = append(b, "); within a tenant the least run job first, run "...)
	b = strconv.AppendFloat(b, f[2], 'f', 0, 64)
	return append(b, " s"...)
}

// ExplainsWhenRead implements engine.ExplainsWhenRead: the reasons of the
// jobs a round leaves waiting are worked out when read (waitReasons), in
// every round; behind a wrapper every reason is written.
func (g *GandivaFair) ExplainsWhenRead() bool { return true }
