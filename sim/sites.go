package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/internal/minheap"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/report"
)

// Sites configures a multi-site run: how each site's capacity changes over
// time, node faults, and what moving a job costs. A nil Sites (the default)
// keeps every GPU up and charges no migration costs.
type Sites struct {
	// Changes are capacity steps from an availability file, in time order.
	Changes []capacity.Change
	// Diurnal are generated daily waves, one per site at most.
	Diurnal []capacity.Diurnal
	// Faults inject node failures per site.
	Faults []capacity.Faults
	// Migration prices moves and checkpoints.
	Migration Migration
	// CheckpointInterval is how often a running job checkpoints, s of
	// running (default 600): a job on a node that fails loses the progress
	// made since its last checkpoint. Planned stops (preemptions, moves,
	// reclaims) checkpoint first and lose nothing.
	CheckpointInterval float64
}

// Migration prices moving a job's state, from its checkpoint size
// (perf.CheckpointGiB of its model, unless Size is set):
//
//   - between sites (cloud <-> edge): written to remote storage and read
//     back, 2 x size / RemoteGiBps seconds;
//   - inside a site (a running job resized or moved to other GPUs): copied
//     through memory, size / MemoryGiBps seconds;
//   - when inference reclaims GPUs, the job checkpoints to local storage
//     first, size / LocalGiBps seconds, and inference waits that long.
//
// These seconds come on top of the model's start, restart and resize costs.
type Migration struct {
	RemoteGiBps float64 // default 0.125 (1 Gbit/s wide-area link)
	MemoryGiBps float64 // default 10
	LocalGiBps  float64 // default 1
	Size        func(j *job.Job) float64
}

func (m *Migration) fill() error {
	for _, f := range []struct {
		name string
		v    *float64
		def  float64
	}{{"remote_gibps", &m.RemoteGiBps, 0.125}, {"memory_gibps", &m.MemoryGiBps, 10}, {"local_gibps", &m.LocalGiBps, 1}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if !(*f.v > 0) || math.IsInf(*f.v, 0) {
			return fmt.Errorf("sim: migration %s: want a finite bandwidth > 0, got %v", f.name, *f.v)
		}
	}
	return nil
}

// Filled returns m with its defaults set, or an error naming a bad
// bandwidth (a live run charges moves as the simulator does).
func (m Migration) Filled() (Migration, error) {
	err := m.fill()
	return m, err
}

func (m *Migration) size(j *job.Job) float64 {
	if m.Size != nil {
		return m.Size(j)
	}
	return perf.CheckpointGiB(j.Model)
}

// CrossSite is the seconds a move between sites costs j.
func (m *Migration) CrossSite(j *job.Job) float64 { return 2 * m.size(j) / m.RemoteGiBps }

// IntraSite is the seconds a move inside a site costs j.
func (m *Migration) IntraSite(j *job.Job) float64 { return m.size(j) / m.MemoryGiBps }

// Checkpoint is the seconds j needs to checkpoint before giving GPUs back.
func (m *Migration) Checkpoint(j *job.Job) float64 { return m.size(j) / m.LocalGiBps }

// Event kinds in the capacity queue, in their order at one instant.
const (
	evFile = iota
	evDiurnal
	evRepair
	evFail
)

type capEvent struct {
	t    float64
	kind int
	src  int // index in Changes, Diurnal, or faultGens
	k    int // diurnal sample index
}

// capFirst is the order of the capacity events (a heap:
// internal/minheap): by time, then kind, then source.
func capFirst(x, y capEvent) bool {
	if x.t != y.t {
		return x.t < y.t
	}
	if x.kind != y.kind {
		return x.kind < y.kind
	}
	return x.src < y.src
}

type faultGen struct {
	node int
	next func() (fail, repair float64)
	rep  float64
}

// sites is the simulator's multi-site state.
type sites struct {
	cfg       Sites
	c         *cluster.Cluster
	capDown   []bool // per GPU: taken by capacity (inference, busy edge server)
	faultDown []bool // per GPU: its node has failed
	queue     []capEvent
	gens      []faultGen
	siteOf    []int // node -> site index
	lastSite  []int // job index -> site it last ran in, -1 never
	upGS      []float64
	allocGS   []float64
	lastT     float64
}

