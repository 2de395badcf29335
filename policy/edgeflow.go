package policy

import (
	"cmp"
	"math"
	"sort"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
)

func init() {
	register(Info{
		Name: "edgeflow",
		Summary: "EdgeFlow (Journal of Software 2025): ElasticFlow's minimum satisfactory shares on the cloud, then " +
			"offloads jobs to idle edge servers (one server each) where they still meet their deadline, reallocating at " +
			"every arrival, completion and change of edge availability",
		Knobs: efKnobs + "; offload=all: fill idle edge servers with any job that meets its deadline there " +
			"(jobs that would miss theirs first), or missing: offload only jobs that miss theirs in the cloud; " +
			"remote_gibps=0.125: remote-storage bandwidth for the cost of a cloud-edge move",
		NeedsDeadlines: true,
		Elastic:        true,
		build: func(_ Context, o Options) (engine.Policy, error) {
			f, err := buildFlow(o, true)
			return f, err
		},
	})
}

// edges are the edge servers of a snapshot that are up.
type edges struct {
	nodes []*cluster.Node
	used  map[int]bool
}

func (f *Flow) edgesOf(s *engine.Snapshot) *edges {
	e := &edges{used: map[int]bool{}}
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
// there; ok is false when it does not fit the server's memory or cannot run.
func (f *Flow) edgeEnd(s *engine.Snapshot, j *fjob, n *cluster.Node) (end float64, gpus int, ok bool) {
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
	r := rate(s, j.st, n.GPUType, g, n.GPUs)
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

// offload is EdgeFlow's step 2 around ElasticFlow's preliminary allocation:
// jobs on edge servers that are still up stay there; jobs that miss their
// deadline in the cloud but meet it on an idle edge server go there, least
// slack first; then (offload=all) idle servers take further jobs that meet
// their deadline there, waiting jobs and large cloud shares first. The
// cloud pass is redone without the offloaded jobs.
func (f *Flow) offload(s *engine.Snapshot, c cloud, e *edges, js []*fjob) {
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
			j.edge, j.edgeGPUs = n.ID, len(j.st.GPUs)
			e.used[n.ID] = true
		}
	}
	f.pass(s.Now, c.cap, js)
	type cand struct {
		j     *fjob
		slack float64
	}
	var missing, meeting []cand
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
			meeting = append(meeting, cand{j, best})
		} else {
			missing = append(missing, cand{j, best})
		}
	}
	sort.SliceStable(missing, func(a, b int) bool { return missing[a].slack < missing[b].slack })
	sort.SliceStable(meeting, func(a, b int) bool {
		x, y := meeting[a].j, meeting[b].j
		if rx, ry := len(x.st.GPUs) > 0, len(y.st.GPUs) > 0; rx != ry {
			return !rx
		}
		return cmp.Compare(x.share, y.share) > 0
	})
	order := missing
	if f.Offload == "all" {
		order = append(order, meeting...)
	}
	moved := false
	for _, cd := range order {
		j := cd.j
		// The smallest idle server where it meets its deadline.
		var best *cluster.Node
		bestG := 0
		for _, n := range e.nodes {
			if e.used[n.ID] {
				continue
			}
			if end, g, ok := f.edgeEnd(s, j, n); ok && end <= j.deadline && (best == nil || n.GPUs < best.GPUs) {
				best, bestG = n, g
			}
		}
		if best == nil {
			continue
		}
		e.used[best.ID] = true
		j.edge, j.edgeGPUs = best.ID, bestG
		moved = true
	}
	if moved {
		f.pass(s.Now, c.cap, js)
	}
	for _, j := range js {
		if j.edge >= 0 {
			end, _, _ := f.edgeEnd(s, j, &s.Cluster.Nodes[j.edge])
			j.end, j.meets, j.now = end, end <= j.deadline, 0
		}
	}
}

// assign gives the jobs on edge servers their assignments.
func (e *edges) assign(js []*fjob) []engine.Assignment {
	var out []engine.Assignment
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
		out = append(out, engine.Assignment{Job: j.st.Job.ID, GPUs: j.edgeGPUs, GPUType: n.GPUType, Site: n.Site,
			Nodes: []engine.NodeGPUs{{Node: n.ID, GPUs: j.edgeGPUs}}})
	}
	return out
}
