package flow

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Jobs pinned to a GPU type the deadline plan does not cover.
//
// ElasticFlow and EdgeFlow (and tidal's deadline planner, which is
// EdgeFlow) plan the cloud as one GPU type, the one with the most GPUs
// (cloudOf): the papers' clusters are homogeneous, and minimum
// satisfactory shares, admission and spare GPUs are counts of
// interchangeable GPUs. A job that
// asks for another type (Job.GPUType: a trace's gpu_type, tide submit
// --gpu-type, a TideJob's spec.gpuType) can be given none of them: the
// engine refuses a plan that gives a job GPUs of a type it does not ask
// for, and refuses the whole plan, so one such job stopped every job. Such
// a job is kept out of the plan (the jobs that ask for the planned type, or
// for none, are planned exactly as before):
//
//   - With a deadline, while admission is on and it is up for admission
//     (it never ran or, tidal, was never admitted), it is declined at
//     once: the plan cannot promise it its deadline, and its owner learns
//     so at submission rather than when the deadline passes.
//   - Otherwise (no deadline, admit=false, or it ran already, which the
//     engine cannot decline) it runs on GPUs of its own type that the
//     plan leaves idle on the cloud sites, greedily in the order the jobs
//     arrived, each the largest of its power-of-two counts that fits, so
//     that it never waits for ever on GPUs nobody plans. Edge servers are
//     left to the deadline plan: a job there holds a whole server, and
//     EdgeFlow keeps a job where it runs.

// asksOther reports whether st asks for a GPU type other than the one
// cloud c is planned on ("" asks for none).
func asksOther(st *engine.Status, c cloud) bool {
	return st.Job.GPUType != "" && st.Job.GPUType != c.gpuType
}

// splitOther returns js (in order) without the jobs that ask for another
// type (fjob.other), and those, in js' order: js itself and nil when there
// are none, so a round without such jobs runs as it did before them. The
// first is js' memory, the second f's kept memory.
func (f *Flow) splitOther(js []*fjob) (planned, other []*fjob) {
	if !slices.ContainsFunc(js, func(j *fjob) bool { return j.other }) {
		return js, nil
	}
	other = f.mem.other[:0]
	planned = js[:0]
	for _, j := range js {
		if j.other {
			other = append(other, j)
		} else {
			planned = append(planned, j)
		}
	}
	f.mem.other = other
	return planned, other
}

// declinesOther reports whether j, a job of another type, is declined: it
// has a deadline and is up for admission, which is on.
func (f *Flow) declinesOther(j *fjob) bool {
	return f.Admit && j.fresh && !math.IsInf(j.deadline, 1)
}

// declineOther appends to declined the jobs of other that declinesOther
// declines, and returns it.
func (f *Flow) declineOther(other, declined []*fjob) []*fjob {
	for _, j := range other {
		if f.declinesOther(j) {
			declined = append(declined, j)
		}
	}
	f.mem.declined = declined
	return declined
}

// runOther appends to run, the plan's assignments so far, the jobs of
// other that are not declined, on GPUs of their own type that no
// assignment of run holds, on the cloud sites (the site a job runs on
// first, then in the cluster's order): in the order they arrived, each
// the largest of its levels on that type (the power-of-two counts whose
// throughput still grows) that fits, placed as buddy places. It sets each
// placed job's now to its GPUs, and leaves each cloud node's GPUs idle
// after it in f.mem.free (idleOf).
func (f *Flow) runOther(s *engine.Snapshot, run []engine.Assignment, other []*fjob) []engine.Assignment {
	m := &f.mem
	free := slices.Grow(m.free[:0], len(s.Cluster.Nodes))[:len(s.Cluster.Nodes)]
	clear(free)
	m.free = free
	for id := range s.Cluster.Nodes {
		if n := &s.Cluster.Nodes[id]; n.SiteKind == cluster.SiteCloud {
			free[id] = s.UpGPUs(n)
		}
	}
	for _, a := range run {
		for _, n := range a.Nodes {
			free[n.Node] = max(free[n.Node]-n.GPUs, 0)
		}
	}
	js := m.otherRun[:0]
	for _, j := range other {
		if !f.declinesOther(j) {
			js = append(js, j)
		}
	}
	m.otherRun = js
	// The order they arrived: the snapshot's (submission time, then ID).
	slices.SortFunc(js, func(a, b *fjob) int { return cmp.Compare(a.at, b.at) })
	for _, j := range js {
		cur := ""
		if len(j.st.GPUs) > 0 {
			cur = s.Cluster.NodeOf(j.st.GPUs[0]).Site
		}
		if site := s.Cluster.SiteOf(cur); site != nil && site.Kind == cluster.SiteCloud {
			if a, ok := f.fitOther(s, site, free, j); ok {
				run = append(run, a)
				continue
			}
		}
		sites := s.Cluster.Sites()
		for i := range sites {
			if site := &sites[i]; site.Kind != cluster.SiteCloud || site.Name == cur {
				continue
			}
			if a, ok := f.fitOther(s, &sites[i], free, j); ok {
				run = append(run, a)
				break
			}
		}
	}
	return run
}