func newSites(cfg Sites, c *cluster.Cluster, jobs int) (*sites, error) {
	st := &sites{cfg: cfg, c: c, capDown: make([]bool, c.TotalGPUs()), faultDown: make([]bool, c.TotalGPUs()),
		siteOf: make([]int, len(c.Nodes)), lastSite: make([]int, jobs)}
	if err := st.cfg.Migration.fill(); err != nil {
		return nil, err
	}
	if st.cfg.CheckpointInterval == 0 {
		st.cfg.CheckpointInterval = 600
	}
	if !(st.cfg.CheckpointInterval > 0) {
		return nil, fmt.Errorf("sim: checkpoint interval: want seconds > 0, got %v", st.cfg.CheckpointInterval)
	}
	for i := range st.lastSite {
		st.lastSite[i] = -1
	}
	idx := map[string]int{}
	for i, s := range c.Sites() {
		idx[s.Name] = i
		for _, n := range s.Nodes {
			st.siteOf[n] = i
		}
	}
	st.upGS = make([]float64, len(c.Sites()))
	st.allocGS = make([]float64, len(c.Sites()))
	where := func(ch capacity.Change) string {
		if ch.Source != "" {
			return fmt.Sprintf("availability %s line %d", ch.Source, ch.Line)
		}
		return "availability"
	}
	for i, ch := range cfg.Changes {
		si, ok := idx[ch.Site]
		if !ok {
			return nil, fmt.Errorf("%s field \"site\": no site %q in the cluster", where(ch), ch.Site)
		}
		s := c.Sites()[si]
		if ch.Available > len(s.Nodes) {
			return nil, fmt.Errorf("%s field \"available\": %d servers, site %s has %d", where(ch), ch.Available, s.Name, len(s.Nodes))
		}
		if ch.Inference > s.GPUs {
			return nil, fmt.Errorf("%s field \"inference\": %d GPUs, site %s has %d", where(ch), ch.Inference, s.Name, s.GPUs)
		}
		if i > 0 && ch.T < cfg.Changes[i-1].T {
			return nil, fmt.Errorf("%s field \"time\": changes must be in time order", where(ch))
		}
		minheap.Push(&st.queue, capEvent{t: ch.T, kind: evFile, src: i}, capFirst)
	}
	seen := map[string]bool{}
	for i := range st.cfg.Diurnal {
		d := &st.cfg.Diurnal[i]
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if _, ok := idx[d.Site]; !ok {
			return nil, fmt.Errorf("sim: diurnal: no site %q in the cluster", d.Site)
		}
		if seen[d.Site] {
			return nil, fmt.Errorf("sim: diurnal: two waves for site %q", d.Site)
		}
		seen[d.Site] = true
		minheap.Push(&st.queue, capEvent{t: 0, kind: evDiurnal, src: i}, capFirst)
	}
	for i := range st.cfg.Faults {
		f := &st.cfg.Faults[i]
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		si, ok := idx[f.Site]
		if !ok {
			return nil, fmt.Errorf("sim: faults: no site %q in the cluster", f.Site)
		}
		for k, n := range c.Sites()[si].Nodes {
			g := faultGen{node: n, next: f.Node(k)}
			fail, rep := g.next()
			g.rep = rep
			st.gens = append(st.gens, g)
			minheap.Push(&st.queue, capEvent{t: fail, kind: evFail, src: len(st.gens) - 1}, capFirst)
		}
	}
	return st, nil
}

// next is the time of the next capacity event, +Inf when none.
func (st *sites) next() float64 {
	if len(st.queue) == 0 {
		return math.Inf(1)
	}
	return st.queue[0].t
}

// integrate adds the GPU-seconds each site had up until t.
func (st *sites) integrate(t float64) {
	dt := t - st.lastT
	if dt <= 0 {
		return
	}
	for i, s := range st.c.Sites() {
		up := 0
		for _, n := range s.Nodes {
			nd := &st.c.Nodes[n]
			for k := 0; k < nd.GPUs; k++ {
				if g := nd.First + cluster.GPUID(k); !st.capDown[g] && !st.faultDown[g] {
					up++
				}
			}
		}
		st.upGS[i] += float64(up) * dt
	}
	st.lastT = t
}

