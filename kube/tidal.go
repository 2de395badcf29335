package kube

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Tidal capacity (docs/kubernetes.md, "Tidal capacity"). On edge and
// inference sites tide lends training the GPUs their owners leave idle,
// and gives them back when the owners want them, as the simulator does
// with a scenario's capacity timeline:
//
//   - GPUs held by pods tide does not schedule (an inference Deployment's
//     replicas, an edge owner's work) are down to training: the node
//     stays in the engine's cluster with those GPUs unavailable
//     (engine.SetDown), so capacity that comes and goes changes no
//     engine state but the down set, and policies see it as in the
//     simulator (Snapshot.Available, Largest).
//   - A pod tide does not schedule that is pending for GPUs a node of
//     such a site could give it (its selector, affinity, taints and
//     allocatable allow it) gets them: tide takes down GPUs of the node
//     where that costs least (idle ones first, then those of the jobs the
//     policy's ReclaimCost names cheapest: engine.ReclaimCosts, the
//     simulator's order). Jobs holding them are preempted and their
//     workers evicted with the grace period (--grace: the checkpoint's
//     time); the other scheduler binds the pod once they are gone. The
//     time from the pod's creation to its binding is its inference wait,
//     counted when tide had to take GPUs from training for it.
//   - An edge owner takes a server back with the label or taint
//     SiteLabels.TakenBack (a NoSchedule taint: NoExecute would kill the
//     workers without their grace, a fault rather than a reclaim): all its
//     GPUs go down and its workers move off with a checkpoint, as above.
//     Removing the label gives the server back to training.
//
// Metrics: tide_reclaims_total (jobs preempted because capacity was taken
// back), tide_inference_waits_total and tide_inference_wait_seconds_total,
// and tide_harvested_gpu_hours_total per edge or inference site (GPU-hours
// tide's jobs held there, in the engine's clock).

// DefaultTakenBackKey is the node label or taint key by which an owner
// takes a server back from training.
const DefaultTakenBackKey = Group + "/taken-back"

// SiteHarvest is the GPU time tide's jobs held on one edge or inference
// site.
type SiteHarvest struct {
	Site, Kind string
	GPUHours   float64
}

// tidal is the scheduler's state for tidal capacity.
type tidal struct {
	reserve map[types.UID]*reservation // pending pods of other schedulers tide makes room for
	down    int                        // GPUs down after the last round
	why     map[string]string          // engine job ID -> why its GPUs were taken back (until it runs again)
	acctAt  float64                    // engine time harvest was last counted to
	harvest map[string]*SiteHarvest    // by site
}

// reservation is room tide keeps for another scheduler's pending pod.
type reservation struct {
	pod       *corev1.Pod
	node      string
	gpus      int             // GPUs down for it: its own, and those of the tide jobs whose workers took its other room
	pins      []cluster.GPUID // of those, the ones that go down first: a GPU of each tide job whose workers took its other room (roomFor)
	room      bool            // its other room is held for it
	reclaimed bool            // training gave GPUs up for it: its wait counts
}

// takenBack says why an owner took node n back from training ("" when
// not): the label or a taint with the key.
func (l SiteLabels) takenBack(n *corev1.Node) string {
	if v, ok := n.Labels[l.TakenBack]; ok && v != "false" {
		return fmt.Sprintf("its owner took %s back (label %s=%s)", n.Name, l.TakenBack, v)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == l.TakenBack {
			return fmt.Sprintf("its owner took %s back (taint %s:%s)", n.Name, t.Key, t.Effect)
		}
	}
	return ""
}

// lent: node n's GPUs are lent to training (an edge or inference site),
// so other schedulers' pods take them back rather than leaving them.
func lent(n *cluster.Node) bool { return n.SiteKind != cluster.SiteCloud }