// fitOther gives j, a job of another type, the largest of its levels on
// its type in site that fits in the free GPUs (by node ID), taking them.
// j's levels become those on its type there.
func (f *Flow) fitOther(s *engine.Snapshot, site *cluster.Site, free []int, j *fjob) (engine.Assignment, bool) {
	m := &f.mem
	t := j.st.Job.GPUType
	oc := cloud{site: site.Name, gpuType: t, nodes: m.otherNodes[:0]}
	up, idle := 0, 0
	for _, id := range site.Nodes {
		if n := &s.Cluster.Nodes[id]; n.GPUType == t {
			oc.nodes = append(oc.nodes, id)
			oc.perNode = max(oc.perNode, n.GPUs)
			up += s.UpGPUs(n)
			idle += free[id]
		}
	}
	m.otherNodes = oc.nodes
	// Its levels on its own type, as fillJob's on the cloud's, up to the
	// GPUs of that type up here (not those idle: its levels stay the same
	// from round to round while the others come and go).
	j.levels, j.rates = j.levels[:0], j.rates[:0]
	best := 0.0
	for g := 1; g <= min(j.st.Job.MaxGPUs, up); g *= 2 {
		if g < j.st.Job.MinGPUs {
			continue
		}
		if r := f.rate(s, j.st, t, g, oc.perNode, j.prog); r > best*(1+1e-9) {
			j.levels = append(j.levels, g)
			j.rates = append(j.rates, r)
			best = r
		}
	}
	if n := oddSize(j.st.Job.MinGPUs, min(j.st.Job.MaxGPUs, up)); n > 0 {
		j.levels = append(j.levels, n)
		j.rates = append(j.rates, f.rate(s, j.st, t, n, oc.perNode, j.prog))
	}
	for g, _ := j.level(idle); g > 0; g, _ = j.level(g - 1) {
		if nodes := f.fit(s, oc, free, j.st, g); nodes != nil {
			j.now = g
			return engine.Assignment{Job: j.st.Job.ID, GPUs: g, GPUType: t, Site: site.Name, Nodes: nodes}, true
		}
	}
	return engine.Assignment{}, false
}

// idleOf counts the GPUs of type t on the cloud sites that the plan leaves
// idle (runOther's f.mem.free).
func (f *Flow) idleOf(s *engine.Snapshot, t string) int {
	k := 0
	for id, n := range f.mem.free {
		if nd := &s.Cluster.Nodes[id]; n > 0 && nd.GPUType == t && nd.SiteKind == cluster.SiteCloud {
			k += n
		}
	}
	return k
}

// appendOther appends to b the standing of j, a job of another type, in
// the terms of the plan: the type planned and the one it asks for, and
// what follows from them (its decline, or its place outside the plan).
func (f *Flow) appendOther(b []byte, s *engine.Snapshot, c cloud, j *fjob) []byte {
	t := j.st.Job.GPUType
	if f.declinesOther(j) {
		b = append(b, "deadline t="...)
		b = strconv.AppendFloat(b, j.deadline, 'f', 0, 64)
		b = append(b, " s: the policy plans the cloud's "...)
		b = append(b, c.gpuType...)
		b = append(b, " GPUs, the job asks for "...)
		return append(b, t...)
	}
	b = append(b, "asks for "...)
	b = append(b, t...)
	b = append(b, " GPUs, the policy plans the cloud's "...)
	b = append(b, c.gpuType...)
	b = append(b, ": jobs of other types run on idle GPUs of their type, in the order they arrived ("...)
	b = strconv.AppendInt(b, int64(f.idleOf(s, t)), 10)
	b = append(b, ' ')
	b = append(b, t...)
	return append(b, " idle)"...)
}

// otherReasons gives each job of other that runs outside the plan with no
// fewer GPUs than it held (PlanTo gives no reason to a job that runs on as
// many) its reason: the GPUs it runs on and appendOther's terms.
func (f *Flow) otherReasons(s *engine.Snapshot, plan *engine.Plan, c cloud, other []*fjob) {
	m := &f.mem
	for _, j := range other {
		if j.now == 0 || len(j.st.GPUs) > j.now {
			continue
		}
		b := append(m.otherBuf[:0], "runs on "...)
		b = strconv.AppendInt(b, int64(j.now), 10)
		b = append(b, ' ')
		b = append(b, j.st.Job.GPUType...)
		b = append(b, " GPUs the deadline plan leaves idle; "...)
		b = f.appendOther(b, s, c, j)
		m.otherBuf = b
		if f.reasonTo != nil {
			f.reasonTo(j.st, b, engine.Reason{})
			continue
		}
		if plan.Reasons == nil {
			plan.Reasons = emptied(&m.otherReasons)
		}
		plan.Reasons[j.st.Job.ID] = engine.Reason{Text: string(b)}
	}
}