// capacity applies the capacity events due by t and reports whether any
// GPU changed state.
func (s *simulator) capacity(t float64) (bool, error) {
	st := s.st
	if st == nil || st.next() > t {
		return false, nil
	}
	st.integrate(t)
	// Bring every running job's progress up to t: whatever stops now
	// stops with its work counted.
	for _, r := range s.live {
		s.advance(r, t)
		if err := s.eng.Report(r.st.Job.ID, r.progress); err != nil {
			return false, err
		}
	}
	changed := false
	for st.next() <= t {
		ev := minheap.Pop(&st.queue, capFirst)
		s.nEvents++
		var err error
		var did bool
		if ev.kind != evDiurnal {
			s.capacityEvent() // the churn check starts afresh (livelock.go)
		}
		switch ev.kind {
		case evFile:
			did, err = s.setSite(st.cfg.Changes[ev.src], t)
		case evDiurnal:
			d := &st.cfg.Diurnal[ev.src]
			ch := d.At(ev.k)
			site := st.c.SiteOf(d.Site)
			ch.Available = min(ch.Available, len(site.Nodes))
			ch.Inference = min(ch.Inference, site.GPUs)
			did, err = s.setSite(ch, t)
			minheap.Push(&st.queue, capEvent{t: float64(ev.k+1) * d.Step, kind: evDiurnal, src: ev.src, k: ev.k + 1}, capFirst)
		case evFail:
			g := &st.gens[ev.src]
			did, err = s.fault(g.node, true, t)
			minheap.Push(&st.queue, capEvent{t: g.rep, kind: evRepair, src: ev.src}, capFirst)
		case evRepair:
			g := &st.gens[ev.src]
			did, err = s.fault(g.node, false, t)
			fail, rep := g.next()
			g.rep = rep
			minheap.Push(&st.queue, capEvent{t: fail, kind: evFail, src: ev.src}, capFirst)
		}
		if err != nil {
			return false, err
		}
		changed = changed || did
	}
	return changed, nil
}

// setSite moves a site's capacity to what ch says.
func (s *simulator) setSite(ch capacity.Change, t float64) (bool, error) {
	st := s.st
	site := st.c.SiteOf(ch.Site)
	var want []cluster.GPUID // GPUs that should be capacity-down
	if ch.Available >= 0 {
		// Whole servers: keep down the ones down now, as far as needed,
		// then take idle servers, then the cheapest to reclaim.
		downNodes := len(site.Nodes) - ch.Available
		nodes := append([]int(nil), site.Nodes...)
		cost := s.nodeCosts(nodes)
		isDown := func(n int) bool { return st.capDown[st.c.Nodes[n].First] }
		sort.SliceStable(nodes, func(a, b int) bool {
			da, db := isDown(nodes[a]), isDown(nodes[b])
			if da != db {
				return da
			}
			return cost[nodes[a]] < cost[nodes[b]]
		})
		for _, n := range nodes[:downNodes] {
			nd := &st.c.Nodes[n]
			for k := 0; k < nd.GPUs; k++ {
				want = append(want, nd.First+cluster.GPUID(k))
			}
		}
	} else {
		var gpus []cluster.GPUID
		for _, n := range site.Nodes {
			nd := &st.c.Nodes[n]
			for k := 0; k < nd.GPUs; k++ {
				gpus = append(gpus, nd.First+cluster.GPUID(k))
			}
		}
		cost := s.gpuCosts(gpus)
		sort.SliceStable(gpus, func(a, b int) bool {
			da, db := st.capDown[gpus[a]], st.capDown[gpus[b]]
			if da != db {
				return da
			}
			return cost[gpus[a]] < cost[gpus[b]]
		})
		want = gpus[:ch.Inference]
	}
	wanted := make(map[cluster.GPUID]bool, len(want))
	for _, g := range want {
		wanted[g] = true
	}
	var up, down []cluster.GPUID
	for _, n := range site.Nodes {
		nd := &st.c.Nodes[n]
		for k := 0; k < nd.GPUs; k++ {
			g := nd.First + cluster.GPUID(k)
			switch {
			case wanted[g] && !st.capDown[g]:
				st.capDown[g] = true
				down = append(down, g)
			case !wanted[g] && st.capDown[g]:
				st.capDown[g] = false
				if !st.faultDown[g] {
					up = append(up, g)
				}
			}
		}
	}
	if err := s.setDown(up, down, t, false); err != nil {
		return false, err
	}
	return len(up)+len(down) > 0, nil
}

// fault takes node n down (a failure) or back up (repaired).
func (s *simulator) fault(n int, fail bool, t float64) (bool, error) {
	st := s.st
	nd := &st.c.Nodes[n]
	var up, down []cluster.GPUID
	for k := 0; k < nd.GPUs; k++ {
		g := nd.First + cluster.GPUID(k)
		st.faultDown[g] = fail
		switch {
		case fail:
			down = append(down, g)
		case !st.capDown[g]:
			up = append(up, g)
		}
	}
	return len(up)+len(down) > 0, s.setDown(up, down, t, fail)
}

