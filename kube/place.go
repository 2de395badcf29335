package kube

import (
	"maps"
	"math"
	"reflect"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// workers says how many GPUs each worker of a job (engine ID) holds; jobs
// it does not know have one GPU per worker.
type workers func(id string) int

func (w workers) of(id string) int {
	if n := w(id); n > 0 {
		return n
	}
	return 1
}

// workerPolicy keeps a policy's plans to whole workers and to what the
// nodes can take, so that every policy respects per-node feasibility.
//
// An assignment of a job with g GPUs per worker is rounded down to a
// multiple of g, and dropped when that falls below the job's minimum.
//
// Then the plan is placed on trial (place, the placer the engine uses). A
// waiting job the placer leaves out only because of its node constraints
// (taints, selectors, affinity, requests, ports: it would be placed on
// GPUs alone) cannot start this round whatever else the plan does, so the
// policy plans again without it, as kube-scheduler skips a pod no node
// can take: it preempts nothing for it, and the GPUs it would have held
// go to the jobs behind it (under FIFO too). It stays queued and is
// reconsidered next round. Before that, a job the nodes of another GPU
// type could take is moved there (retype), and an elastic one is given
// the most workers, down to its minimum, that the nodes can take
// (shrink). A running job whose planned growth does not fit
// keeps the workers it has. A job left out for lack of GPUs alone
// (fragmentation) is the policy's business, as in the simulator.
type workerPolicy struct {
	inner engine.Policy
	per   workers
	place func() workerPlacer // nil: no trial placement
	// hosts says whether a worker of job (engine ID) could run on a
	// Kubernetes node now, its GPUs aside (nil: any node).
	hosts func(job, node string) bool
}

// replans bounds the policy runs per round after the first.
const replans = 3

func (p workerPolicy) Name() string { return p.inner.Name() }

// Unwrap implements engine.Wrapper, so that the policy's state
// (engine.Stateful, saved on the Lease) and its reclaim costs
// (engine.ReclaimCoster) are found through the wrapper.
func (p workerPolicy) Unwrap() engine.Policy { return p.inner }

func (p workerPolicy) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.whole(s, p.inner.Schedule(s))
	if p.place == nil || plan.Err != nil {
		return plan
	}
	pl := p.place()
	free := workerPlacer{per: p.per}
	held := make(map[string][]cluster.GPUID, len(s.Jobs))
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
		if len(st.GPUs) > 0 {
			held[st.Job.ID] = st.GPUs
		}
	}
	if !moves(s.Cluster, plan, byID) {
		return plan // every job keeps what it holds: nothing to place
	}
	out := map[string]bool{} // waiting jobs planned without
	// trial places the plan and lists the waiting jobs left out for their
	// constraints, not for lack of GPUs (they would be placed on GPUs
	// alone), or that no node could take even with every GPU free (a
	// worker of 8 GPUs when the usable nodes have fewer). The latter were
	// planned every round, as the policy counts GPUs, never placed, and
	// held the GPUs they were planned on: jobs behind them that fit waited
	// on an idle cluster.
	run := func(id string) engine.Assignment {
		return plan.Run[slices.IndexFunc(plan.Run, func(a engine.Assignment) bool { return a.Job == id })]
	}
	// valid: a's count is one its job takes (the engine drops and warns
	// of the others: the policy's mistake, not the nodes').
	valid := func(a engine.Assignment) bool {
		st := byID[a.Job]
		return st != nil && a.GPUs >= st.Job.MinGPUs && a.GPUs <= st.Job.MaxGPUs
	}
	trial := func() (map[string][]cluster.GPUID, []string) {
		placed := placeTrial(s, pl, held, plan.Run) // pairs as one (sharepairs.go)
		var blocked []string
		for _, a := range plan.Run {
			if placed[a.Job] != nil {
				continue
			}
			if st := byID[a.Job]; st != nil && len(st.GPUs) > 0 {
				continue // a running job: kept below
			}
			blocked = append(blocked, a.Job)
		}
		if len(blocked) > 0 {
			onGPUs := placeTrial(s, free, held, plan.Run)
			// Also tried on any node: the nodes the policy named for a
			// job (a.Nodes) may lack GPUs this round and have them the
			// next, and the job, left out for its constraints only
			// where they had them, was planned without one round and
			// with the next: the jobs planned beside it flipped with
			// it (see loose).
			anyGPUs, anyRoom := loose(s, pl, free, held, plan.Run, blocked)
			k := 0
			for _, id := range blocked {
				if onGPUs[id] != nil || (anyGPUs[id] != nil && anyRoom[id] == nil) ||
					(valid(run(id)) && free.Place(s.Cluster, nil, []engine.Assignment{run(id)})[id] == nil) {
					blocked[k] = id
					k++
				}
			}
			blocked = blocked[:k]
		}
		return placed, blocked
	}
	var last map[string][]cluster.GPUID // the last trial's placement
	kept := 0
	for i := 0; ; i++ {
		placed, blocked := trial()
		if len(blocked) > 0 {
			place := func() map[string][]cluster.GPUID { p, _ := trial(); return p }
			moved := retype(s, plan.Run, blocked, byID, place)
			var still []string
			for _, id := range blocked {
				if !moved[id] {
					still = append(still, id)
				}
			}
			for id := range shrink(plan.Run, still, byID, p.per, place) {
				moved[id] = true
			}
			if len(moved) > 0 {
				// The jobs blocked and not moved are planned without
				// (retype counted the moves without them), with those
				// the moves left blocked.
				var again []string
				placed, again = trial()
				for _, id := range blocked {
					if !moved[id] && !slices.Contains(again, id) {
						again = append(again, id)
					}
				}
				blocked = again
			}
		}
		if keep(&plan, byID, placed) && kept < len(plan.Run) {
			// The running jobs left out are kept where they run: the
			// room the trial gave others when it left them out is
			// theirs again, and the jobs placed in it may no longer
			// fit. Placed as it was, the plan ran on the engine's
			// placer without them: a TideJob grown into that room was
			// evicted, bound again the next round on one worker and
			// evicted again, for ever (kubetest random search, seed 583
			// at 100 steps under optimus), and a waiting one planned
			// there never ran though a smaller count fitted.
			kept++
			i--
			continue
		}
		mutualPairs(&plan)
		last = placed
		if len(blocked) == 0 {
			break
		}
		for _, id := range blocked {
			out[id] = true
		}
		if i == replans {
			run := plan.Run[:0:0]
			for _, a := range plan.Run {
				if !out[a.Job] {
					run = append(run, a)
				}
			}
			plan.Run = run
			break
		}
		sub := *s
		sub.Jobs = make([]*engine.Status, 0, len(s.Jobs))
		for _, st := range s.Jobs {
			if !out[st.Job.ID] {
				sub.Jobs = append(sub.Jobs, st)
			}
		}
		plan = p.whole(s, p.inner.Schedule(&sub))
		if plan.Err != nil {
			return plan
		}
	}
	if !countsHold(s, plan.Run, nil, byID) {
		dropWaiting(s, &plan, byID, last)
	}
	if len(out) > 0 {
		if plan.Reasons == nil {
			plan.Reasons = map[string]engine.Reason{}
		}
		for id := range out {
			r := plan.Reasons[id]
			r.Text = "no node can take its workers now (taints, node selector or affinity, requests, host ports, or the GPUs of one worker): " +
				"planned without it this round"
			plan.Reasons[id] = r
		}
	}
	return plan
}

