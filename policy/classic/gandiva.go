package classic

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
	"github.com/tide-sched/tide/policy/internal/roster"
)

// gandivaPolicies registers the policies this file defines; Policies calls it.
func gandivaPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "gandiva",
		Presets: []string{"gandiva:preset=gavel", "gandiva:pack=true"},
		Summary: "Gandiva (OSDI'18): heterogeneity-agnostic; when oversubscribed, suspend/resume time-slicing " +
			"in round-robin quanta; migration to consolidate fragmented jobs",
		Knobs: "preset=paper (paper: quantum 60 s, migrate=true, rotate=false; gavel: Gavel's model of Gandiva, " +
			"quantum 360 s, rotate=true, migrate=false — run it with --preset gavel: 360 s rounds, none at events); " +
			"quantum=S: seconds a running job keeps its GPUs while others wait before it is suspended; " +
			"rotate=B: give every job an equal share of time on each GPU type (fastest type first to the job " +
			"that has had least of it) instead of leaving it where it runs; " +
			"migrate=B: move a running job that spans more nodes than it needs onto one node when one has room; " +
			"pack=false: when oversubscribed, pair jobs at random to share GPUs where the throughput tables measured the pair, " +
			"keeping pairs whose measured throughput improves (the simulator, tide serve and tide kube with --pair-throughputs); seed=0: the pairing's random seed; " +
			"grow=false: when no job waits, grow elastic jobs into idle GPUs (they shrink back when jobs wait)",
		Defaults: DefaultGandiva,
		Build:    contract.Typed(DefaultGandiva, func(_ contract.Context, k GandivaKnobs) (*Gandiva, error) { return NewGandiva(k) }),
	})
}

// Gandiva is the time-slicing scheduler of Gandiva (Xiao et al., OSDI'18),
// as far as an engine without GPU sharing can run it:
//
//   - Jobs run on their requested GPU count and are never resized.
//
//   - While every active job fits, all run. When the cluster is
//     oversubscribed, jobs take turns (Gandiva's suspend/resume at minibatch
//     boundaries): a running job keeps its GPUs for Quantum seconds of its
//     current stint; after that, suspended jobs go first, longest-suspended
//     first, and the job that used up its quantum joins the back of the
//     queue.
//
//   - Migrate: a running job spread over more nodes than its size needs is
//     moved onto one node with room (Gandiva's migration for consolidation).
//
//   - Rotate: Gandiva ignores GPU types. Gavel's evaluation models that as an
//     equal share of time on each type: with Rotate, the job that has held a
//     type least gets it first, fastest type first, so a job's speed averages
//     over the types instead of staying where it first landed.
//
//   - Pack and Grow: Gandiva's packing of two jobs on one GPU and its
//     grow-shrink of elastic jobs (gandiva_pack.go); both off by default.
type Gandiva struct {
	Quantum float64 // seconds
	Rotate  bool
	Migrate bool
	Pack    bool
	Grow    bool
	name    string
	pk      *gandivaPacking
	// kept is what the rounds planned from what changed read (issue 19).
	kept  roster.Roster
	run   []engine.Assignment
	fresh gandivaTurns                                         // the running jobs inside their quantum (gandiva_kept.go)
	why   explain.Scratch                                      // reasons' memory, reused from round to round
	terms func(b []byte, st *engine.Status) []byte             // appendTerms
	lazy  explain.Queue                                        // the waiting jobs' reasons, worked out when read
	keyT  func([]byte, *engine.Status, float64, [2]int) []byte // keyTerms
	// Scratch reused from round to round: turns' keys and order, and
	// consolidate's memory.
	turnKeys []turnKey
	order    []*engine.Status
	moves    migration
	pool     alloc.Pool // the greedy pass's, kept (alloc.Pool.Greedy)
	stops    stopKeeper // a preempting round's plan as Keep and Stop (keep_stops.go)
}

// GandivaKnobs are Gandiva's knobs (`tide policies gandiva`); nil ones
// take their preset's value.
type GandivaKnobs struct {
	Preset  string   `knob:"preset"` // paper or gavel
	Quantum *float64 `knob:"quantum"`
	Rotate  *bool    `knob:"rotate"`
	Migrate *bool    `knob:"migrate"`
	Pack    bool     `knob:"pack"`
	Grow    bool     `knob:"grow"`
	Seed    int      `knob:"seed"`
}