// setDown tells the engine and stops the jobs that lost GPUs: a reclaim
// checkpoints them (inference waits for it); a fault loses their progress
// since their last periodic checkpoint.
func (s *simulator) setDown(up, down []cluster.GPUID, t float64, fault bool) error {
	if _, err := s.eng.SetDown(up, false); err != nil {
		return err
	}
	changes, err := s.eng.SetDown(down, true)
	if err != nil {
		return err
	}
	s.frag.down(s.eng, up)
	s.frag.down(s.eng, down)
	wait := 0.0
	for _, ch := range changes {
		idx := s.index(ch.Status)
		r := s.runs[idx]
		rec := &s.recs[idx]
		rec.Preemptions++
		j := ch.Status.Job
		if fault {
			rec.Faults++
			s.faultStopped()
			if r != nil && r.delay <= 0 {
				ran := t - r.began
				lost := math.Min(r.progress-r.from, r.rate*math.Mod(ran, s.st.cfg.CheckpointInterval))
				if lost > 0 {
					if err := s.eng.Rollback(j.ID, r.progress-lost); err != nil {
						return err
					}
				}
			}
		} else {
			rec.Reclaims++
			wait = math.Max(wait, s.st.cfg.Migration.Checkpoint(j))
		}
		if r != nil {
			s.stop(r)
		}
		s.frag.wait(j, 1)
	}
	if wait > 0 {
		s.out.InferenceWaits++
		s.out.InferenceWaitSeconds += wait
	}
	return nil
}

// jobCosts is the cost of reclaiming a running job's GPUs: the policy's, or
// the GPU-seconds its checkpoint takes (engine.ReclaimCosts, which tide
// kube uses too).
func (s *simulator) jobCosts() map[*engine.Status]float64 {
	return s.eng.ReclaimCosts(s.cfg.Policy, func(st *engine.Status) float64 {
		return float64(len(st.GPUs)) * s.st.cfg.Migration.Checkpoint(st.Job)
	})
}

// gpuCosts prices taking each GPU: 0 when idle, else its holder's cost
// plus one (so any idle GPU goes first).
func (s *simulator) gpuCosts(gpus []cluster.GPUID) map[cluster.GPUID]float64 {
	jc := s.jobCosts()
	out := make(map[cluster.GPUID]float64, len(gpus))
	for _, g := range gpus {
		if h := s.eng.Holder(g); h != nil {
			out[g] = 1 + jc[h]
		}
	}
	return out
}

// nodeCosts prices taking each node: the sum of its holders' costs.
func (s *simulator) nodeCosts(nodes []int) map[int]float64 {
	jc := s.jobCosts()
	out := make(map[int]float64, len(nodes))
	for _, n := range nodes {
		nd := &s.st.c.Nodes[n]
		seen := map[*engine.Status]bool{}
		for k := 0; k < nd.GPUs; k++ {
			if h := s.eng.Holder(nd.First + cluster.GPUID(k)); h != nil && !seen[h] {
				seen[h] = true
				out[n] += 1 + jc[h]
			}
		}
	}
	return out
}

// move charges a (re)start its migration cost and counts the move.
func (s *simulator) move(idx int, ch engine.Change) float64 {
	st := s.st
	if st == nil || len(ch.To) == 0 {
		return 0
	}
	site := st.siteOf[st.c.NodeOf(ch.To[0]).ID]
	prev := st.lastSite[idx]
	st.lastSite[idx] = site
	rec := &s.recs[idx]
	j := ch.Status.Job
	cost := 0.0
	switch {
	case ch.Kind == engine.Start || prev < 0:
	case prev != site:
		rec.CrossSiteMoves++
		cost = st.cfg.Migration.CrossSite(j)
	case ch.Kind == engine.Resize:
		rec.IntraSiteMoves++
		cost = st.cfg.Migration.IntraSite(j)
	}
	rec.MigrationSeconds += cost
	return cost
}

// countSite adds GPU-seconds held on r's site.
func (s *simulator) countSite(r *running, gs float64) {
	st := s.st
	if st == nil || r.site < 0 {
		return
	}
	st.allocGS[r.site] += gs
	rec := &s.recs[r.idx]
	switch st.c.Sites()[r.site].Kind {
	case cluster.SiteEdge:
		rec.EdgeGPUSeconds += gs
	case cluster.SiteInference:
		rec.InferenceGPUSeconds += gs
	}
}

// finishSites writes the per-site usage into the run.
func (s *simulator) finishSites() {
	st := s.st
	if st == nil {
		return
	}
	st.integrate(s.clk.t)
	for i, site := range st.c.Sites() {
		s.out.Sites = append(s.out.Sites, report.SiteUsage{Name: site.Name, Kind: site.Kind, GPUs: site.GPUs,
			UpGPUSeconds: st.upGS[i], AllocGPUSeconds: st.allocGS[i]})
	}
}

// anyDown reports whether some GPU is down now.
func (st *sites) anyDown() bool {
	for g := range st.capDown {
		if st.capDown[g] || st.faultDown[g] {
			return true
		}
	}
	return false
}
