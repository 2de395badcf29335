package engine

import (
	"fmt"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// downJob is the name under which unavailable GPUs are shown to the placer:
// as GPUs held by a job whose assignment is unchanged, which every placer
// must leave where they are. No real job can have this ID (IDs are
// printable).
const downJob = "\x00down"

// SetDown marks GPUs as unavailable to training (down) or available again.
// A job holding a GPU that goes down loses all its GPUs at once: the returned
// changes are its preemptions, for the executor to apply (inference always
// wins, so this does not wait for a round). GPUs already in the wanted state
// are ignored.
func (e *Engine) SetDown(gpus []cluster.GPUID, down bool) ([]Change, error) {
	n := e.cfg.Cluster.TotalGPUs()
	next := make([]bool, n)
	copy(next, e.down)
	changed := false
	for _, g := range gpus {
		if g < 0 || int(g) >= n {
			return nil, fmt.Errorf("set down: GPU %d does not exist", g)
		}
		if next[g] != down {
			next[g] = down
			changed = true
		}
	}
	if !changed {
		return nil, nil
	}
	now := e.cfg.Clock.Now()
	e.account(now)
	e.down, e.nDown = next, 0
	for _, d := range next {
		if d {
			e.nDown++
		}
	}
	if !down {
		return nil, nil
	}
	var changes []Change
	for _, st := range e.list() {
		hit := false
		for _, g := range st.GPUs {
			hit = hit || next[g]
		}
		if !hit {
			continue
		}
		changes = append(changes, Change{Kind: Preempt, Status: st, From: st.GPUs})
		e.release(st)
		st.State, st.LastStop = job.Preempted, now
		st.Preemptions++
	}
	return changes, nil
}

// IsDown reports whether GPU g is unavailable to training.
func (e *Engine) IsDown(g cluster.GPUID) bool { return e.down != nil && e.down[g] }

// Holder returns the job holding GPU g, or nil: its whole-GPU holder (the
// first of a packed pair), else the first of its fractional jobs
// (Sharers lists them all).
func (e *Engine) Holder(g cluster.GPUID) *Status {
	if o := e.owner[g]; o != nil || e.parts == nil || len(e.parts[g].holders) == 0 {
		return o
	}
	return e.parts[g].holders[0]
}

// downView is the Down slice snapshots share: nil when every GPU is up.
func (e *Engine) downView() []bool {
	if e.nDown == 0 {
		return nil
	}
	return e.down
}

// place runs the placer with the unavailable GPUs shown as held by downJob.
func (e *Engine) place(held map[string][]cluster.GPUID, run []Assignment) map[string][]cluster.GPUID {
	if e.nDown == 0 {
		return e.callPlacer(held, run)
	}
	var gs []cluster.GPUID
	for g, d := range e.down {
		if d {
			gs = append(gs, cluster.GPUID(g))
		}
	}
	held[downJob] = gs
	all := append([]Assignment{{Job: downJob, GPUs: len(gs)}}, run...)
	placed := e.callPlacer(held, all)
	delete(placed, downJob)
	delete(held, downJob)
	return placed
}

// checkSites enforces the site rules no placer may break: a job's GPUs lie
// in one site (the assignment's, when it names one), are all up, and on an
// edge site are on one server.
func (e *Engine) checkSites(a Assignment, gpus []cluster.GPUID) error {
	if len(gpus) == 0 {
		return nil
	}
	c := e.cfg.Cluster
	first := c.NodeOf(gpus[0])
	if a.Site != "" && first.Site != a.Site {
		return fmt.Errorf("job %s planned on site %s, placed on %s", a.Job, a.Site, first.Site)
	}
	for _, g := range gpus {
		n := c.NodeOf(g)
		if n.Site != first.Site {
			return fmt.Errorf("job %s placed across sites %s and %s", a.Job, first.Site, n.Site)
		}
		if n.SiteKind == cluster.SiteEdge && n.ID != first.ID {
			return fmt.Errorf("job %s placed on two edge servers (%s, %s); an edge job uses one", a.Job, first.Name, n.Name)
		}
		if e.IsDown(g) {
			return fmt.Errorf("job %s placed on GPU %d, which is down", a.Job, g)
		}
	}
	return nil
}

// decline applies plan.Decline: each named job must be waiting and never
// started; it becomes declined and leaves the active set.
func (e *Engine) decline(p Plan, now float64) ([]Change, error) {
	out := e.scratch.changes[:0] // the round's changes start here (Schedule)
	if len(p.Decline) == 0 {
		return out, nil
	}
	for _, id := range p.Decline {
		st := e.jobs[id]
		if st == nil || st.State.Terminal() {
			return nil, fmt.Errorf("plan declines job %q, which is not active", id)
		}
		if st.Starts > 0 {
			return nil, fmt.Errorf("plan declines job %s, which has already run", id)
		}
		if st.checked == e.rounds {
			return nil, fmt.Errorf("plan both runs and declines job %s", id)
		}
		e.accountJob(st, now)
		e.touch(st)
		e.endReason(st)
		st.State, st.Finish = job.Declined, -1
		for i, a := range e.active {
			if a == st {
				e.active = append(e.active[:i], e.active[i+1:]...)
				e.left(st)
				break
			}
		}
		out = append(out, Change{Kind: Decline, Status: st})
	}
	return out, nil
}

// Up reports whether GPU g is available to training.
func (s *Snapshot) Up(g cluster.GPUID) bool { return s.Down == nil || !s.Down[g] }

// UpGPUs counts the GPUs of node n that are available to training.
func (s *Snapshot) UpGPUs(n *cluster.Node) int {
	if s.Down == nil {
		return n.GPUs
	}
	k := 0
	for i := 0; i < n.GPUs; i++ {
		if !s.Down[n.First+cluster.GPUID(i)] {
			k++
		}
	}
	return k
}

// Available counts the GPUs available to training in site ("" = every
// site) of type t ("" = every type).
func (s *Snapshot) Available(site, t string) int {
	if s.Down == nil && site == "" {
		return s.Cluster.GPUsOfType(t) // every GPU is up: no need to walk the nodes
	}
	k := 0
	for i := range s.Cluster.Nodes {
		n := &s.Cluster.Nodes[i]
		if (site == "" || n.Site == site) && (t == "" || n.GPUType == t) {
			k += s.UpGPUs(n)
		}
	}
	return k
}

// Rollback sets a waiting job's progress back to p (a job that lost the work
// since its last checkpoint when its node failed). Progress only goes down
// here; Report only raises it.
func (e *Engine) Rollback(id string, p float64) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("rollback: unknown job %s", id)
	}
	if len(st.GPUs) > 0 {
		return fmt.Errorf("rollback: job %s is running", id)
	}
	if p >= 0 && p < st.Progress {
		st.Progress = p
	}
	return nil
}

// ReclaimCoster is an optional Policy interface: when a site's capacity
// drops and GPUs must be taken from running jobs, the executor takes them
// from the jobs of lowest cost first (idle GPUs go before any job's).
// Without it, the cost is the GPU-seconds the job loses to its checkpoint.
type ReclaimCoster interface {
	ReclaimCost(s *Snapshot, st *Status) float64
}

// Largest is the most GPUs of type t ("" = any) one job could hold now:
// the up GPUs of one site, or of one server on an edge site.
func (s *Snapshot) Largest(t string) int {
	best := 0
	for _, site := range s.Cluster.Sites() {
		k := 0
		for _, id := range site.Nodes {
			n := &s.Cluster.Nodes[id]
			if t != "" && n.GPUType != t {
				continue
			}
			if site.Kind == cluster.SiteEdge {
				best = max(best, s.UpGPUs(n))
			} else {
				k += s.UpGPUs(n)
			}
		}
		best = max(best, k)
	}
	return best
}