// DefaultGandiva holds Gandiva's default knobs: the paper's preset.
var DefaultGandiva = GandivaKnobs{Preset: "paper"}

// NewGandiva builds Gandiva with knobs k, refusing values out of range.
func NewGandiva(k GandivaKnobs) (*Gandiva, error) {
	g := &Gandiva{name: "gandiva"}
	switch k.Preset {
	case "paper":
		g.Quantum, g.Migrate = 60, true
	case "gavel":
		g.Quantum, g.Rotate = 360, true
		g.name += ":preset=gavel"
	default:
		return nil, fmt.Errorf("policy gandiva: preset=%q: want paper or gavel", k.Preset)
	}
	if k.Quantum != nil {
		g.Quantum = *k.Quantum
	}
	if !(g.Quantum > 0) {
		return nil, fmt.Errorf("policy gandiva: quantum must be > 0 seconds, got %v", g.Quantum)
	}
	if k.Rotate != nil {
		g.Rotate = *k.Rotate
	}
	if k.Migrate != nil {
		g.Migrate = *k.Migrate
	}
	g.Pack, g.Grow = k.Pack, k.Grow
	if k.Seed < 0 {
		return nil, fmt.Errorf("policy gandiva: seed=%v: want an integer >= 0", k.Seed)
	}
	if g.Pack {
		g.name += ":pack=true"
		if k.Seed != 0 { // runs with different pairings get different names
			g.name += fmt.Sprintf(":seed=%d", k.Seed)
		}
		g.pk = newGandivaPacking(uint64(k.Seed), k.Preset == "gavel")
	}
	if g.Grow {
		g.name += ":grow=true"
	}
	return g, nil
}

// Name implements engine.Policy.
func (g *Gandiva) Name() string { return g.name }

// Incremental implements engine.IncrementalPolicy: without packing,
// growing and rotation across types, and while no running job is spread
// over nodes it could leave (Migrate), a round in which every active job
// fits is planned from what changed (all run, the waiting ones start
// longest suspended first, as the full pass orders them), and so is an
// oversubscribed round in which no job's slice ends with its GPUs going to
// another (gandiva_kept.go). A round that preempts is planned in full.
func (g *Gandiva) Incremental() bool { return !g.Pack && !g.Grow && !g.Rotate }

// KeptRounds is how many rounds this instance planned from what changed.
func (g *Gandiva) KeptRounds() int { return g.kept.Kept }

// JobsOnDemand implements engine.JobsOnDemand: a round planned from what
// changed reads the roster and the running jobs inside their quantum; a
// full round (and a rebuild of either) asks for the active jobs first
// (Snapshot.ActiveJobs).
func (g *Gandiva) JobsOnDemand() bool { return g.Incremental() }

// ProgressFree implements engine.ProgressFree: Gandiva's turns follow
// launch and stop times; only rotation (the jobs' speeds on each type),
// packing and growing read the model.
func (g *Gandiva) ProgressFree() bool { return g.Incremental() }

// ProgressOnDemand implements engine.ProgressOnDemand: with rotation,
// packing or growing Gandiva reads progress only through the model's
// rates (alloc.Rate, which pulls it: Snapshot.Progress). Rotation on a
// cluster of several types reads every chosen job's rate on each type in
// every round (TypesBySpeed), as its rule must: the types are ordered by
// the jobs' speeds again each round; on one type it reads none (whether a
// job can run on a type reads no progress: alloc.Runs). Packing reads the
// rates of the pairs it tries, growing those of the jobs it grows (in
// rounds in which no job waits).
func (g *Gandiva) ProgressOnDemand() bool { return true }

// spread reports whether st runs spread over more nodes than its size
// needs: consolidate would try to move it.
func spread(s *engine.Snapshot, st *engine.Status) bool {
	return len(st.GPUs) > 0 && len(st.Alloc.PerNode) > 1 && len(st.GPUs) <= s.GPUsPerNode[st.Alloc.GPUType]
}

