package elastic

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// polluxPolicies registers the policies this file defines; Policies calls it.
func polluxPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "pollux",
		Presets: []string{"pollux:restart_cost=job"},
		Summary: "Pollux (OSDI'21): elastic jobs on node shapes chosen to maximise the power mean (p=-1) of each " +
			"job's goodput speedup over its fair share, a changed allocation penalised by the restart factor",
		Knobs: "search=fast (fast: knapsack over GPU counts, packing, best responses and a large-neighbourhood " +
			"search, reaching at least the GA's fitness in less time; ga: the artifact's NSGA-II genetic search, " +
			"population pop, generations rounds, seeded with the current allocation); " +
			"restart_penalty=30: seconds D of the restart factor max(age - D x restarts, 0)/(age + D), or cost: " +
			"each job's own cost of the change from the performance model (resize cost while it runs, else restart " +
			"or start cost); " +
			"restart_cost=gpus: a running job's change also costs the fitness the share of the cluster's GPU time " +
			"it idles, D x GPUs / (cluster GPUs x (held + D)), GPUs = those of its current allocation it keeps, held = " +
			"seconds on its current allocation; job: the " +
			"artifact's rule, the restart factor alone; " +
			"interference=true: at most one multi-node job per node; max_nodes=16: nodes per job; " +
			"p=-1: power-mean exponent of the fitness; seed=0: random seed of either search (mixed with the round); " +
			"pop=100: GA population; generations=100: GA generations; " +
			"tries=0: the most large-neighbourhood tries of the fast search (0: 500 + 20 x nodes, stopping after " +
			"200 + 4 x nodes without a gain; a cap bounds the search's work as the artifact's fixed population and " +
			"generations do, for large clusters: docs/scale.md)",
		Elastic:    true,
		AdaptBatch: true,
		Defaults:   DefaultPollux,
		Build:      contract.Typed(DefaultPollux, func(_ contract.Context, k PolluxKnobs) (*Pollux, error) { return NewPolluxWith(k) }),
	})
}

// Pollux is the scheduling policy of Pollux (OSDI'21), after the artifact's
// simulator (petuum/adaptdl, branch osdi21-artifact, simulator/pollux.py).
//
// Each round it chooses, for every active job, how many GPUs on which nodes
// (an allocation matrix jobs x nodes) to maximise the fitness: the power mean
// with exponent P of the jobs' speedups. A job's speedup is its best goodput
// on the allocation (goodput.Function.Optimize over the batch size) divided
// by its goodput at the fair share (ceil(GPUs/jobs) replicas); a job that
// has not reported a fitted model scales linearly. A job whose allocation
// changes has its speedup multiplied by the restart factor
// max(age - D x restarts, 0)/(age + D). A job may get no GPU; one that gets
// some gets at most max(2 x the most replicas it has run on, 1), 64 and
// MaxBatch/MinLocal replicas, within its own [MinGPUs, MaxGPUs], on at most
// MaxNodes nodes, and with Interference no node hosts two multi-node jobs.
//
// Jobs keep what they hold when the search does not change it: the plan
// names each job's exact shape (Assignment.Nodes), so the placer leaves
// unchanged jobs on their GPUs.
//
// Two searches maximise the fitness: "ga", the artifact's NSGA-II
// (pollux_ga.go), kept as the reference, and "fast" (pollux_fast.go), the
// default, which reaches at least the GA's fitness in a fraction of its
// time (BenchmarkPolluxRound, TestPolluxFastReachesGA).
//
// Where this differs from the artifact:
//   - the GA starts each round from the current allocation alone; the
//     artifact starts from its previous round's final population, which a
//     policy that sees one snapshot cannot have;
//   - a job runs on one GPU type (its own, else the one it holds, else the
//     type with the most GPUs) and only on nodes of that type; the artifact
//     assumes one type;
//   - a job's own MinGPUs/MaxGPUs bound its replicas as well (the artifact's
//     jobs have none), and a job without hints may take MinGPUs when that
//     exceeds the artifact's one replica;
//   - restarts are Status.Starts - 1 (tide counts resizes as starts, as the
//     artifact counts every reallocation);
//   - no cluster autoscaling (the artifact's optimize() fixes the cluster
//     size too).
type Pollux struct {
	Search       string  // "fast" or "ga"
	RestartDelay float64 // D, seconds
	// CostPenalty takes D per job from the performance model's costs
	// (Snapshot.Model.Costs): what the change would cost the job now, its
	// resize cost when it holds GPUs, else its restart or start cost.
	CostPenalty  bool
	Interference bool
	MaxNodes     int
	P            float64 // power-mean exponent; the artifact's -1
	// RestartGPUs (restart_cost=gpus, the default) prices a running job's
	// allocation change by the GPUs it idles too: besides the restart
	// factor, the change costs the fitness the fraction of the cluster's
	// GPU time it idles over the new allocation's expected life, D x GPUs /
	// (cluster GPUs x (held + D)), GPUs being those that worked for the job
	// and stop (min(new, current): a GPU it gains was free or another
	// job's, whose change its own term prices) and held how long the job
	// has kept its current allocation. restart_cost=job is the artifact's
	// rule: the restart factor alone, the job's own lost time.
	RestartGPUs bool
	Seed        uint64 // random seed of the searches; the round is mixed in
	Pop, Gens   int    // GA population and generations
	Tries       int    // the fast search's most LNS tries; 0: 500 + 20 x nodes
	name        string
	// kept is the problem Schedule reuses round to round (its memory and
	// the speedup curves of the jobs' hints), made at the first round.
	kept *pxProblem
}