// tide brings the engine's down set up to date with the owners' demand
// (v's pods of other schedulers, running and pending, and taken-back
// servers) and counts harvest and inference waits. It runs each round
// after the engine is up to date and before it plans, with the round's
// cluster c (the engine's, or one of the same nodes). A cluster with no
// edge or inference site, no server taken back and nothing down costs a
// walk over its nodes.
func (s *Scheduler) tide(v *view, c *cluster.Cluster) error {
	t := &s.tidal
	if t.reserve == nil {
		t.reserve, t.why, t.harvest = map[types.UID]*reservation{}, map[string]string{}, map[string]*SiteHarvest{}
	}
	busy := t.down > 0 || len(t.reserve) > 0
	for i := 0; i < len(c.Nodes) && !busy; i++ {
		kn := v.nodes[kubeNode(c.Nodes[i].Name)] // a MIG slice's engine node is its node's (mig.go)
		busy = lent(&c.Nodes[i]) || (kn != nil && s.cfg.Sites.takenBack(kn) != "")
	}
	if !busy {
		return nil
	}
	s.countHarvest(c)
	s.settleReservations(v)
	// What each node's owner holds or wants: running pods of other
	// schedulers, the reservations, or the whole node taken back.
	want := make([]int, len(c.Nodes))
	why := make([]string, len(c.Nodes))
	byName := make(map[string]int, len(c.Nodes))
	for i := range c.Nodes {
		n := &c.Nodes[i]
		byName[n.Name] = i
		if kn := v.nodes[kubeNode(n.Name)]; kn != nil { // the slices of a server taken back go with it
			if w := s.cfg.Sites.takenBack(kn); w != "" {
				want[i], why[i] = n.GPUs, w
				continue
			}
		}
		if lent(n) {
			want[i] = min(n.GPUs, v.foreign[n.Name])
		}
	}
	moved := s.recheck(v, c, want, why, byName)
	s.reserveFor(v, c, want, why, byName)
	for uid, reclaimed := range moved { // a wait training gave GPUs up for still counts
		if r := t.reserve[uid]; r != nil {
			r.reclaimed = r.reclaimed || reclaimed
		}
	}
	for _, r := range t.reserve { // the placer leaves a reservation's other room to its pod
		if st := v.states[r.node]; st != nil && r.room {
			addTimes(st.used, podRequests(r.pod), 1)
			st.pods++
			st.ports = append(st.ports, podPorts(r.pod)...)
		}
	}
	return s.applyDown(c, want, why)
}

// settleReservations ends the reservations of pods that were bound (their
// wait is counted) or are gone or no longer pending.
func (s *Scheduler) settleReservations(v *view) {
	t := &s.tidal
	asking := make(map[types.UID]bool, len(v.asking))
	for _, p := range v.asking {
		asking[p.UID] = true
	}
	for uid, r := range t.reserve {
		if asking[uid] {
			continue
		}
		delete(t.reserve, uid)
		p, err := s.pods.Pods(r.pod.Namespace).Get(r.pod.Name)
		if err != nil || p.UID != uid || p.Spec.NodeName == "" || !r.reclaimed {
			continue
		}
		wait := s.now().Sub(p.CreationTimestamp.Time).Seconds()
		s.stats.InferenceWaits++
		s.stats.InferenceWaitSeconds += max(0, wait)
		s.log.Info("inference pod bound after tide gave back GPUs", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "waited", time.Duration(wait*float64(time.Second)).Round(time.Millisecond))
	}
}

// recheck counts again, each round, the room of each reservation on its
// node, adding the GPUs it takes down to want: the pins it needs now (the
// tide workers whose room it took may be gone, others may have come), or
// none. A reservation whose node can no longer take its pod (gone, not
// ready, cordoned, taken back, no longer lent, its taints or labels, too
// few GPUs left beside what is spoken for) is dropped, so that reserveFor
// makes the pod room elsewhere; it returns those, with whether training
// gave GPUs up for them already. Made once and kept, a reservation held
// GPUs down for a room that had come free, and held the pod to a node
// that could no longer take it while no other node's GPUs were taken.
func (s *Scheduler) recheck(v *view, c *cluster.Cluster, want []int, why []string, byName map[string]int) map[types.UID]bool {
	t := &s.tidal
	if len(t.reserve) == 0 {
		return nil
	}
	var costs map[*engine.Status]float64
	moved := map[types.UID]bool{}
	for _, p := range v.asking {
		r := t.reserve[p.UID]
		if r == nil {
			continue
		}
		g := int(podGPUs(p))
		sh := newShape(p, g, "")
		i, ok := byName[r.node]
		st := v.states[r.node]
		if ok && why[i] == "" && lent(&c.Nodes[i]) && st != nil && st.open && c.Nodes[i].GPUs-want[i] >= g {
			if w, _ := sh.static(st, s.cfg.GPUTypeLabel); w == "" {
				if costs == nil {
					costs = s.eng.ReclaimCosts(s.quota.inner, s.checkpointCost)
				}
				cost, pins, room := s.roomFor(v, sh, c, i, want, g, costs, r)
				r.pod, r.pins, r.room, r.gpus = p, pins, room, g+len(pins)
				r.reclaimed = r.reclaimed || cost > 0
				wantFor(c, want, i, g, pins)
				continue
			}
		}
		delete(t.reserve, p.UID)
		moved[p.UID] = r.reclaimed
		s.log.Info("another scheduler's pod's room moves: its node can no longer take it", "pod", p.Namespace+"/"+p.Name, "node", r.node)
	}
	return moved
}

