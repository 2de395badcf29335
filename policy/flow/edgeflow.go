package flow

import (
	"cmp"
	"math"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
)

// edgeKnobs are EdgeFlow's knobs beyond ElasticFlow's (efKnobs).
const edgeKnobs = "offload=all: jobs that would miss their deadline in the cloud go to idle edge servers " +
	"where they meet it (least slack first), then waiting jobs that meet theirs there (the paper's rule, " +
	"keeping cloud GPUs for later arrivals); short: the second part only while some job would miss in the " +
	"cloud; missing: only jobs that miss theirs in the cloud; " +
	"remote_gibps=0.125: remote-storage bandwidth for the cost of a cloud-edge move"

// edgeFlowPolicies registers the policies this file defines; Policies calls it.
func edgeFlowPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "edgeflow",
		Presets: []string{"edgeflow:offload=missing"},
		Summary: "EdgeFlow (Journal of Software 2025): ElasticFlow's minimum satisfactory shares on the cloud, then " +
			"offloads jobs to idle edge servers (one server each) where they still meet their deadline, reallocating at " +
			"every arrival, completion and change of edge availability",
		Knobs:          efKnobs + "; " + edgeKnobs,
		NeedsDeadlines: true,
		Elastic:        true,
		Defaults:       DefaultEdge,
		Build:          contract.Typed(DefaultEdge, func(_ contract.Context, k EdgeKnobs) (*Flow, error) { return NewEdgeFlow(k) }),
	})
}

// edgeCand is a job offload may move to an edge server, with the most
// slack (deadline less end) it has on one.
type edgeCand struct {
	j     *fjob
	slack float64
}

// edges are the edge servers of a snapshot that are up.
type edges struct {
	nodes []*cluster.Node
	used  map[int]bool
}

// edgesOf reads the snapshot's edge servers that are up into f's kept
// memory.
func (f *Flow) edgesOf(s *engine.Snapshot) *edges {
	e := &f.mem.edges
	e.reset()
	for _, site := range s.Cluster.Sites() {
		if site.Kind != cluster.SiteEdge {
			continue
		}
		for _, id := range site.Nodes {
			n := &s.Cluster.Nodes[id]
			if n.GPUs > 0 && s.UpGPUs(n) == n.GPUs {
				e.nodes = append(e.nodes, n)
			}
		}
	}
	return e
}

// edgeEnd predicts j's end on edge server n, with the GPUs it would use
// there; ok is false when the server is of another GPU type than j asks
// for, j does not fit the server's memory, or cannot run.
func (f *Flow) edgeEnd(s *engine.Snapshot, j *fjob, n *cluster.Node) (end float64, gpus int, ok bool) {
	if t := j.st.Job.GPUType; t != "" && t != n.GPUType {
		return 0, 0, false // the engine would refuse the plan
	}
	if need, known := perf.TrainMemGiB[j.st.Job.Model]; known && n.GPUMem > 0 && need > n.GPUMem {
		return 0, 0, false
	}
	g, _ := j.level(n.GPUs)
	if g == 0 {
		g = min(n.GPUs, j.st.Job.MaxGPUs)
	}
	if g < j.st.Job.MinGPUs {
		return 0, 0, false
	}
	r := f.rate(s, j.st, n.GPUType, g, n.GPUs, j.prog)
	if !(r > 0) {
		return 0, 0, false
	}
	delay := 0.0
	onIt := len(j.st.GPUs) > 0 && s.Cluster.NodeOf(j.st.GPUs[0]).ID == n.ID
	if !onIt {
		costs := s.Model.Costs(j.st.Job)
		switch {
		case j.st.Starts == 0:
			delay = costs.Start
		case len(j.st.GPUs) > 0:
			delay = costs.Resize + f.moveCost(j.st)
		default:
			delay = costs.Restart + f.moveCost(j.st)
		}
	}
	return s.Now + delay + j.rem/r, g, true
}