// PolluxKnobs are Pollux's knobs (`tide policies pollux`).
type PolluxKnobs struct {
	Search         string  `knob:"search"`          // fast or ga
	RestartPenalty string  `knob:"restart_penalty"` // seconds >= 0, or cost
	RestartCost    string  `knob:"restart_cost"`    // gpus or job
	Interference   bool    `knob:"interference"`
	MaxNodes       int     `knob:"max_nodes"`   // [1, 2^20]
	P              float64 `knob:"p"`           // power-mean exponent
	Seed           int     `knob:"seed"`        // >= 0
	Pop            int     `knob:"pop"`         // [2, 100000]
	Generations    int     `knob:"generations"` // [1, 100000]
	Tries          int     `knob:"tries"`       // [0, 10^7]; 0 = 500 + 20 x nodes
}

// DefaultPollux holds Pollux's default knobs.
var DefaultPollux = PolluxKnobs{Search: "fast", RestartPenalty: "30", RestartCost: "gpus", Interference: true,
	MaxNodes: 16, P: -1, Pop: 100, Generations: 100}

// NewPolluxWith builds Pollux with knobs k, refusing values out of range;
// its name lists the knobs that differ from the defaults.
func NewPolluxWith(k PolluxKnobs) (*Pollux, error) {
	p := &Pollux{Search: k.Search}
	if p.Search != "fast" && p.Search != "ga" {
		return nil, fmt.Errorf("policy pollux: search=%q: want fast or ga", p.Search)
	}
	var err error
	if v := k.RestartPenalty; v == "cost" {
		p.RestartDelay, p.CostPenalty = 30, true
	} else if p.RestartDelay, err = strconv.ParseFloat(v, 64); err != nil || !(p.RestartDelay >= 0) || math.IsInf(p.RestartDelay, 1) {
		return nil, fmt.Errorf("policy pollux: restart_penalty=%q: want seconds >= 0 or cost", v)
	}
	switch v := k.RestartCost; v {
	case "job":
	case "gpus":
		p.RestartGPUs = true
	default:
		return nil, fmt.Errorf("policy pollux: restart_cost=%q: want job or gpus", v)
	}
	// Powers of speedups far from 1 overflow beyond this range, and the
	// power mean is then no longer a number to compare allocations by.
	if !(k.P >= -10 && k.P <= 10) {
		return nil, fmt.Errorf("policy pollux: p=%v: want a power-mean exponent in [-10, 10] (-1: the paper's; 0: geometric mean)", k.P)
	}
	p.Interference, p.P = k.Interference, k.P
	for _, r := range []struct {
		key    string
		v      int
		lo, hi int
		dst    *int
	}{{"max_nodes", k.MaxNodes, 1, 1 << 20, &p.MaxNodes}, {"pop", k.Pop, 2, 100000, &p.Pop}, {"generations", k.Generations, 1, 100000, &p.Gens}, {"tries", k.Tries, 0, 10000000, &p.Tries}} {
		if r.v < r.lo || r.v > r.hi {
			return nil, fmt.Errorf("policy pollux: %s=%v: want a whole number in [%d, %d]", r.key, r.v, r.lo, r.hi)
		}
		*r.dst = r.v
	}
	if k.Seed < 0 {
		return nil, fmt.Errorf("policy pollux: seed=%v: want a whole number >= 0", k.Seed)
	}
	p.Seed = uint64(k.Seed)
	// The name lists the knobs that differ from the defaults.
	def := NewPollux("fast")
	p.name = "pollux"
	for _, d := range []struct {
		key     string
		differs bool
		v       any
	}{
		{"search", p.Search != def.Search, k.Search},
		{"restart_penalty", p.RestartDelay != def.RestartDelay || p.CostPenalty, k.RestartPenalty},
		{"restart_cost", p.RestartGPUs != def.RestartGPUs, k.RestartCost},
		{"interference", p.Interference != def.Interference, k.Interference},
		{"max_nodes", p.MaxNodes != def.MaxNodes, k.MaxNodes},
		{"p", p.P != def.P, strconv.FormatFloat(k.P, 'g', -1, 64)},
		{"seed", p.Seed != def.Seed, k.Seed},
		{"pop", p.Pop != def.Pop, k.Pop},
		{"generations", p.Gens != def.Gens, k.Generations},
		{"tries", p.Tries != def.Tries, k.Tries},
	} {
		if d.differs {
			p.name += fmt.Sprintf(":%s=%v", d.key, d.v)
		}
	}
	return p, nil
}