// reserveFor gives each pending pod of another scheduler without a
// reservation the room it asks for on the lent node where taking it costs
// least: idle GPUs are free, a job's GPUs cost 1 + its reclaim cost (the
// simulator's order). Its room is its GPUs and what else it asks of the
// node (pod slots, CPU, memory: roomFor); a node whose other room only
// evicting tide's workers frees costs theirs, and one where other pods
// fill it comes last. Pods no lent node could take are not tide's
// business.
func (s *Scheduler) reserveFor(v *view, c *cluster.Cluster, want []int, why []string, byName map[string]int) {
	t := &s.tidal
	var costs map[*engine.Status]float64
	for _, p := range v.asking {
		if t.reserve[p.UID] != nil {
			continue
		}
		r := int(podGPUs(p))
		sh := newShape(p, r, "")
		best, bestCost, bestRoom := -1, 0.0, false
		var bestPins []cluster.GPUID
		for i := range c.Nodes {
			n := &c.Nodes[i]
			st := v.states[n.Name]
			if !lent(n) || why[i] != "" || st == nil || !st.open || n.GPUs-want[i] < r {
				continue
			}
			if w, _ := sh.static(st, s.cfg.GPUTypeLabel); w != "" {
				continue
			}
			if costs == nil {
				costs = s.eng.ReclaimCosts(s.quota.inner, s.checkpointCost)
			}
			cost, pins, room := s.roomFor(v, sh, c, i, want, r, costs, nil)
			if best < 0 || room && !bestRoom || room == bestRoom && cost < bestCost { // a node the pod fits on first
				best, bestCost, bestPins, bestRoom = i, cost, pins, room
			}
		}
		if best < 0 {
			continue
		}
		wantFor(c, want, best, r, bestPins)
		t.reserve[p.UID] = &reservation{pod: p, node: c.Nodes[best].Name, gpus: r + len(bestPins), pins: bestPins, room: bestRoom, reclaimed: bestCost > 0}
		s.log.Info("making room for another scheduler's pod", "pod", p.Namespace+"/"+p.Name, "node", c.Nodes[best].Name, "gpus", r, "from training", bestCost > 0)
	}
}

// wantFor adds to want what a reservation on engine node i takes down: r
// GPUs of node i and its pins, each on its own engine node (a pin may be
// a MIG slice of i's Kubernetes node: roomFor).
func wantFor(c *cluster.Cluster, want []int, i, r int, pins []cluster.GPUID) {
	want[i] = min(c.Nodes[i].GPUs, want[i]+r)
	for _, g := range pins {
		j := c.NodeOf(g).ID
		want[j] = min(c.Nodes[j].GPUs, want[j]+1)
	}
}