// loose places run on trial with the nodes the policy named for the
// jobs in ids (waiting jobs the trial left out) forgotten, on GPUs alone
// (free) and as the nodes can take them (pl). A job the first places and
// the second does not is one no node can take now, whatever the policy's
// choice of node. Judged on the nodes the policy named alone, such a job
// (a TideJob whose selector matches only nodes other jobs fill) counted
// as left out for lack of GPUs when they were full, and was kept in the
// plan; when they had room, it was planned without, and the policy,
// planning without it, moved the others: EdgeFlow, asked without it, preempted a pod it had just started
// and grew an elastic TideJob onto that pod's node, then, asked with it,
// shrank the TideJob for the pod again, tide evicting and binding the
// TideJob's workers some 20 times a second (kubetest's random search,
// seed 303 under edgeflow).
func loose(s *engine.Snapshot, pl, free engine.Placer, held map[string][]cluster.GPUID, run []engine.Assignment, ids []string) (onGPUs, onRoom map[string][]cluster.GPUID) {
	untied := slices.Clone(run)
	changed := false
	for i, a := range untied {
		if a.Nodes != nil && slices.Contains(ids, a.Job) {
			untied[i].Nodes = nil
			changed = true
		}
	}
	if !changed {
		return nil, nil
	}
	return placeTrial(s, free, held, untied), placeTrial(s, pl, held, untied)
}