// admitTest is EdgeFlow's admission test: the cloud pass with the jobs on
// edge servers (and those admission put there this round) left out; a job
// that misses there meets its deadline if an edge server nobody holds can
// finish it in time.
func (f *Flow) admitTest(s *engine.Snapshot, c cloud, e *edges, js []*fjob) {
	f.keepEdge(s, e, js)
	f.pass(s.Now, c.cap, js)
	f.edgeOutcome(s, js)
	taken := emptied(&f.mem.taken)
	for k := range e.used {
		taken[k] = true
	}
	for _, j := range js {
		if j.meets || j.edge >= 0 || math.IsInf(j.deadline, 1) {
			continue
		}
		for _, n := range e.nodes {
			if taken[n.ID] {
				continue
			}
			if end, _, ok := f.edgeEnd(s, j, n); ok && end <= j.deadline && f.edgeRoom(s, taken, n.Site, end) {
				taken[n.ID] = true
				j.meets, j.end = true, end
				break
			}
		}
	}
}

// keepEdge marks the jobs running on edge servers that are still up: they
// stay there.
func (f *Flow) keepEdge(s *engine.Snapshot, e *edges, js []*fjob) {
	for k := range e.used {
		delete(e.used, k)
	}
	for _, j := range js {
		j.edge, j.edgeGPUs = -1, 0
		if len(j.st.GPUs) == 0 {
			continue
		}
		n := s.Cluster.NodeOf(j.st.GPUs[0])
		if n.SiteKind == cluster.SiteEdge && s.UpGPUs(n) == n.GPUs && !e.used[n.ID] {
			if f.parks {
				if end, _, ok := f.edgeEnd(s, j, n); !ok || end > j.deadline {
					continue // parked: it waits there for its cloud share
				}
			}
			j.edge, j.edgeGPUs = n.ID, len(j.st.GPUs)
			e.used[n.ID] = true
		}
	}
	if f.edgeCap != nil {
		// More jobs on a site than the forecast keeps servers for: the
		// latest deadlines go back to the cloud pass before the drop.
		held := emptied(&f.mem.siteHeld)
		for _, j := range js {
			if j.edge >= 0 {
				held[s.Cluster.Nodes[j.edge].Site]++
			}
		}
		for i := len(js) - 1; i >= 0; i-- {
			j := js[i]
			if j.edge < 0 {
				continue
			}
			site := s.Cluster.Nodes[j.edge].Site
			if held[site] > f.edgeCap(s, site, math.Inf(1)) {
				held[site]--
				delete(e.used, j.edge)
				j.edge, j.edgeGPUs = -1, 0
			}
		}
	}
	for _, j := range js {
		if j.pin < 0 || e.used[j.pin] {
			continue
		}
		if _, g, ok := f.edgeEnd(s, j, &s.Cluster.Nodes[j.pin]); ok {
			j.edge, j.edgeGPUs = j.pin, g
			e.used[j.pin] = true
		}
	}
}

// edgeAdmit admits j, a newcomer the cloud would decline, on an idle edge
// server where it meets its deadline, if that makes no admitted job miss.
// Moving admitted jobs to the edge to make room for it in the cloud was
// tried: it let in large jobs that crowded out later ones and met fewer
// deadlines (85.6% against 86.7% at the 5(b) base).
func (f *Flow) edgeAdmit(s *engine.Snapshot, c cloud, e *edges, trial []*fjob, j *fjob, missing int) bool {
	if !f.pinEdge(s, e, trial, j) {
		if f.edgeLater == nil || !f.edgeLater(s, j) {
			return false
		}
		// Admitted on a server the forecast brings up later: it waits
		// in the cloud pass, missing there, until offload moves it.
		f.admitTest(s, c, e, trial)
		return countMissing(trial, j.class) <= missing+1
	}
	f.admitTest(s, c, e, trial)
	if j.meets && countMissing(trial, j.class) <= missing {
		return true
	}
	j.pin = -1
	return false
}