// roomFor says what taking room for a pod of shape sh, asking r GPUs,
// on engine node c.Nodes[i] (n) costs and which GPUs go down for it
// beyond those already spoken for (want, by engine node; downOrder): the
// r cheapest of n's, and, when the node's other room (pod slots, CPU,
// memory, the host ports it binds) does not take the pod beside what
// runs there, one GPU of each tide job whose workers there must go
// (cheapest first: n's GPUs, then the MIG slices of its Kubernetes node,
// engine nodes of their own) to free that room: pins, which go down
// before any other. A worker holding a slice took room that only n's
// GPUs were tried for, so tide found none to make and the pod waited for
// as long as the worker ran (kube random search, seed 3661 at 200 steps
// under gavel-fifo: a slice worker's host port). A job goes down whole with one GPU, and
// its pods with it; a GPU's jobs all go with it (both of a packed pair,
// every part). Terminating pods' room counts as coming back, and so does
// that of tide's workers whose job the engine no longer runs (the
// reconcile evicts them). The room the other reservations on n hold
// counts as taken (self's aside: the reservation counted again, nil for a
// new one). room is false, and pins nil, when evicting every tide worker
// there would not make room: other pods fill it, which is not tide's
// business.
func (s *Scheduler) roomFor(v *view, sh *shape, c *cluster.Cluster, i int, want []int, r int, costs map[*engine.Status]float64, self *reservation) (cost float64, pins []cluster.GPUID, room bool) {
	n, wantDown := &c.Nodes[i], want[i]
	order := s.downOrder(n, costs)
	if wantDown+r > len(order) {
		return 0, nil, false
	}
	st := v.states[n.Name]
	base := st.used.DeepCopy()
	if base == nil {
		base = corev1.ResourceList{}
	}
	subtract(base, st.leaving.req)
	pods := st.pods - st.leaving.pods
	ports := portsLess(st.ports, st.leaving.ports)
	for _, res := range s.tidal.reserve {
		if res != self && res.node == n.Name && res.room {
			addTimes(base, podRequests(res.pod), 1)
			pods++
			ports = append(ports, podPorts(res.pod)...)
		}
	}
	goneKey := map[string]bool{}
	leave := func(key string) bool { // tide's workers of key go from here
		u := st.mine[key]
		if u == nil || goneKey[key] {
			return false
		}
		goneKey[key] = true
		subtract(base, u.req)
		pods -= u.pods
		ports = portsLess(ports, u.ports)
		return true
	}
	for key := range st.mine { // sums: the order does not matter
		if j := s.eng.Job(s.ids[key]); j == nil || len(j.GPUs) == 0 {
			leave(key)
		}
	}
	free := func(g cluster.GPUID) bool { // the GPU's jobs go: whether that frees room here
		freed := false
		for _, h := range s.holders(g) {
			if w := s.work[h.Job.ID]; w != nil && leave(w.key) {
				freed = true
			}
		}
		return freed
	}
	fits := func() bool { return sh.short(st, base, pods) == "" && sh.portsFree(ports) }
	for _, g := range order[:wantDown+r] {
		free(g)
	}
	for _, g := range order[wantDown : wantDown+r] {
		cost += s.gpuCost(g, costs)
	}
	// The slices, engine nodes right after n (buildCluster); those going
	// down anyway free their room first.
	var more []cluster.GPUID
	for j := i + 1; j < len(c.Nodes) && kubeNode(c.Nodes[j].Name) == n.Name; j++ {
		o := s.downOrder(&c.Nodes[j], costs)
		for _, g := range o[:want[j]] {
			free(g)
		}
		more = append(more, o[want[j]:]...)
	}
	for _, g := range append(order[wantDown+r:], more...) {
		if fits() {
			return cost, pins, true
		}
		if c := s.gpuCost(g, costs); free(g) {
			pins = append(pins, g)
			cost += c
		}
	}
	if fits() {
		return cost, pins, true
	}
	cost = 0
	for _, g := range order[wantDown : wantDown+r] {
		cost += s.gpuCost(g, costs)
	}
	return cost, nil, false
}

// checkpointCost is a job's reclaim cost when its policy names none: the
// GPU-seconds of its checkpoint, which takes its grace period (the time
// its workers have to checkpoint) or, under a live driver that gives it,
// Live.Checkpoint (the simulator's cost for the same file).
func (s *Scheduler) checkpointCost(st *engine.Status) float64 {
	if l := s.cfg.Live; l != nil && l.Checkpoint != nil {
		return float64(len(st.GPUs)) * l.Checkpoint(st.Job)
	}
	return float64(len(st.GPUs)) * max(1, s.cfg.Grace.Seconds())
}

// gpuCost is what taking GPU g from training costs: nothing when no job
// holds it, else 1 and the reclaim cost of each job that goes with it
// (both of a packed pair, every part).
func (s *Scheduler) gpuCost(g cluster.GPUID, costs map[*engine.Status]float64) float64 {
	hs := s.holders(g)
	if len(hs) == 0 {
		return 0
	}
	c := 1.0
	for _, h := range hs {
		c += costs[h]
	}
	return c
}