// retype moves the blocked jobs of run (waiting jobs no node of their
// planned type and site can take now) to another GPU type, or another
// site, where their workers fit, when their job lets them (it names no
// type). The policy chose the type and site by GPUs alone: a job whose
// pods fit only the nodes of another type (the memory it requests, a
// selector on a pool, a taint it tolerates) was planned on the first type
// every round, left out every round, and waited on an idle node of the
// other type for ever. A whole job is left untyped (or given its job's
// type), on any site, for the placer to choose; a part is tried on each
// type in turn. The blocked jobs move together, each keeping the first
// candidate that places it (place places run, as the trial does). It
// returns the jobs moved: the caller plans without every other blocked
// job, so a move is taken only where the engine's counts hold for the
// plan without them (countsHold). Checked beside the blocked jobs, which
// hold the types they could not use, a part was never moved; checked
// beside the moves of jobs that then went back to their planned type, the
// plan asked more GPUs of a type than the cluster has and the round failed.
func retype(s *engine.Snapshot, run []engine.Assignment, blocked []string, byID map[string]*engine.Status, place func() map[string][]cluster.GPUID) map[string]bool {
	idx := make(map[string]int, len(run))
	for i, a := range run {
		idx[a.Job] = i
	}
	out := map[string]bool{}       // blocked jobs not moved (yet): left out of the counts
	cands := map[string][]string{} // blocked job -> the types to try it on
	for _, id := range blocked {
		out[id] = true
		a, st := run[idx[id]], byID[id]
		if a.PackWith != "" || st == nil {
			continue
		}
		switch {
		case st.Job.GPUType != "" || !st.Job.Fractional():
			if a.GPUType != st.Job.GPUType || a.Site != "" || a.Nodes != nil {
				cands[id] = []string{st.Job.GPUType}
			}
		default:
			cands[id] = wholeTypes(s.Cluster)
		}
	}
	moved := map[string]bool{}
	for k := 0; len(cands) > 0; k++ {
		var try []string
		was := map[string]engine.Assignment{}
		for _, id := range slices.Sorted(maps.Keys(cands)) {
			if k >= len(cands[id]) {
				delete(cands, id)
				continue
			}
			a := run[idx[id]]
			b := a
			b.GPUType, b.Site, b.Nodes = cands[id][k], "", nil
			if b.GPUType == a.GPUType && a.Site == "" && a.Nodes == nil {
				continue // the plan itself
			}
			run[idx[id]] = b
			delete(out, id)
			if !countsHold(s, run, out, byID) {
				run[idx[id]], out[id] = a, true
				continue
			}
			was[id] = a
			try = append(try, id)
		}
		if len(try) == 0 {
			continue
		}
		placed := place()
		for _, id := range try {
			if placed[id] != nil {
				delete(cands, id)
				moved[id] = true
			} else {
				run[idx[id]], out[id] = was[id], true
			}
		}
	}
	return moved
}