// NewPollux returns Pollux with the default settings (the artifact's, but
// restart_cost=gpus) and the given search ("fast" or "ga").
func NewPollux(search string) *Pollux {
	p := &Pollux{Search: search, RestartDelay: 30, RestartGPUs: true, Interference: true, MaxNodes: 16, P: -1, Pop: 100, Gens: 100, name: "pollux"}
	if search != "fast" {
		p.name += ":search=" + search
	}
	return p
}

// Name implements engine.Policy.
func (p *Pollux) Name() string { return p.name }

// ProgressFree implements engine.ProgressFree: Pollux reads no job's
// progress. Its speedups come from the goodput models jobs report in their
// hints (Status.Hints, which job agents fit from what the jobs measure, not
// from their progress), a job without fitted hints scaling linearly; the
// restart factor reads a job's age and starts, the cost penalty the
// model's costs. With job agents (the Pollux model) the simulator keeps
// every job current anyway: agents observe every running job every round.
func (p *Pollux) ProgressFree() bool { return true }

// Schedule implements engine.Policy. The fast search's round allocates
// nothing once the policy's memory has grown to the snapshot (pxProblem's
// kept buffers, its cell arena, the curves of hints it has seen), but a
// reason whose text changed and a curve's first row of a shape; the GA
// allocates its population every round.
func (p *Pollux) Schedule(s *engine.Snapshot) engine.Plan {
	if p.kept == nil {
		p.kept = new(pxProblem)
	}
	pr := p.kept
	if !pr.reset(s, p) {
		return engine.Plan{}
	}
	defer pr.publish()
	plan := pr.plan(pr.solve(s.Round))
	order := pr.statuses[:0]
	for i := range pr.jobs {
		order = append(order, pr.jobs[i].st)
	}
	pr.statuses = order
	pr.explain.PlanAppend(s, &plan, order, polluxTerms)
	return plan
}

// polluxTerms are Pollux's reason terms.
func polluxTerms(b []byte, st *engine.Status) []byte {
	b = append(b, "attained "...)
	b = strconv.AppendFloat(b, st.Attained/3600, 'f', 2, 64)
	return append(b, " GPU-h; the search gave its GPUs to allocations of more total speedup"...)
}

// solve runs the configured search and returns one row of cells per job.
func (pr *pxProblem) solve(round int) [][]pxCell {
	if pr.pol.Search == "ga" {
		return pr.searchGA(pr.reseed(round))
	}
	return pr.searchFast(round)
}

// reseed is pr's generator seeded with the seed knob and the round: the
// same stream as rand.New(rand.NewPCG(seed, round)), in memory kept.
func (pr *pxProblem) reseed(round int) *rand.Rand {
	pr.pcg.Seed(pr.pol.Seed, uint64(round))
	if pr.rng == nil {
		pr.rng = rand.New(&pr.pcg)
	}
	return pr.rng
}

// pxCell is one job's GPUs on one node (a nonzero entry of the allocation
// matrix). A job's row lists its cells by ascending node index.
type pxCell struct{ node, gpus int32 }

type pxNode struct {
	id  int // cluster.Node.ID
	cap int // GPUs
	typ int // index into pxProblem.types
	// unit is where one job may run (oneUnit): its site's index, or on an
	// edge site, whose jobs use one server, len(sites) + the node's index.
	unit int
}