// holders are the jobs holding GPU g: its whole-GPU holder and the job
// packed with it, or its parts' jobs.
func (s *Scheduler) holders(g cluster.GPUID) []*engine.Status {
	first, second := s.eng.Holders(g)
	var out []*engine.Status
	for _, h := range append([]*engine.Status{first, second}, s.eng.Sharers(g)...) {
		if h != nil && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// downOrder lists node n's GPUs in the order they go down: those down
// now, then those the reservations there pin (roomFor), then the
// cheapest to take (ties by GPU id).
func (s *Scheduler) downOrder(n *cluster.Node, costs map[*engine.Status]float64) []cluster.GPUID {
	gs := make([]cluster.GPUID, n.GPUs)
	for i := range gs {
		gs[i] = n.First + cluster.GPUID(i)
	}
	pinned := map[cluster.GPUID]bool{}
	for _, r := range s.tidal.reserve {
		if r.node == kubeNode(n.Name) { // a slice it pins is on an engine node of its own
			for _, g := range r.pins {
				pinned[g] = true
			}
		}
	}
	sort.SliceStable(gs, func(a, b int) bool {
		da, db := s.eng.IsDown(gs[a]), s.eng.IsDown(gs[b])
		if da != db {
			return da
		}
		if da {
			return false
		}
		if pa, pb := pinned[gs[a]], pinned[gs[b]]; pa != pb {
			return pa
		}
		return s.gpuCost(gs[a], costs) < s.gpuCost(gs[b], costs)
	})
	return gs
}

// applyDown makes want[i] of node i's GPUs down, taking the cheapest
// (downOrder); the jobs that lose GPUs are preempted and their workers
// evicted by the reconcile, with why as the reason.
func (s *Scheduler) applyDown(c *cluster.Cluster, want []int, why []string) error {
	var up, down []cluster.GPUID
	var costs map[*engine.Status]float64
	reason := map[cluster.GPUID]string{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		cur := 0
		for g := n.First; g < n.First+cluster.GPUID(n.GPUs); g++ {
			if s.eng.IsDown(g) {
				cur++
			}
		}
		if cur == want[i] {
			continue
		}
		if costs == nil {
			costs = s.eng.ReclaimCosts(s.quota.inner, s.checkpointCost)
		}
		order := s.downOrder(n, costs)
		if want[i] < cur {
			up = append(up, order[want[i]:cur]...)
			continue
		}
		msg := why[i]
		if msg == "" {
			msg = "pods of another scheduler on " + n.Name + " need them back"
		}
		for _, g := range order[cur:want[i]] {
			down = append(down, g)
			reason[g] = msg
		}
	}
	s.tidal.down = 0
	for _, k := range want {
		s.tidal.down += k
	}
	if _, err := s.eng.SetDown(up, false); err != nil {
		return fmt.Errorf("kube: capacity back: %w", err)
	}
	changes, err := s.eng.SetDown(down, true)
	if err != nil {
		return fmt.Errorf("kube: capacity taken: %w", err)
	}
	for _, ch := range changes {
		id := ch.Status.Job.ID
		var msgs []string
		for _, g := range ch.From {
			if m := reason[g]; m != "" && !contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
		s.tidal.why[id] = "its GPUs were taken back for their owner: " + strings.Join(msgs, "; ")
		s.stats.Reclaims++
		s.log.Info("GPUs taken back from training", "job", id, "why", s.tidal.why[id])
	}
	for id := range s.tidal.why {
		if st := s.eng.Job(id); st == nil || len(st.GPUs) > 0 || st.State.Terminal() {
			delete(s.tidal.why, id) // running again, or gone
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// countHarvest adds the GPU time tide's jobs held on lent sites of c
// since the last count, at the allocation the engine has had since then.
func (s *Scheduler) countHarvest(c *cluster.Cluster) {
	t := &s.tidal
	now := s.cfg.Clock.Now()
	dt := now - t.acctAt
	t.acctAt = now
	if dt <= 0 || dt > 3600 {
		return
	}
	changed := false
	for _, st := range s.eng.Active() {
		for _, g := range st.GPUs {
			n := c.NodeOf(g)
			if !lent(n) {
				continue
			}
			h := t.harvest[n.Site]
			if h == nil {
				h = &SiteHarvest{Site: n.Site, Kind: n.SiteKind}
				t.harvest[n.Site] = h
			}
			h.GPUHours += dt / 3600
			changed = true
		}
	}
	if changed {
		out := make([]SiteHarvest, 0, len(t.harvest))
		for _, h := range t.harvest {
			out = append(out, *h)
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Site < out[b].Site })
		s.stats.Harvest = out // a new slice: copies of Stats share it read-only
	}
}

// reclaimWhy is why job id lost its GPUs to their owner, "" when it did
// not (preemption says it on the evicted pods).
func (s *Scheduler) reclaimWhy(id string) string { return s.tidal.why[id] }

// writeTidalMetrics writes the metrics of tidal capacity.
func writeTidalMetrics(w io.Writer, st Stats) {
	for _, m := range []struct {
		name, help string
		v          float64
	}{
		{"tide_reclaims_total", "Jobs preempted because their GPUs' owners took them back (inference pods, edge servers).", float64(st.Reclaims)},
		{"tide_inference_waits_total", "Pods of other schedulers bound after tide took GPUs back from training for them.", float64(st.InferenceWaits)},
		{"tide_inference_wait_seconds_total", "Time those pods waited, from creation to binding.", st.InferenceWaitSeconds},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", m.name, m.help, m.name, m.name, m.v)
	}
	fmt.Fprintf(w, "# HELP tide_harvested_gpu_hours_total GPU-hours tide's jobs held on edge and inference sites.\n# TYPE tide_harvested_gpu_hours_total counter\n")
	for _, h := range st.Harvest {
		fmt.Fprintf(w, "tide_harvested_gpu_hours_total{site=%q,kind=%q} %g\n", h.Site, h.Kind, h.GPUHours)
	}
}