// shrink gives the blocked elastic jobs of run (waiting jobs whose planned
// workers no node can take now, retype having found no other type) fewer
// workers, down to their minimum, on any type they may take and any site:
// each keeps the largest count that places (place places run, as the
// trial does). The policies count GPUs:
// an elastic job planned more workers than the nodes that can host them
// hold (their CPUs, a selector, an edge server alone) was planned without
// every round, and waited for ever beside nodes that could run it on
// fewer. They shrink together, a worker a step; the counts only fall, so
// the engine's counts hold. It returns the jobs shrunk; the others are
// left as planned.
func shrink(run []engine.Assignment, blocked []string, byID map[string]*engine.Status, per workers, place func() map[string][]cluster.GPUID) map[string]bool {
	idx := make(map[string]int, len(run))
	for i, a := range run {
		idx[a.Job] = i
	}
	was := map[string]engine.Assignment{}
	for _, id := range blocked {
		a, st := run[idx[id]], byID[id]
		if st == nil || a.PackWith != "" || st.Job.Fractional() || a.GPUs-per.of(id) < st.Job.MinGPUs {
			continue
		}
		was[id] = a
	}
	shrunk := map[string]bool{}
	for len(was) > 0 {
		for _, id := range slices.Sorted(maps.Keys(was)) {
			a := run[idx[id]]
			a.GPUs -= per.of(id)
			// On any type it may take and any site, for the placer to
			// choose, as retype moves a whole job: the counts only fall
			// (an untyped assignment counts toward the total alone).
			a.GPUType, a.Site, a.Nodes = byID[id].Job.GPUType, "", nil
			run[idx[id]] = a
		}
		placed := place()
		for _, id := range slices.Sorted(maps.Keys(was)) {
			switch a := run[idx[id]]; {
			case placed[id] != nil:
				shrunk[id] = true
				delete(was, id)
			case a.GPUs-per.of(id) < byID[id].Job.MinGPUs:
				run[idx[id]] = was[id] // no count places it: as planned
				delete(was, id)
			}
		}
	}
	return shrunk
}

// invalid: the engine drops a before it counts the plan (engine.mismatch):
// a GPU count outside its job's limits, or a type its job does not ask.
func invalid(a engine.Assignment, st *engine.Status) bool {
	return a.GPUs < st.Job.MinGPUs || a.GPUs > st.Job.MaxGPUs ||
		(st.Job.GPUType != "" && a.GPUType != "" && a.GPUType != st.Job.GPUType)
}

// typeOf is the GPU type a's GPUs count toward in the engine's check: its
// own, else its job's ("" for none).
func typeOf(a engine.Assignment, st *engine.Status) string {
	if a.GPUType != "" {
		return a.GPUType
	}
	return st.Job.GPUType
}

