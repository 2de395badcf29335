package fair

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/kept"
)

// alloxPolicies registers the policies this file defines; Policies calls it.
func alloxPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "allox",
		Summary: "AlloX (EuroSys'20): waiting jobs matched to GPU types and queue positions by min-cost " +
			"bipartite matching on estimated completion times; non-preemptive",
		Knobs: "alpha=1: fairness knob: the waiting jobs of the ceil(alpha x tenants) tenants with the least " +
			"attained GPU-seconds are matched first, the others get what is left (1: everyone together); " +
			"window=256: at most this many waiting jobs, earliest submitted first, enter each matching (it costs " +
			"about window^3)",
		Defaults: DefaultAlloX,
		Build:    contract.Typed(DefaultAlloX, func(_ contract.Context, k AlloX) (*AlloX, error) { return NewAlloX(k) }),
	})
}

// AlloX is AlloX (Le et al., EuroSys'20) with GPU types as its device
// types. Minimising the sum of completion times on unrelated machines is a
// matching (Bruno, Coffman and Sethi): a job j placed k-th from the end of
// a machine m's queue adds k x p(j, m) to the total, p its processing time
// there. Here a type t of N_t GPUs up offers N_t machines at each
// position k; p(j, t) is j's remaining time on its GPU count of type t
// (times its GPU count, so a gang weighs as the machines it blocks); the
// min-cost matching of waiting jobs to (type, position) slots is found
// exactly by successive shortest paths. A job is matched only to a type
// one site (or edge server) has its GPUs of up, since a job never spans
// sites (Match). Each round, running jobs keep their GPUs (AlloX does not
// preempt); on each type the matched jobs start from the last position
// back (the largest k runs first) while the type has room.
//
// Fairness: the waiting jobs of the ceil(Alpha x tenants) tenants with the
// least attained GPU-seconds (their active jobs') are matched and started
// first; the rest are matched on what remains. A matching takes at most
// Window waiting jobs, the earliest submitted (our bound on its cost).
type AlloX struct {
	Alpha float64 `knob:"alpha"` // in (0, 1]
	// Window caps the waiting jobs in one matching (earliest submitted
	// first); 0 means no cap. The others wait for a later round.
	Window int `knob:"window"`
	// cache holds the last matchings by their inputs (the waiting jobs and
	// their progress): the matching only changes when they do, and most
	// rounds see the same queue.
	cache map[string]map[string]alloxSlot

	// Scratch reused from round to round: the cache key's bytes, a
	// matching's slots by status, the reasons' memory, and this round's
	// figures, for appendTerms.
	key     []byte
	slot    map[*engine.Status]alloxSlot
	explain explain.Scratch
	terms   func(b []byte, st *engine.Status) []byte
	// The round's pool, tenants (each with its attained GPU-seconds and
	// its rank by them, for appendTerms), tenants by attainment, waiting
	// jobs and the last plan's Run (the engine keeps none of a plan's
	// slices): kept so that a steady round allocates nothing but the
	// reasons whose text changed (issue 19).
	pool    alloc.Pool
	tenants tenantGroups[alloxTenant]
	ranked  []*tenantGroup[alloxTenant]
	waiting []*engine.Status
	// byAge is each part's (the least served tenants, the rest) waiting
	// jobs by submission when more than Window wait, from the last such
	// round's order (kept.Order: a job's key never changes, so the order
	// is repaired, not sorted afresh); early is the memory it fills.
	byAge [2]kept.Order[*engine.Status]
	early []*engine.Status
	run   []engine.Assignment
	first int
	// waits works the waiting jobs' reasons out when read (waits.go);
	// figs is x.figs, made once.
	waits waitReasons
	figs  func(st *engine.Status) waitFigs
}

// alloxTenant is a tenant's part of a round: its active jobs' attained
// GPU-seconds and its rank by them (0 the least).
type alloxTenant struct {
	attained float64
	rank     int
}

// DefaultAlloX holds AlloX's default knobs.
var DefaultAlloX = AlloX{Alpha: 1, Window: 256}

// NewAlloX builds AlloX with the knobs k holds, refusing values out of
// range (a spec's window is at least 1; 0, no cap, is for callers).
func NewAlloX(k AlloX) (*AlloX, error) {
	if !(k.Alpha > 0) || k.Alpha > 1 {
		return nil, fmt.Errorf("policy allox: alpha must be in (0, 1], got %v", k.Alpha)
	}
	if k.Window < 1 {
		return nil, fmt.Errorf("policy allox: window must be a whole number >= 1, got %v", k.Window)
	}
	return &AlloX{Alpha: k.Alpha, Window: k.Window}, nil
}