type pxJob struct {
	st         *engine.Status
	typ        int // GPU type the job runs on this round (-1: none fits)
	minR, maxR int // replica limits when the job gets any GPU
	factor     float64
	gpuCost    float64  // added to the term per GPU of a changed allocation (RestartGPUs)
	base       []pxCell // what it holds now
	baseR      int
	keepOK     bool     // base satisfies this round's limits
	curve      *pxCurve // nil: linear speedup
	fairGP     float64  // goodput at the fair share (fitted jobs)
}

// pxProblem is one round's optimisation problem: the artifact's Problem.
type pxProblem struct {
	pol       *Pollux
	jobs      []pxJob // by attained service, then submission, then ID
	nodes     []pxNode
	types     []string
	gpn       []int   // largest node per type
	typeGPUs  []int   // GPUs per type
	typeJobs  [][]int // jobs per type, in job order
	typeNodes []int   // nodes per type
	largest   []int   // per type, the most GPUs one job could hold now (Snapshot.Largest)
	scale     float64 // nodes/GPUs: a node's worth of dominant share is speedup 1
	fairR     int     // fair-share replicas, ceil(GPUs/jobs)
	fairN     int     // fair-share nodes, ceil(nodes/GPUs)
	eps       float64 // the artifact's 1e-3 added to speedups
	// curves are the speedup curves by hints of this round and, in a
	// problem a policy keeps, of the rounds before while their hints are
	// still reported: a round reuses them (they are the problem's alone:
	// rows shared with pxCache are copied before they are written) and
	// drops those no job reported (pxCurve.round, this round's number in
	// pr.round). The map is never emptied or cleared while jobs report
	// hints: either draws a new hash seed, under which a large map may
	// grow again in a round that adds nothing. fresh are the hints whose
	// curves came from pxCache or were made this round (publish).
	curves map[*goodput.Hints]*pxCurve
	round  int
	fresh  []*goodput.Hints

	// The memory a kept problem reuses round to round: reset overwrites
	// all of it, the searches' scratch is theirs while they run.
	nodeIdx  []int            // cluster node ID -> index in nodes, -1 if no GPUs
	order    []*engine.Status // the jobs in the artifact's order
	statuses []*engine.Status // Schedule's order for the reasons
	states   [2]*pxState      // searchFast's two states
	ga       *pxGA            // the GA's memory
	arena    pxArena          // the fast search's rows
	scratch  pxScratch
	pcg      rand.PCG
	rng      *rand.Rand // over pcg
	run      []engine.Assignment
	nodeGPUs []engine.NodeGPUs // the plan's Nodes, one slice per assignment
	explain  explain.Scratch
}

// newPxProblem is the problem of one round on snapshot s, nil when the
// cluster has no GPU or s no job.
func newPxProblem(s *engine.Snapshot, p *Pollux) *pxProblem {
	pr := new(pxProblem)
	if !pr.reset(s, p) {
		return nil
	}
	return pr
}