// countsHold reports whether run, without the jobs in skip, asks no more
// GPUs of each type, and in all, than the cluster has, as the engine's
// plan check counts them (engine.check, planParts): a typed whole
// assignment its GPUs toward its type, every assignment toward the total,
// a part its share (of the largest GPU memory of its type) on its type, or
// apart when untyped on a cluster of several types, each type's shares
// rounded up to whole GPUs.
func countsHold(s *engine.Snapshot, run []engine.Assignment, skip map[string]bool, byID map[string]*engine.Status) bool {
	c := s.Cluster
	types := c.GPUTypes()
	per := make([]int, len(types))
	shares := make([]float64, len(types)+1) // the last: untyped parts
	total := 0
	seen := map[string]bool{}
	for _, a := range run {
		st := byID[a.Job]
		if skip[a.Job] || (st != nil && invalid(a, st)) {
			continue // planned without, or dropped by the engine (Config.DropInvalid)
		}
		if st == nil {
			return false
		}
		seen[a.Job] = true
		if a.PackWith != "" && a.PackWith != a.Job && seen[a.PackWith] {
			continue // counted with its partner
		}
		t := typeOf(a, st)
		k := slices.Index(types, t)
		if t != "" && k < 0 {
			return false
		}
		if st.Job.Fractional() {
			if t == "" {
				k = len(types)
				if len(types) == 1 {
					k = 0
				}
			}
			mem := 0.0
			for i := range c.Nodes {
				if n := &c.Nodes[i]; n.GPUs > 0 && (t == "" || n.GPUType == t) {
					mem = max(mem, n.GPUMemGiB())
				}
			}
			share, _ := st.Job.Demand(mem) // a share alone on GPUs of unknown memory (mem 0): that share, as the engine counts it
			shares[k] += share * float64(a.GPUs)
			continue
		}
		if k >= 0 {
			per[k] += a.GPUs
		}
		total += a.GPUs
	}
	for k, sh := range shares {
		whole := int(math.Ceil(sh - 1e-9))
		if k < len(per) {
			per[k] += whole
		}
		total += whole
	}
	for k, t := range types {
		if per[k] > c.GPUsOfType(t) {
			return false
		}
	}
	return total <= c.TotalGPUs()
}

// dropWaiting takes waiting jobs out of plan, the last planned first and
// those the trial did not place before the others, until the engine's
// counts hold (countsHold). keep leaves a running job the placer would
// not move where it runs, which may be on GPUs the policy (and the trial)
// gave another job when it moved this one (a part moved to the other
// type, where the trial, counting parts as whole GPUs, found no room):
// the plan then asked more GPUs than the cluster has, and the engine
// refused it, failing the round.
func dropWaiting(s *engine.Snapshot, plan *engine.Plan, byID map[string]*engine.Status, placed map[string][]cluster.GPUID) {
	for _, unplaced := range []bool{true, false} {
		for i := len(plan.Run) - 1; i >= 0 && !countsHold(s, plan.Run, nil, byID); i-- {
			a := plan.Run[i]
			if st := byID[a.Job]; (placed[a.Job] == nil) != unplaced || st == nil || len(st.GPUs) > 0 {
				continue
			}
			plan.Run = slices.Delete(slices.Clone(plan.Run), i, i+1)
			if plan.Reasons == nil {
				plan.Reasons = map[string]engine.Reason{}
			}
			plan.Reasons[a.Job] = engine.Reason{Text: "planned on GPUs a running job keeps (the placer could not move it where the plan moved it): waits this round"}
		}
	}
	mutualPairs(plan)
}

// moves: the plan starts, grows or shrinks a job, or moves one to
// another GPU type, site, node shape or partner (as the engine tells a
// running job's assignment unchanged). A job moved to another type with
// its count unchanged was taken for one that stays: the plan went to the
// engine untried and, where the type lacked the GPUs, the engine refused
// it and the round failed (random operations search, seed 3121 under
// fifo-perf).
func moves(c *cluster.Cluster, plan engine.Plan, byID map[string]*engine.Status) bool {
	for _, a := range plan.Run {
		st := byID[a.Job]
		if st == nil || len(st.GPUs) != a.GPUs {
			return true
		}
		if len(st.GPUs) == 0 {
			continue
		}
		n := c.NodeOf(st.GPUs[0])
		if (a.GPUType != "" && n.GPUType != a.GPUType) || (a.Site != "" && n.Site != a.Site) || !a.Fits(c, st.GPUs) || a.PackWith != st.PackedWith {
			return true
		}
	}
	return false
}