// Schedule implements engine.Policy.
func (g *Gandiva) Schedule(s *engine.Snapshot) engine.Plan {
	g.lazy.Next(s.Round)
	if g.Incremental() {
		if g.Migrate && g.kept.Odd == nil {
			g.kept.Odd = spread
		}
		if g.kept.Begin(s) {
			g.fresh.follow(g, s)
			if g.kept.Fits(s) {
				g.kept.Kept++
				g.run = startAll(g.run, alloc.SortByKey(g.kept.Waiting(), lastStop))
				return engine.Plan{Run: g.run, Keep: true}
			}
			if plan, ok := g.keptTurns(s); ok { // gandiva_kept.go
				g.kept.Kept++
				return plan
			}
		} else {
			g.fresh.invalidate()
		}
	}
	order := g.turns(s)
	defer clear(order) // keep the memory, not the jobs
	if g.Pack {
		order = g.pk.update(s, order)
	}
	var plan engine.Plan
	if g.Rotate {
		plan = rotateTypes(s, order, g.Quantum)
	} else {
		plan = g.pool.Greedy(s, order, false, g.run)
		g.run = plan.Run
		lazy := g.Incremental() && lazyGreedy(s, &plan, &g.lazy, order, nil, g.keyTermsOnce())
		if g.Migrate {
			plan.Run = g.moves.consolidate(s, order, plan.Run) // the same jobs and counts
		}
		if lazy {
			// A round that moves no job goes as Keep and Stop
			// (keep_stops.go); one that migrates, in full.
			g.stops.keep(s, &plan, order)
			return plan
		}
	}
	if g.Pack {
		plan.Run = g.pk.expand(s, plan.Run)
	}
	if g.Grow {
		plan.Run = alloc.Grow(s, plan.Run)
	}
	if g.terms == nil { // made once: a closure made every round would be allocated every round
		g.terms = g.appendTerms
	}
	g.why.PlanAppend(s, &plan, order, g.terms)
	return plan
}

// appendTerms appends st's standing in Gandiva's turns to b (explain's
// terms).
func (g *Gandiva) appendTerms(b []byte, st *engine.Status) []byte {
	if len(st.GPUs) > 0 {
		b = append(b, "time slice of "...)
		b = strconv.AppendFloat(b, g.Quantum, 'f', 0, 64)
		return append(b, " s used up"...)
	}
	b = append(b, "suspended since t="...)
	b = strconv.AppendFloat(b, st.LastStop, 'f', 0, 64)
	return append(b, " s; the longest suspended run first"...)
}

// keyTerms is appendTerms as explain.Order's Terms.
func (g *Gandiva) keyTerms(b []byte, st *engine.Status, _ float64, _ [2]int) []byte {
	return g.appendTerms(b, st)
}

// keyTermsOnce is keyTerms, made once (a method value made every round
// would be allocated every round).
func (g *Gandiva) keyTermsOnce() func([]byte, *engine.Status, float64, [2]int) []byte {
	if g.keyT == nil {
		g.keyT = g.keyTerms
	}
	return g.keyT
}

// turns orders the jobs for time-slicing: running jobs inside their quantum
// (longest running last... first started first), then waiting jobs longest
// suspended first, then running jobs whose quantum is spent, earliest
// started first; ties by submission, then ID. When all jobs fit, the order
// does not matter: all run. The slice is g's, valid until the next call.
func (g *Gandiva) turns(s *engine.Snapshot) []*engine.Status {
	jobs := s.ActiveJobs()
	keyed := slices.Grow(g.turnKeys[:0], len(jobs))
	for _, st := range jobs {
		k := turnKey{st: st}
		switch {
		case len(st.GPUs) > 0 && s.Now-st.LastStart < g.Quantum:
			k.class, k.t = 0, st.LastStart
		case len(st.GPUs) == 0:
			k.class, k.t = 1, st.LastStop
		default:
			k.class, k.t = 2, st.LastStart
		}
		keyed = append(keyed, k)
	}
	// The order is total (IDs are unique): any sort gives the one
	// alloc.SortJobs gave.
	slices.SortFunc(keyed, func(a, b turnKey) int {
		if a.class != b.class {
			return cmp.Compare(a.class, b.class)
		}
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return submitOrder(a.st, b.st)
	})
	order := slices.Grow(g.order[:0], len(keyed))
	for _, k := range keyed {
		order = append(order, k.st)
	}
	clear(keyed) // keep the memory, not the jobs
	g.turnKeys, g.order = keyed[:0], order
	return order
}