// reset makes pr the problem of one round on snapshot s, reusing pr's
// memory, and reports false (pr unusable) when the cluster has no GPU or s
// no job.
func (pr *pxProblem) reset(s *engine.Snapshot, p *Pollux) bool {
	c := s.Cluster
	pr.pol, pr.eps = p, 1e-3
	if pr.curves == nil {
		pr.curves = map[*goodput.Hints]*pxCurve{}
	}
	pr.round++
	pr.fresh = pr.fresh[:0]
	pr.arena.reset()
	pr.types = append(pr.types[:0], c.GPUTypes()...)
	pr.gpn = resize(pr.gpn, len(pr.types))
	pr.typeGPUs = resize(pr.typeGPUs, len(pr.types))
	pr.typeNodes = resize(pr.typeNodes, len(pr.types))
	pr.largest = resize(pr.largest, len(pr.types))
	for k, t := range pr.types {
		pr.largest[k] = s.Largest(t)
	}
	clear(pr.gpn)
	clear(pr.typeGPUs)
	clear(pr.typeNodes)
	if len(pr.typeJobs) < len(pr.types) {
		pr.typeJobs = append(pr.typeJobs, make([][]int, len(pr.types)-len(pr.typeJobs))...)
	}
	pr.typeJobs = pr.typeJobs[:len(pr.types)]
	for t := range pr.typeJobs {
		pr.typeJobs[t] = pr.typeJobs[t][:0]
	}
	pr.nodes = pr.nodes[:0]
	pr.nodeIdx = resize(pr.nodeIdx, len(c.Nodes))
	nodeIdx := pr.nodeIdx
	total := 0
	for i, nd := range c.Nodes {
		nodeIdx[i] = -1
		if nd.GPUs <= 0 {
			continue
		}
		t, _ := pxTypeIndex(pr.types, nd.GPUType)
		nodeIdx[i] = len(pr.nodes)
		unit := 0
		if len(c.Sites()) > 1 {
			unit = slices.IndexFunc(c.Sites(), func(st cluster.Site) bool { return st.Name == nd.Site })
			if nd.SiteKind == cluster.SiteEdge {
				unit = len(c.Sites()) + len(pr.nodes)
			}
		}
		pr.nodes = append(pr.nodes, pxNode{id: nd.ID, cap: nd.GPUs, typ: t, unit: unit})
		pr.gpn[t] = max(pr.gpn[t], nd.GPUs)
		pr.typeGPUs[t] += nd.GPUs
		pr.typeNodes[t]++
		total += nd.GPUs
	}
	if len(pr.nodes) == 0 || len(s.Jobs) == 0 {
		return false
	}
	// The artifact's job order: least attained service first, then FIFO.
	// It decides who wins a node in the repair step.
	order := append(pr.order[:0], s.Jobs...)
	pr.order = order
	slices.SortStableFunc(order, func(a, b *engine.Status) int {
		if c := cmp.Compare(a.Attained, b.Attained); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Job.Submit, b.Job.Submit); c != 0 {
			return c
		}
		return strings.Compare(a.Job.ID, b.Job.ID)
	})
	// Every job asks for one GPU per replica, so its dominant share is
	// 1/GPUs: fair share is ceil(GPUs/jobs) replicas on ceil(nodes/GPUs)
	// nodes, and speedups scale by nodes/GPUs.
	pr.scale = float64(len(pr.nodes)) / float64(total)
	pr.fairR = (total + len(order) - 1) / len(order)
	pr.fairN = (len(pr.nodes) + total - 1) / total
	// Each job's cells reuse the memory of the last round's job at its
	// place.
	if cap(pr.jobs) < len(order) {
		pr.jobs = append(pr.jobs[:cap(pr.jobs)], make([]pxJob, len(order)-cap(pr.jobs))...)
	}
	pr.jobs = pr.jobs[:len(order)]
	for i, st := range order {
		pr.jobs[i] = pr.newJob(s, st, nodeIdx, pr.jobs[i].base[:0])
		if t := pr.jobs[i].typ; t >= 0 {
			pr.typeJobs[t] = append(pr.typeJobs[t], i)
		}
	}
	// The curves of hints no job reported this round go.
	for h, c := range pr.curves {
		if c.round != pr.round {
			delete(pr.curves, h)
		}
	}
	if p.RestartGPUs {
		pr.pricePerGPU(total)
	}
	return true
}

// pxTypeIndex is t's index in types, false when types lacks it.
func pxTypeIndex(types []string, t string) (int, bool) {
	for i, u := range types {
		if u == t {
			return i, true
		}
	}
	return 0, false
}

// pricePerGPU turns each running job's idled fraction (gpuCost, D/(age+D)
// per GPU) into terms: a change that idles a fraction x of the cluster's
// GPU time lowers the fitness by about a fraction x, and a term sum S moves
// the power mean by a fraction |p| x when it moves by |p| x S (x n for the
// geometric mean, p = 0). S is estimated from the jobs that hold GPUs,
// unchanged, scaled to all jobs, since a job without GPUs counts the
// artifact's 1e-3 floor and would dwarf the rest.
func (pr *pxProblem) pricePerGPU(gpus int) {
	sum, held := 0.0, 0
	for j := range pr.jobs {
		if jb := &pr.jobs[j]; jb.baseR > 0 {
			sum += math.Abs(pr.term(j, len(jb.base), jb.baseR, false))
			held++
		}
	}
	k := float64(len(pr.jobs))
	if p := pr.pol.P; p != 0 && held > 0 {
		k = math.Abs(p) * sum / float64(held) * float64(len(pr.jobs))
	}
	for j := range pr.jobs {
		pr.jobs[j].gpuCost *= k / float64(gpus)
	}
}