// Name implements engine.Policy.
func (x *AlloX) Name() string { return "allox" }

// Schedule implements engine.Policy.
func (x *AlloX) Schedule(s *engine.Snapshot) engine.Plan {
	x.waits.Next(s.Round)
	free := &x.pool
	free.Reset(s)
	plan := engine.Plan{Run: x.run[:0]}
	groups := x.tenants.Group(s.Jobs)
	for _, g := range groups {
		g.v.attained = 0
		for _, st := range g.jobs {
			g.v.attained += st.Attained
			if len(st.GPUs) > 0 {
				if a, ok := free.Take(st, len(st.GPUs)); ok {
					plan.Run = append(plan.Run, a)
					x.waits.Give(st, a.GPUs)
				}
			}
		}
	}
	tenants := append(x.ranked[:0], groups...) // by name
	slices.SortStableFunc(tenants, func(a, b *tenantGroup[alloxTenant]) int { return cmp.Compare(a.v.attained, b.v.attained) })
	for i, g := range tenants {
		g.v.rank = i
	}
	x.ranked = tenants
	first := int(math.Ceil(x.Alpha * float64(len(tenants))))
	for pi := 0; pi < 2; pi++ {
		part := tenants[:first]
		if pi == 1 {
			part = tenants[first:]
		}
		if free.Room() == 0 {
			break // nothing to start: skip the matching
		}
		waiting := x.waiting[:0]
		for _, g := range part {
			for _, st := range g.jobs {
				if len(st.GPUs) == 0 {
					waiting = append(waiting, st)
				}
			}
		}
		x.waiting = waiting
		if x.Window > 0 && len(waiting) > x.Window {
			// The earliest submitted (alloc.SortJobs' order, a total one:
			// IDs are unique).
			x.early = x.byAge[pi].Sort(x.early, waiting, waiting, bySubmission, func(st *engine.Status) *engine.Status { return st })
			waiting = x.early[:x.Window]
		}
		slot := x.cached(s, waiting)
		// Per type, the largest position first; ties by shorter time.
		slices.SortStableFunc(waiting, func(a, b *engine.Status) int {
			if c := -cmp.Compare(slot[a].k, slot[b].k); c != 0 {
				return c
			}
			return cmp.Compare(slot[a].p, slot[b].p)
		})
		for _, st := range waiting {
			sl, ok := slot[st]
			if !ok || free.Free(sl.t) < st.Job.GPUs {
				continue
			}
			free.Use(sl.t, st.Job.GPUs)
			a := engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: sl.t}
			if len(free.Types()) == 1 {
				a.GPUType = st.Job.GPUType
			}
			plan.Run = append(plan.Run, a)
			x.waits.Give(st, a.GPUs)
		}
	}
	if x.terms == nil { // made once: a closure made every round is allocated every round
		x.terms, x.figs, x.waits.terms = x.appendTerms, x.figsOf, alloxTerms
	}
	x.first = first
	if explain.Lazy(s) {
		// The waiting jobs' reasons are worked out when read.
		x.waits.Record(s, &plan, x.figs, x.terms)
	} else {
		x.explain.PlanAppend(s, &plan, nil, x.terms)
	}
	x.run = plan.Run
	empty(x.slot)    // the statuses are the engine's
	clear(x.waiting) // as are these
	clear(x.early)
	clear(x.ranked)
	return plan
}

// bySubmission is alloc.SortJobs' order: submission time, then ID.
func bySubmission(a, b *engine.Status) int {
	ja, jb := a.Job, b.Job
	if ja.Submit != jb.Submit {
		return cmp.Compare(ja.Submit, jb.Submit)
	}
	return strings.Compare(ja.ID, jb.ID)
}

// appendTerms appends a waiting job's standing to b: "tenant "a" attained
// 1.50 GPU-h, matched with the least served; the matching minimises mean
// completion time", as this round ranked its tenant.
func (x *AlloX) appendTerms(b []byte, st *engine.Status) []byte {
	return alloxTerms(b, st, x.figsOf(st))
}

// figsOf is what appendTerms states of st as this round ranked its tenant:
// the tenant's attained GPU-seconds, and 1 when it is matched with the
// least served (0 with the rest).
func (x *AlloX) figsOf(st *engine.Status) waitFigs {
	var f waitFigs
	if g := x.tenants.Of(st.Job.Tenant); g == nil || g.v.rank < x.first { // no tenant ranks before the first
		f[1] = 1
		if g != nil {
			f[0] = g.v.attained
		}
	} else {
		f[0] = g.v.attained
	}
	return f
}