// turnKey is a job's place in Gandiva's turns: its class (inside its
// quantum, waiting, quantum spent) and the time that orders it inside.
type turnKey struct {
	class int
	t     float64
	st    *engine.Status
}

// lastStop is a waiting job's place among the suspended: when it was last
// stopped (or submitted).
func lastStop(st *engine.Status) float64 { return st.LastStop }

// rotateTypes runs jobs in the given order while their GPU counts fit the
// cluster, then hands out the types: a running job inside its quantum
// keeps its type, as it keeps its GPUs without rotation; then fastest type
// first, each to the selected jobs that have held it least (ties in the
// given order). A job that fits no type's remaining GPUs waits; on a
// cluster of several sites, so does one more than one site (or edge
// server) has of a type up (Snapshot.Largest): a job never spans sites,
// and given such a type it waited for ever. So does a job asking for part
// of each GPU on a type whose GPUs have not the memory for its part
// (alloc.PartFits), as in the greedy pool: given T4s (16 GiB) for a
// 2g.20gb MIG slice beside 80 GiB V100s, it was never placed, and with it
// the jobs it kept from the T4s waited on an idle cluster (seed 604 of a
// random search over workloads, with every seed's jobs fractional).
//
// The type once went to the job that held it least even inside the
// quantum: with rounds shorter than the quantum (preset=paper, rounds at
// events) jobs asking for the same type took it from each other every
// round, each stint shorter than the restart cost, and none ever finished
// (seed 586 of a random search over workloads). With Gavel's preset run
// as it should be (--preset gavel: 360 s rounds, none at events) a round
// is a quantum, so no job is inside it at a round.
func rotateTypes(s *engine.Snapshot, order []*engine.Status, quantum float64) engine.Plan {
	left := s.Available("", "")
	var chosen []*engine.Status
	for _, st := range order {
		if st.Job.GPUs <= left {
			chosen = append(chosen, st)
			left -= st.Job.GPUs
		}
	}
	types := alloc.TypesBySpeed(s, chosen)
	given := make(map[*engine.Status]string, len(chosen))
	sites := len(s.Cluster.Sites()) > 1
	free := make([]int, len(types))
	for i, t := range types {
		free[i] = s.Available("", t)
	}
	for _, st := range chosen {
		if len(st.GPUs) == 0 || !(s.Now-st.LastStart < quantum) {
			continue
		}
		if i := slices.Index(types, st.Alloc.GPUType); i >= 0 && st.Job.GPUs <= free[i] {
			given[st] = types[i]
			free[i] -= st.Job.GPUs
		}
	}
	for i, t := range types {
		largest, mem := math.MaxInt, -1.0
		if sites {
			largest = s.Largest(t)
		}
		byTime := slices.Clone(chosen)
		slices.SortStableFunc(byTime, func(a, b *engine.Status) int {
			return cmp.Compare(a.TypeSeconds(t), b.TypeSeconds(t))
		})
		for _, st := range byTime {
			if given[st] != "" || st.Job.GPUs > free[i] || st.Job.GPUs > largest || (st.Job.GPUType != "" && st.Job.GPUType != t) ||
				!alloc.Runs(s, st, st.Job.GPUs, t) {
				continue
			}
			if st.Job.Fractional() {
				if mem < 0 {
					mem = alloc.TypeMem(s.Cluster, t)
				}
				if !alloc.PartFits(st.Job, mem) {
					continue
				}
			}
			given[st] = t
			free[i] -= st.Job.GPUs
		}
	}
	var plan engine.Plan
	for _, st := range chosen {
		if t := given[st]; t != "" {
			plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, GPUType: t})
		}
	}
	return plan
}