// newJob is the job of status st this round, its current cells appended to
// base (empty; memory to reuse).
func (pr *pxProblem) newJob(s *engine.Snapshot, st *engine.Status, nodeIdx []int, base []pxCell) pxJob {
	j := st.Job
	jb := pxJob{st: st, typ: -1, base: base}
	// The GPU type: the job's own, else the one it runs on, else the type
	// with the most GPUs (Pollux assumes one type; this keeps each job on
	// one) among those one site (or edge server) of which holds the job's
	// minimum now, if any does: the type with the most GPUs overall, its
	// GPUs on edge servers too small for the job, left it waiting for ever
	// beside another type's idle site that held it.
	t := j.GPUType
	if t == "" && len(st.GPUs) > 0 {
		t = s.Cluster.NodeOf(st.GPUs[0]).GPUType
	}
	if t == "" {
		best, bestFits := 0, false
		for k, name := range pr.types {
			fits := pr.largest[k] >= j.MinGPUs
			if t == "" || (fits && !bestFits) || (fits == bestFits && pr.typeGPUs[k] > pr.typeGPUs[best]) {
				t, best, bestFits = name, k, fits
			}
		}
	}
	if k, ok := pxTypeIndex(pr.types, t); ok {
		jb.typ = k
	}
	// Replica limits (simulator.py, get_pollux_job_info): twice the most
	// replicas profiled (explore gradually), at most 64 and MaxBatch/MinLocal.
	maxR := 1
	if h := st.Hints; h != nil {
		maxR = min(max(2*h.MaxReplicas, 1), 64)
		if h.Limits.MaxBatch > 0 {
			maxR = min(maxR, max(h.Limits.MaxBatch/max(h.Limits.MinLocal, 1), 1))
		}
	}
	jb.maxR = max(min(maxR, j.MaxGPUs), j.MinGPUs)
	jb.minR = max(j.MinGPUs, 1)
	if jb.typ < 0 {
		jb.maxR = 0
	}
	// Restart factor (pollux.py): num_restarts counts reallocations after
	// the first, which is what Starts counts beyond the first launch.
	age := s.Now - j.Submit
	restarts := float64(max(st.Starts-1, 0))
	d := pr.pol.RestartDelay
	if pr.pol.CostPenalty && s.Model != nil {
		c := s.Model.Costs(j)
		switch {
		case len(st.GPUs) > 0:
			d = c.Resize
		case st.Starts > 0:
			d = c.Restart
		default:
			d = c.Start
		}
	}
	jb.factor = 1
	if age+d > 0 {
		jb.factor = math.Max(age-d*restarts, 0) / (age + d)
		if pr.pol.RestartGPUs && len(st.GPUs) > 0 {
			// The fraction of the new allocation's life that one of its
			// GPUs idles, that life estimated by how long the current one
			// has lasted (as the restart factor takes the job's age for
			// its remaining time); pricePerGPU scales it to the fitness.
			held := age
			if st.LastStart >= 0 {
				held = s.Now - st.LastStart
			}
			jb.gpuCost = d / (max(held, 0) + d)
		}
	}
	// Current allocation.
	for _, g := range st.GPUs {
		k := nodeIdx[s.Cluster.NodeOf(g).ID]
		if k < 0 {
			continue
		}
		jb.baseR++
		if n := len(jb.base); n > 0 && jb.base[n-1].node == int32(k) {
			jb.base[n-1].gpus++
			continue
		}
		jb.base = append(jb.base, pxCell{node: int32(k), gpus: 1})
	}
	slices.SortFunc(jb.base, func(a, b pxCell) int { return cmp.Compare(a.node, b.node) })
	jb.base = pxMergeCells(jb.base)
	jb.keepOK = jb.baseR > 0 && jb.baseR >= jb.minR && jb.baseR <= jb.maxR && len(jb.base) <= pr.pol.MaxNodes
	for _, cl := range jb.base {
		if pr.nodes[cl.node].typ != jb.typ || int(cl.gpus) > pr.nodes[cl.node].cap {
			jb.keepOK = false
		}
	}
	// Speedup: fitted goodput relative to the fair share, else linear.
	if h := st.Hints; h != nil && h.Fitted && h.Limits.InitBatch > 0 {
		cv := pr.curves[h]
		if cv == nil {
			cv = pxCurveFor(h)
			pr.fresh = append(pr.fresh, h)
			pr.curves[h] = cv
		}
		cv.round = pr.round
		if fair := cv.goodput(pr.fairN, pr.fairR); fair > 0 && !math.IsInf(fair, 0) && !math.IsNaN(fair) {
			jb.curve, jb.fairGP = cv, fair
		}
	}
	return jb
}