// keep makes each running job the placer left out (its planned growth,
// or its move to another type or site, does not fit) keep the workers it
// holds, no more than the plan gives it: the placer keeps a shrinking
// job's first workers where they run. Kept whole, a job the plan both
// moved and shrank held more GPUs than the policy counted it for, and its
// tenant more than its quota (random operations search, seed 270 under
// deepboot: 3 GPUs kept of the 1 planned on an edge site, 9 held on a
// quota of 8).
func keep(plan *engine.Plan, byID map[string]*engine.Status, placed map[string][]cluster.GPUID) (changed bool) {
	for i, a := range plan.Run {
		st := byID[a.Job]
		if placed[a.Job] != nil || st == nil || len(st.GPUs) == 0 || len(st.GPUs) < st.Job.MinGPUs {
			continue
		}
		n := len(st.GPUs)
		if a.GPUs >= st.Job.MinGPUs && a.GPUs < n {
			n = a.GPUs
		}
		k := engine.Assignment{Job: a.Job, GPUs: n, GPUType: st.Job.GPUType}
		changed = changed || !reflect.DeepEqual(k, a)
		plan.Run[i] = k
	}
	return changed
}

// ownTypes gives each untyped assignment of a job that names a GPU type
// that type (keep gives its own the same way). The engine counts such an
// assignment toward its job's type, but the placer, which sees
// assignments alone, took it for a job of any type and placed it on the
// first type with room: a V100 TideJob kept where it ran was placed on an
// A100 when its GPU went to its former pair partner (random operations
// search, seed 258 under gandiva:pack=true).
func ownTypes(plan *engine.Plan, byID map[string]*engine.Status) {
	for i, a := range plan.Run {
		if st := byID[a.Job]; st != nil && a.GPUType == "" && st.Job.GPUType != "" {
			plan.Run[i].GPUType = st.Job.GPUType
		}
	}
}

// whole rounds a plan's assignments down to whole workers.
func (p workerPolicy) whole(s *engine.Snapshot, plan engine.Plan) engine.Plan {
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	run := plan.Run[:0:0]
	for _, a := range plan.Run {
		g := p.per.of(a.Job)
		if r := a.GPUs - a.GPUs%g; r != a.GPUs {
			if st := byID[a.Job]; st == nil || r < st.Job.MinGPUs {
				continue
			}
			a.GPUs, a.Nodes = r, nil
		}
		run = append(run, a)
	}
	plan.Run = run
	typeParts(s, byID, &plan, p.hosts) // mig.go
	ownTypes(&plan, byID)
	return plan
}

// nodeFit says whether workers of a job fit on a node beyond its GPUs
// (kube-scheduler's filters: taints, affinity, requests, ports), and
// counts what placed workers take. One is made per placement.
type nodeFit interface {
	// fits: would k more workers of job fit on node?
	fits(job, node string, k int) bool
	// take and give count k workers of job on node, or stop counting them.
	take(job, node string, k int)
	give(job, node string, k int)
}

// workerPlacer places jobs worker by worker: each worker's GPUs on one
// node, as a pod needs. A job keeps the workers it holds when its count is
// unchanged, keeps a prefix of them when it shrinks, and gets new workers
// beside its old ones when it grows (an elastic job is resized without
// restarting its surviving workers). New workers go to the node of the
// job's type with the fewest free GPUs that still fits one (best fit, which
// keeps whole nodes free for large workers), preferring nodes the job
// already uses. A job whose workers do not all fit is left out. New
// workers go only where room says they fit (nil: the GPUs decide alone);
// kept workers stay where they run.
type workerPlacer struct {
	per  workers
	room func() nodeFit
	// parts is the room the engine places parts in (PartRoom): every
	// live pod counted; nil: GPUs alone decide.
	parts func() nodeFit
}

func (workerPlacer) Name() string { return "workers" }

// PartRoom implements engine.PartRoom: the engine places parts itself,
// and their pods must fit their nodes as whole workers do. Placed by GPU
// room alone, a part with a selector, a taint to tolerate or a request of
// CPU was planned on a node that could not take it and waited there for
// ever, its GPU held.
func (p workerPlacer) PartRoom(c *cluster.Cluster) engine.NodeRoom {
	if p.parts == nil {
		return nil
	}
	return partRoom{c: c, fit: p.parts()}
}