// pinEdge gives j, a newcomer the cloud would decline, the smallest edge
// server that is up, held by no job of set (running or admitted there this
// round), and finishes it by its deadline. EdgeFlow's edge is where the jobs
// go that the cloud cannot finish in time: without this, admission tested
// the newcomer only in the cloud, and a job the cloud would turn away was
// declined while edge servers idled (docs/deadlines.md, 5(b)).
func (f *Flow) pinEdge(s *engine.Snapshot, e *edges, set []*fjob, j *fjob) bool {
	if math.IsInf(j.deadline, 1) {
		return false
	}
	held := emptied(&f.mem.held)
	for _, x := range set {
		if x == j {
			continue
		}
		if x.pin >= 0 {
			held[x.pin] = true
		}
		if len(x.st.GPUs) > 0 && !(f.parks && x.edge < 0) { // a parked job gives way
			held[s.Cluster.NodeOf(x.st.GPUs[0]).ID] = true
		}
	}
	var best *cluster.Node
	for _, n := range e.nodes {
		if held[n.ID] {
			continue
		}
		if end, _, ok := f.edgeEnd(s, j, n); ok && end <= j.deadline && f.edgeRoom(s, held, n.Site, end) && (best == nil || n.GPUs < best.GPUs) {
			best = n
		}
	}
	if best == nil {
		return false
	}
	j.pin = best.ID
	return true
}

// offload is EdgeFlow's step 2 around ElasticFlow's preliminary allocation:
// jobs on edge servers that are still up stay there (with those admission
// put there); jobs that miss their deadline in the cloud but meet it on an
// idle edge server go there, least slack first; then (offload=all, or short
// while some job misses) idle servers take waiting jobs that meet their
// deadline there, largest cloud shares first. The cloud pass is redone
// without the offloaded jobs.
func (f *Flow) offload(s *engine.Snapshot, c cloud, e *edges, js []*fjob) {
	f.keepEdge(s, e, js)
	f.pass(s.Now, c.cap, js)
	f.edgeOutcome(s, js)
	before := countMissing(js, math.MinInt)
	missing, meeting := f.mem.missing[:0], f.mem.meeting[:0]
	defer func() { f.mem.missing, f.mem.meeting = missing, meeting }()
	for _, j := range js {
		if j.edge >= 0 || math.IsInf(j.deadline, 1) {
			continue
		}
		best := math.Inf(-1)
		for _, n := range e.nodes {
			if end, _, ok := f.edgeEnd(s, j, n); ok && end <= j.deadline {
				best = math.Max(best, j.deadline-end)
			}
		}
		if math.IsInf(best, -1) {
			continue
		}
		if j.meets {
			// A job that meets its deadline running in the cloud stays:
			// moving it costs a checkpoint through remote storage and
			// would undo pullBack.
			if len(j.st.GPUs) == 0 {
				meeting = append(meeting, edgeCand{j, best})
			}
		} else {
			missing = append(missing, edgeCand{j, best})
		}
	}
	// Least slack first, then the largest shares (stable). The comparison
	// says "before" exactly where the less functions it replaced did.
	slices.SortStableFunc(missing, func(a, b edgeCand) int {
		if a.slack < b.slack {
			return -1
		}
		if b.slack < a.slack {
			return 1
		}
		return 0
	})
	slices.SortStableFunc(meeting, func(a, b edgeCand) int { return cmp.Compare(b.j.share, a.j.share) })
	order := missing
	if f.Offload == "all" || (f.Offload == "short" && before > 0) {
		order = append(order, meeting...)
		missing = order // its memory, grown
	}
	moved := f.mem.moved[:0]
	defer func() { f.mem.moved = moved }()
	for _, cd := range order {
		j := cd.j
		// The smallest idle server where it meets its deadline.
		var best *cluster.Node
		bestG := 0
		for _, n := range e.nodes {
			if e.used[n.ID] {
				continue
			}
			if end, g, ok := f.edgeEnd(s, j, n); ok && end <= j.deadline && f.edgeRoom(s, e.used, n.Site, end) && (best == nil || n.GPUs < best.GPUs) {
				best, bestG = n, g
			}
		}
		if best == nil {
			continue
		}
		e.used[best.ID] = true
		j.edge, j.edgeGPUs = best.ID, bestG
		moved = append(moved, j)
	}
	if len(moved) == 0 {
		return
	}
	f.pass(s.Now, c.cap, js)
	f.edgeOutcome(s, js)
	after := countMissing(js, math.MinInt)
	if after < before || (after == before && f.Offload == "all") {
		return
	}
	// Offloading made more jobs miss (a slow edge server and the moves cost
	// more than the cloud GPUs it freed) or, under short and missing, saved
	// no deadline now: keep the cloud-only allocation. offload=all keeps
	// moves that cost no deadline: they free cloud GPUs for later arrivals.
	for _, j := range moved {
		delete(e.used, j.edge)
		j.edge, j.edgeGPUs = -1, 0
	}
	f.pass(s.Now, c.cap, js)
	f.edgeOutcome(s, js)
}