// pxMergeCells joins adjacent cells on the same node (input sorted by node).
func pxMergeCells(cs []pxCell) []pxCell {
	out := cs[:0]
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1].node == c.node {
			out[n-1].gpus += c.gpus
			continue
		}
		out = append(out, c)
	}
	return out
}

// speedup is job j's speedup on n nodes x r replicas over its fair share.
func (pr *pxProblem) speedup(j, n, r int) float64 {
	if r <= 0 {
		return 0
	}
	jb := &pr.jobs[j]
	if jb.curve == nil {
		return float64(r) / float64(pr.fairR)
	}
	if v := jb.curve.goodput(n, r) / jb.fairGP; v >= 0 && !math.IsInf(v, 0) {
		return v
	}
	return 0 // a degenerate fitted model: no speedup rather than NaN
}

// term is job j's contribution to the fitness on n nodes x r replicas,
// lower is better: the power mean of the scaled speedups is a monotone
// function of the sum of terms (see fitnessOf).
func (pr *pxProblem) term(j, n, r int, changed bool) float64 {
	s, extra := pr.speedup(j, n, r)*pr.scale, 0.0
	if changed {
		s *= pr.jobs[j].factor
		// Only GPUs that worked for the job stop working (RestartGPUs).
		extra = pr.jobs[j].gpuCost * float64(min(r, pr.jobs[j].baseR))
	}
	switch p := pr.pol.P; {
	case p == -1:
		return 1/(s+pr.eps) + extra
	case p < 0:
		return math.Pow(s+pr.eps, p) + extra
	case p > 0:
		return -math.Pow(s+pr.eps, p) + extra
	default:
		return -math.Log(math.Max(s, pr.eps)) + extra
	}
}

// rowTerm is term for a row of cells.
func (pr *pxProblem) rowTerm(j int, row []pxCell) float64 {
	r := 0
	for _, c := range row {
		r += int(c.gpus)
	}
	return pr.term(j, len(row), r, !slices.Equal(row, pr.jobs[j].base))
}

// fitnessOf turns a sum of terms over all jobs into the power mean.
func (pr *pxProblem) fitnessOf(sum float64) float64 {
	n := float64(len(pr.jobs))
	switch p := pr.pol.P; {
	case p < 0:
		return math.Pow(sum/n, 1/p)
	case p > 0:
		return math.Pow(-sum/n, 1/p)
	default:
		return math.Exp(-sum / n)
	}
}

// fitness is the artifact's first objective (maximised) for a solution.
func (pr *pxProblem) fitness(sol [][]pxCell) float64 {
	sum := 0.0
	for j, row := range sol {
		sum += pr.rowTerm(j, row)
	}
	return pr.fitnessOf(sum)
}

// utility is the artifact's second objective: total speedup over the GPUs
// of the nodes in use.
func (pr *pxProblem) utility(sol [][]pxCell, scratch []bool) float64 {
	clear(scratch)
	speed, gpus := 0.0, 0
	for j, row := range sol {
		r := 0
		for _, c := range row {
			r += int(c.gpus)
			if !scratch[c.node] {
				scratch[c.node] = true
				gpus += pr.nodes[c.node].cap
			}
		}
		speed += pr.speedup(j, len(row), r)
	}
	if gpus == 0 {
		return 0
	}
	return speed / float64(gpus)
}

// plan turns a solution into assignments, in job order. The plan's Run and
// its Nodes are pr's memory, valid until pr's next round.
func (pr *pxProblem) plan(sol [][]pxCell) engine.Plan {
	cells := 0
	for _, row := range sol {
		cells += len(row)
	}
	nodes := resize(pr.nodeGPUs, cells)
	pr.nodeGPUs = nodes
	run := pr.run[:0]
	for j, row := range sol {
		if row = pr.oneUnit(j, row); len(row) == 0 {
			continue
		}
		jb := &pr.jobs[j]
		a := engine.Assignment{Job: jb.st.Job.ID, GPUType: jb.st.Job.GPUType}
		if len(pr.types) > 1 {
			a.GPUType = pr.types[jb.typ]
		}
		a.Nodes = nodes[:len(row):len(row)]
		nodes = nodes[len(row):]
		for k, c := range row {
			a.GPUs += int(c.gpus)
			a.Nodes[k] = engine.NodeGPUs{Node: pr.nodes[c.node].id, GPUs: int(c.gpus)}
		}
		run = append(run, a)
	}
	pr.run = run
	var plan engine.Plan
	if len(run) > 0 {
		plan.Run = run
	}
	return plan
}