// alloxTerms is appendTerms from the figures figsOf gave (the text a
// reason worked out when read states: waitReasons).
func alloxTerms(b []byte, st *engine.Status, f waitFigs) []byte {
	part := "the rest"
	if f[1] != 0 {
		part = "the least served"
	}
	b = append(b, "tenant "...)
	b = strconv.AppendQuote(b, st.Job.Tenant)
	b = append(b, " attained "...)
	b = strconv.AppendFloat(b, f[0]/3600, 'f', 2, 64)
	b = append(b, " GPU-h, matched with "...)
	b = append(b, part...)
	return append(b, "; the matching minimises mean completion time"...)
}

// ExplainsWhenRead implements engine.ExplainsWhenRead: the reasons of the
// jobs a round leaves waiting are worked out when read (waitReasons), in
// every round; behind a wrapper every reason is written.
func (x *AlloX) ExplainsWhenRead() bool { return true }

// ProgressOnDemand implements engine.ProgressOnDemand: AlloX reads the
// progress (Snapshot.Progress, Snapshot.Remaining) of the waiting jobs it
// matches alone; running jobs keep their GPUs unread, so no running job's
// progress is pulled.
func (x *AlloX) ProgressOnDemand() bool { return true }

// cached is Match through the cache, keyed by job ID.
func (x *AlloX) cached(s *engine.Snapshot, jobs []*engine.Status) map[*engine.Status]alloxSlot {
	// The key holds everything Match reads: the GPUs available of each
	// type and the most of them one job can hold (both vary on
	// multi-site clusters), and the jobs' progress. The cache must never
	// change a plan, only save time: a fresh instance after a restart
	// plans the same (engine.Stateful).
	key := x.key[:0]
	for _, t := range s.Cluster.GPUTypes() {
		key = append(key, t...)
		key = append(key, '=')
		key = strconv.AppendInt(key, int64(s.Available("", t)), 10)
		key = append(key, '/')
		key = strconv.AppendInt(key, int64(alloxLargest(s, t)), 10)
		key = append(key, ',')
	}
	for _, st := range jobs {
		key = append(key, st.Job.ID...)
		key = append(key, '@')
		key = strconv.AppendFloat(key, s.Progress(st), 'g', -1, 64)
		key = append(key, ',')
	}
	x.key = key
	byID, ok := x.cache[string(key)]
	if !ok {
		byID = map[string]alloxSlot{}
		for st, sl := range x.Match(s, jobs) {
			byID[st.Job.ID] = sl
		}
		if x.cache == nil || len(x.cache) > 64 {
			x.cache = map[string]map[string]alloxSlot{}
		}
		x.cache[string(key)] = byID
	}
	if x.slot == nil {
		x.slot = make(map[*engine.Status]alloxSlot, len(jobs))
	}
	out := x.slot
	empty(out)
	for _, st := range jobs {
		if sl, ok := byID[st.Job.ID]; ok {
			out[st] = sl
		}
	}
	return out
}

// alloxSlot is where the matching put a job: type t, k-th from the end,
// with processing time p there.
type alloxSlot struct {
	t string
	k int
	p float64
}