// edgeRoom reports whether one more job may hold a server of the edge site
// until time until, used holding the servers already taken: always, unless
// edgeCap (tidal's forecast) says fewer servers stay up until then.
func (f *Flow) edgeRoom(s *engine.Snapshot, used map[int]bool, site string, until float64) bool {
	if f.edgeCap == nil {
		return true
	}
	k := 0
	for id, u := range used {
		if u && s.Cluster.Nodes[id].Site == site {
			k++
		}
	}
	return k+1 <= f.edgeCap(s, site, until)
}

// edgeOutcome sets the predicted end of the jobs on edge servers.
func (f *Flow) edgeOutcome(s *engine.Snapshot, js []*fjob) {
	for _, j := range js {
		if j.edge >= 0 {
			end, _, _ := f.edgeEnd(s, j, &s.Cluster.Nodes[j.edge])
			j.end, j.meets, j.now = end, end <= j.deadline, 0
		}
	}
}

// assign appends to out the assignments of the jobs on edge servers (their
// Nodes in f's kept memory).
func (f *Flow) assign(e *edges, out []engine.Assignment, js []*fjob) []engine.Assignment {
	for _, j := range js {
		if j.edge < 0 {
			continue
		}
		var n *cluster.Node
		for _, m := range e.nodes {
			if m.ID == j.edge {
				n = m
			}
		}
		if n == nil {
			continue
		}
		start := len(f.mem.nodes)
		f.mem.nodeGPUs(n.ID, j.edgeGPUs)
		out = append(out, engine.Assignment{Job: j.st.Job.ID, GPUs: j.edgeGPUs, GPUType: n.GPUType, Site: n.Site,
			Nodes: f.mem.nodesFrom(start)})
	}
	return out
}

// pullBack brings jobs on edge servers back to cloud GPUs that would
// otherwise idle, when that ends them sooner, move included: the paper keeps
// edge jobs where they are, which leaves the cloud idle once the load falls.
// Earliest deadlines first.
func (f *Flow) pullBack(s *engine.Snapshot, free int, js []*fjob) {
	for _, j := range js {
		if free <= 0 {
			return
		}
		if j.edge < 0 {
			continue
		}
		g, r := j.level(free)
		if g == 0 || r <= 0 {
			continue
		}
		edgeEnd, _, ok := f.edgeEnd(s, j, &s.Cluster.Nodes[j.edge])
		cloudEnd := s.Now + s.Model.Costs(j.st.Job).Resize + f.moveCost(j.st) + j.rem/r
		if ok && cloudEnd >= edgeEnd {
			continue
		}
		j.edge, j.edgeGPUs, j.now = -1, 0, g
		free -= g
	}
}