// oneUnit is job j's row where it lies in one site (on an edge site, on
// one server): a job never spans sites (engine.Assignment), and the
// searches, which keep a job on nodes of one type, know no sites. A row
// across sites keeps its cells in the site holding most of its GPUs (the
// first such on a tie) when they reach the job's fewest replicas; else
// the job gets nothing this round. The row kept is pr.scratch's.
func (pr *pxProblem) oneUnit(j int, row []pxCell) []pxCell {
	if len(row) < 2 {
		return row
	}
	unit := pr.nodes[row[0].node].unit
	same := true
	for _, c := range row[1:] {
		same = same && pr.nodes[c.node].unit == unit
	}
	if same {
		return row
	}
	best, most := -1, 0
	for _, c := range row {
		u, n := pr.nodes[c.node].unit, 0
		for _, d := range row {
			if pr.nodes[d.node].unit == u {
				n += int(d.gpus)
			}
		}
		if n > most {
			best, most = u, n
		}
	}
	if most < pr.jobs[j].minR {
		return nil
	}
	kept := pr.scratch.unitRow[:0]
	for _, c := range row {
		if pr.nodes[c.node].unit == best {
			kept = append(kept, c)
		}
	}
	pr.scratch.unitRow = kept
	return kept
}

// pxCurve memoises one job's best goodput per (nodes, replicas): Optimize
// scans 50 batch sizes, and the searches ask for the same shapes many
// times. Curves live in a small package-level cache keyed by the Hints
// pointer (Hints are immutable), so a job whose hints did not change since
// the last round reuses them; rows read from the cache are copied before
// they are written, so cached curves never change.
type pxCurve struct {
	fn    goodput.Function
	rows  [][]float64 // rows[r-1][n-1]; NaN = not computed
	owned []bool      // rows this round's copy may write
	round int         // the last round of its problem that read it (pxProblem.round)
}

const pxCurveMaxNodes = 64 // larger node counts are computed, not memoised

func (c *pxCurve) goodput(n, r int) float64 {
	n = min(max(n, 1), r)
	if n > pxCurveMaxNodes {
		return c.fn.Optimize(n, r).Goodput
	}
	for len(c.rows) < r {
		c.rows = append(c.rows, nil)
		c.owned = append(c.owned, false)
	}
	row := c.rows[r-1]
	if row != nil && !math.IsNaN(row[n-1]) {
		return row[n-1]
	}
	if row == nil || !c.owned[r-1] {
		fresh := make([]float64, min(r, pxCurveMaxNodes))
		for i := range fresh {
			fresh[i] = math.NaN()
		}
		copy(fresh, row)
		row, c.rows[r-1], c.owned[r-1] = fresh, fresh, true
	}
	row[n-1] = c.fn.Optimize(n, r).Goodput
	return row[n-1]
}

// pxCache holds curves by Hints pointer in two generations: a lookup
// promotes a curve into the current one, and when it outgrows pxCacheSize
// the older generation is dropped, so the cache stays bounded while jobs
// report new hints.
var pxCache struct {
	sync.Mutex
	cur, prev map[*goodput.Hints]*pxCurve
}

const pxCacheSize = 1024

func pxCurveFor(h *goodput.Hints) *pxCurve {
	pxCache.Lock()
	defer pxCache.Unlock()
	c := pxCache.cur[h]
	if c == nil {
		c = pxCache.prev[h]
	}
	if c == nil {
		return &pxCurve{fn: h.Function()}
	}
	return &pxCurve{fn: c.fn, rows: slices.Clone(c.rows), owned: make([]bool, len(c.rows))}
}

// publish stores the curves this round took from pxCache or made, for the
// other problems' rounds (a kept problem keeps its own: it publishes a
// curve once, at the round that first saw its hints). Its rows are shared
// with pxCache from then on, so the problem copies them before writing
// again.
func (pr *pxProblem) publish() {
	if len(pr.fresh) == 0 {
		return
	}
	pxCache.Lock()
	defer pxCache.Unlock()
	for _, h := range pr.fresh {
		c := pr.curves[h]
		if pxCache.cur == nil || len(pxCache.cur) >= pxCacheSize {
			pxCache.prev, pxCache.cur = pxCache.cur, make(map[*goodput.Hints]*pxCurve, pxCacheSize)
		}
		// The cache's own list of rows (the problem may replace or add
		// rows in its own); the rows themselves are shared.
		pxCache.cur[h] = &pxCurve{fn: c.fn, rows: slices.Clone(c.rows)}
		clear(c.owned)
	}
}