// partRoom is a nodeFit by the engine's node indices.
type partRoom struct {
	c   *cluster.Cluster
	fit nodeFit
}

// Fits: k more parts of job fit on node. Never on a node of MIG slices:
// a part is a share of a whole GPU (a slice is a device of its own, which
// a pod asks for by its resource), and bound there it took the node's GPU
// index of the slice's number, a whole GPU other pods hold (mig.go).
func (r partRoom) Fits(job string, node, k int) bool {
	n := &r.c.Nodes[node]
	return !isMIGType(n.GPUType) && r.fit.fits(job, n.Name, k)
}

func (r partRoom) Take(job string, node, k int) { r.fit.take(job, r.c.Nodes[node].Name, k) }

func (p workerPlacer) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	used := make([]bool, c.TotalGPUs())
	free := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		free[i] = n.GPUs
	}
	idx := newFreeIndex(c, free)
	take := func(g cluster.GPUID) {
		used[g] = true
		i := c.NodeOf(g).ID
		free[i]--
		idx.move(i, free[i])
	}
	out := make(map[string][]cluster.GPUID, len(run))
	placed := make([]int, len(c.Nodes)) // fitType's scratch, all zero between calls
	var room nodeFit = fitsAll{}
	if p.room != nil {
		room = p.room()
	}
	// Pass 1: jobs keep what they hold, up to their planned count.
	for _, a := range run {
		h := held[a.Job]
		if len(h) == 0 || (a.GPUType != "" && c.NodeOf(h[0]).GPUType != a.GPUType) || (a.Site != "" && c.NodeOf(h[0]).Site != a.Site) {
			continue // a move to another type or site: it keeps nothing
		}
		if len(h) == a.GPUs && !a.Fits(c, h) {
			continue
		}
		k := min(len(h), a.GPUs)
		k -= k % p.per.of(a.Job)
		keep := append([]cluster.GPUID(nil), h[:k]...)
		for _, g := range keep {
			take(g)
		}
		for node, n := range workersOn(c, keep, p.per.of(a.Job)) {
			room.take(a.Job, node, n)
		}
		out[a.Job] = keep
	}
	// Pass 2: in plan order, add the workers each job lacks.
	for _, a := range run {
		have := out[a.Job]
		if len(have) == a.GPUs {
			continue
		}
		g := p.per.of(a.Job)
		typ := a.GPUType
		if typ == "" && len(have) > 0 {
			typ = c.NodeOf(have[0]).GPUType
		}
		add := p.fit(c, free, placed, used, a, typ, have, g, room, idx)
		if add == nil {
			for _, x := range have { // the job waits: what it kept is free again
				used[x] = false
				i := c.NodeOf(x).ID
				free[i]++
				idx.move(i, free[i])
			}
			for node, n := range workersOn(c, have, g) {
				room.give(a.Job, node, n)
			}
			delete(out, a.Job)
			continue
		}
		for _, x := range add {
			take(x)
		}
		for node, n := range workersOn(c, add, g) {
			room.take(a.Job, node, n)
		}
		out[a.Job] = append(have, add...)
	}
	return out
}

// fit picks GPUs for the workers a job lacks, or nil when they do not all
// fit. With no type given it tries each of the cluster's types in turn, so
// a job's workers share a type; on a cluster of several sites it tries
// the sites the job may use in turn (siteNodes), so they share a site.
func (p workerPlacer) fit(c *cluster.Cluster, free, placed []int, used []bool, a engine.Assignment, typ string, have []cluster.GPUID, g int, room nodeFit, idx *freeIndex) []cluster.GPUID {
	types := []string{typ}
	if typ == "" {
		types = wholeTypes(c) // an untyped job takes whole GPUs, not MIG slices (mig.go)
	}
	for _, in := range siteNodes(c, free, a, have, a.GPUs-len(have)) { // sites.go
		for _, t := range types {
			if add := p.fitType(c, free, placed, used, a, t, have, g, room, in, idx); add != nil {
				return add
			}
		}
	}
	return nil
}