// consolidate is Gandiva's migration: a running job that keeps its GPU
// count and type but spans more nodes than its size needs is given an
// exact one-node shape on a node of its type with room (GPUs up, not
// held by the other jobs that stay), preferring the node where it already
// has most GPUs, then the fullest. Migrating jobs move to the front of the
// plan so the placer gives them the room before new jobs take it. run
// lists jobs of order (the snapshot's); the plan it returns has the same
// jobs, counts and types as run (so the per-type totals the greedy pass
// held within the GPUs up stay so), in m's memory, valid until the next
// call.
func (m *migration) consolidate(s *engine.Snapshot, order []*engine.Status, run []engine.Assignment) []engine.Assignment {
	c := s.Cluster
	spread := false // does any job that one node could hold span several?
	for _, st := range s.ActiveJobs() {
		if len(st.Alloc.PerNode) > 1 && len(st.GPUs) <= s.GPUsPerNode[st.Alloc.GPUType] {
			spread = true
			break
		}
	}
	if !spread {
		return run // nothing to move: the common round costs no lookups
	}
	sts := m.planned.Of(s, order, run)
	defer clear(sts)
	free := slices.Grow(m.free[:0], len(c.Nodes))[:len(c.Nodes)]
	mine := slices.Grow(m.mine[:0], len(c.Nodes))[:len(c.Nodes)]
	m.free, m.mine = free, mine
	clear(mine)
	for i := range c.Nodes {
		// A GPU down (a fault, or lent to inference) is no room: a
		// shape on it would leave the job unplaced.
		free[c.Nodes[i].ID] = s.UpGPUs(&c.Nodes[i])
	}
	for i := range run {
		for _, g := range sts[i].GPUs {
			free[c.NodeOf(g).ID]--
		}
	}
	moved, rest := m.moved[:0], m.rest[:0]
	nodes := m.nodes[:0]
	for i, a := range run {
		st := sts[i]
		// A job the greedy pass moved to another type is not migrated:
		// its shape would be on its old type, asking for GPUs of that
		// type the greedy pass gave to others (an over-committed type),
		// and the placer places it afresh on its new one anyway. On a
		// one-type cluster the plan keeps the job's own, possibly empty,
		// type: that is no move.
		// Nor is a job with part of each GPU: the engine places parts
		// itself and takes no node shape for them.
		if len(st.GPUs) != a.GPUs || len(st.Alloc.PerNode) <= 1 || a.GPUs > s.GPUsPerNode[st.Alloc.GPUType] ||
			(a.GPUType != "" && a.GPUType != st.Alloc.GPUType) || st.Job.Fractional() {
			rest = append(rest, a)
			continue
		}
		touched := m.touched[:0]
		for _, g := range st.GPUs {
			id := c.NodeOf(g).ID
			if mine[id] == 0 {
				touched = append(touched, id)
			}
			mine[id]++
		}
		m.touched = touched
		best := -1
		for _, n := range c.Nodes {
			// Within the site the plan names (alloc's pool plans each
			// job into one site, the room of the others given away).
			if n.GPUType != st.Alloc.GPUType || free[n.ID]+mine[n.ID] < a.GPUs || (a.Site != "" && n.Site != a.Site) {
				continue
			}
			if best < 0 || mine[n.ID] > mine[best] || (mine[n.ID] == mine[best] && free[n.ID] < free[best]) {
				best = n.ID
			}
		}
		if best >= 0 {
			for _, id := range touched {
				free[id] += mine[id]
			}
			free[best] -= a.GPUs
		}
		for _, id := range touched {
			mine[id] = 0
		}
		if best < 0 {
			rest = append(rest, a)
			continue
		}
		a.GPUType = st.Alloc.GPUType
		nodes = append(nodes, engine.NodeGPUs{Node: best, GPUs: a.GPUs})
		moved = append(moved, a)
	}
	// Each moved job's shape is its own entry of nodes (its memory
	// settled once nodes has grown).
	for i := range moved {
		moved[i].Nodes = nodes[i : i+1 : i+1]
	}
	out := append(append(m.out[:0], moved...), rest...)
	m.moved, m.rest, m.nodes, m.out = moved, rest, nodes, out
	return out
}

// migration is the memory consolidate reuses from round to round.
type migration struct {
	free, mine []int // per node: GPUs left; GPUs of the job looked at
	touched    []int // the nodes mine counts
	moved      []engine.Assignment
	rest       []engine.Assignment
	out        []engine.Assignment
	nodes      []engine.NodeGPUs
	planned    explain.Planned
}