// Match returns the min-cost matching of jobs to (type, position) slots.
// A type's machines are its GPUs up (Snapshot.Available); a job is offered
// a type only when one job could hold its GPUs of it (alloxLargest: a job
// never spans sites) and, when it asks for part of each GPU, the type's
// GPUs have the memory for its part (alloc.PartFits). Jobs that can run on
// no type are left out.
func (x *AlloX) Match(s *engine.Snapshot, jobs []*engine.Status) map[*engine.Status]alloxSlot {
	types := s.Cluster.GPUTypes()
	n := len(jobs)
	out := map[*engine.Status]alloxSlot{}
	if n == 0 {
		return out
	}
	largest := make([]int, len(types))
	for ti, t := range types {
		largest[ti] = alloxLargest(s, t)
	}
	var mem []float64 // each type's GPU memory, once a job asks for part of a GPU
	partFits := func(st *engine.Status, ti int) bool {
		if !st.Job.Fractional() {
			return true
		}
		if mem == nil {
			mem = make([]float64, len(types))
			for k, t := range types {
				mem[k] = alloc.TypeMem(s.Cluster, t)
			}
		}
		return alloc.PartFits(st.Job, mem[ti])
	}
	// Nodes: 0 source, 1 sink, 2.. jobs, then one node per (type, k).
	g := newFlow(2 + n)
	type slotNode struct {
		t string
		k int
	}
	var slots []slotNode
	proc := make([][]float64, n)
	for i, st := range jobs {
		g.edge(0, 2+i, 1, 0)
		proc[i] = make([]float64, len(types))
		for ti, t := range types {
			p := math.Inf(1)
			if (st.Job.GPUType == "" || st.Job.GPUType == t) && st.Job.GPUs <= largest[ti] && partFits(st, ti) {
				p = s.Remaining(st, st.Job.GPUs, t) * float64(st.Job.GPUs)
			}
			proc[i][ti] = p
		}
	}
	for ti, t := range types {
		machines := s.Available("", t)
		if machines == 0 {
			continue
		}
		for k := 1; k <= (n+machines-1)/machines; k++ {
			v := g.node()
			slots = append(slots, slotNode{t, k})
			g.edge(v, 1, machines, 0)
			for i := range jobs {
				if p := proc[i][ti]; !math.IsInf(p, 0) && !math.IsNaN(p) {
					g.edge(2+i, v, 1, float64(k)*p)
				}
			}
		}
	}
	g.minCost(0, 1, n)
	for i, st := range jobs {
		for _, e := range g.adj[2+i] {
			if e.to >= 2+n && e.cap == 0 && e.cost >= 0 {
				sl := slots[e.to-2-n]
				ti := slices.Index(types, sl.t)
				out[st] = alloxSlot{t: sl.t, k: sl.k, p: proc[i][ti]}
			}
		}
	}
	return out
}

// alloxLargest is the most GPUs of type t one job can hold now: on one
// site, every GPU of t up (Snapshot.Available); on several, what the
// fullest site (or edge server) has up (Snapshot.Largest), as
// alloc.Pool caps a job. A job never spans sites, so counting t over
// every site matched a job of 8 to a100 on 6 of a cloud plus 4 of an
// inference site, which no placement honours: the job, matched to that
// type and so started on no other, waited for ever beside idle GPUs that
// could hold it (seeds 635, 660 and 909 of the random clusters). On one
// site the cap is Available, as before, so such runs are unchanged.
func alloxLargest(s *engine.Snapshot, t string) int {
	if len(s.Cluster.Sites()) > 1 {
		return s.Largest(t)
	}
	return s.Available("", t)
}

// flow is a small min-cost flow graph (successive shortest paths found by
// Bellman-Ford, which the residual graph's negative costs need).
type flow struct{ adj [][]flowEdge }

type flowEdge struct {
	to, rev, cap int
	cost         float64
}

func newFlow(n int) *flow { return &flow{adj: make([][]flowEdge, n)} }

func (g *flow) node() int { g.adj = append(g.adj, nil); return len(g.adj) - 1 }

func (g *flow) edge(u, v, c int, cost float64) {
	g.adj[u] = append(g.adj[u], flowEdge{to: v, rev: len(g.adj[v]), cap: c, cost: cost})
	g.adj[v] = append(g.adj[v], flowEdge{to: u, rev: len(g.adj[u]) - 1, cap: 0, cost: -cost})
}

// minCost sends up to want units from s to t at least cost, one shortest
// augmenting path at a time, and returns the units sent.
func (g *flow) minCost(s, t, want int) int {
	n := len(g.adj)
	dist := make([]float64, n)
	prevNode, prevEdge := make([]int, n), make([]int, n)
	sent := 0
	for sent < want {
		for i := range dist {
			dist[i] = math.Inf(1)
		}
		dist[s] = 0
		// At most n-1 passes; a relaxation must gain more than rounding
		// noise, so a float near-cycle cannot keep it going.
		for pass := 0; pass < n; pass++ {
			changed := false
			for u := range g.adj {
				if math.IsInf(dist[u], 1) {
					continue
				}
				for ei, e := range g.adj[u] {
					if e.cap <= 0 {
						continue
					}
					if d := dist[u] + e.cost; d < dist[e.to]-1e-9*math.Max(1, math.Abs(d)) {
						dist[e.to], prevNode[e.to], prevEdge[e.to] = d, u, ei
						changed = true
					}
				}
			}
			if !changed {
				break
			}
		}
		if math.IsInf(dist[t], 1) {
			return sent
		}
		for v, steps := t, 0; v != s; v, steps = prevNode[v], steps+1 {
			if steps > n {
				return sent // a cycle in the path: stop rather than loop
			}
		}
		for v := t; v != s; v = prevNode[v] {
			e := &g.adj[prevNode[v]][prevEdge[v]]
			e.cap--
			g.adj[v][e.rev].cap++
		}
		sent++
	}
	return sent
}