// fitType places the workers a job lacks on nodes of type t that in
// accepts (nil: any). placed is scratch of one int per node, all zero, and
// left so: it counts the new workers per node while the job is placed (a
// node's free GPUs are then free less g per new worker), which spares a
// copy of free per job, the bulk of a drain's allocations when thousands
// of jobs wait. idx files the nodes under free less g per new worker; a
// new job with no node set by the plan or its site asks it for the best
// node, the others scan the nodes (their choice depends on more than the
// free GPUs).
func (p workerPlacer) fitType(c *cluster.Cluster, free, placed []int, used []bool, a engine.Assignment, t string, have []cluster.GPUID, g int, room nodeFit, in func(int) bool, idx *freeIndex) []cluster.GPUID {
	need := (a.GPUs - len(have)) / g
	var mine map[int]bool // nil when the job holds nothing
	if len(have) > 0 {
		mine = map[int]bool{}
		for _, x := range have {
			mine[c.NodeOf(x).ID] = true
		}
	}
	var exact map[int]int // node -> workers the plan's shape wants there
	if len(a.Nodes) > 0 {
		exact = map[int]int{}
		for _, ng := range a.Nodes {
			exact[ng.Node] += ng.GPUs / g
		}
	}
	var nodes []int
	defer func() {
		for _, i := range nodes {
			placed[i] = 0
			idx.move(i, free[i])
		}
	}()
	fits := func(i int) bool { return room.fits(a.Job, c.Nodes[i].Name, placed[i]+1) }
	for ; need > 0; need-- {
		best, bestFree := -1, 0
		if mine == nil && exact == nil && in == nil {
			best = idx.best(t, g, fits)
		} else {
			for i := range c.Nodes {
				n := &c.Nodes[i]
				gpus := free[i] - g*placed[i]
				if gpus < g || n.GPUType != t || (exact != nil && exact[i] == 0) || (in != nil && !in(i)) {
					continue
				}
				if best >= 0 && !better(mine[i], gpus, mine[best], bestFree) {
					continue
				}
				if fits(i) {
					best, bestFree = i, gpus
				}
			}
		}
		if best < 0 {
			return nil
		}
		placed[best]++
		idx.move(best, free[best]-g*placed[best])
		if exact != nil {
			exact[best]--
		}
		nodes = append(nodes, best)
	}
	add := make([]cluster.GPUID, 0, len(nodes)*g)
	for _, i := range nodes {
		n := &c.Nodes[i]
		k := 0
		for x := n.First; x < n.First+cluster.GPUID(n.GPUs) && k < g; x++ {
			if !used[x] && !slices.Contains(add, x) {
				add = append(add, x)
				k++
			}
		}
	}
	return add
}

// better: a node the job already uses, then the fewest free GPUs.
func better(mineA bool, freeA int, mineB bool, freeB int) bool {
	if mineA != mineB {
		return mineA
	}
	return freeA < freeB
}

// workersOn counts a job's workers per node from its GPUs.
func workersOn(c *cluster.Cluster, gpus []cluster.GPUID, per int) map[string]int {
	out := map[string]int{}
	for _, g := range gpus {
		out[c.NodeOf(g).Name]++
	}
	for n := range out {
		out[n] /= max(1, per)
	}
	return out
}

// fitsAll is the nodeFit of a placer without one: the GPUs decide.
type fitsAll struct{}

func (fitsAll) fits(string, string, int) bool { return true }
func (fitsAll) take(string, string, int)      {}
func (fitsAll) give(string, string, int)      {}
