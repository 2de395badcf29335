package kube

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// Binding parts of GPUs (docs/sharing.md, "tide kube").
//
// A worker holding part of a GPU (a fractional workload: share.go) asks
// the device plugin for no GPU: the engine packs the parts (best fit,
// never over a GPU's compute or memory) and tide chooses the GPU, as an
// index on the node (0 to the node's GPUs - 1). The index travels on the
// Binding as the annotation AnnotGPUIndex, which the API server copies
// onto the pod in the same write that sets its node, so a bound part
// always carries its index: a restarted tide kube, or a standby taking
// over, rebuilds which GPU holds which parts from the bound pods alone
// (adoption, below) and never puts more on a GPU than it holds.
//
// The worker selects its GPU by NVIDIA_VISIBLE_DEVICES (the NVIDIA
// container runtime exposes that GPU, as device 0). A TideJob's workers
// are made by tide, which writes it into the pod with the MPS share and
// memory limits (partEnv); a plain pod reads the index through the
// downward API (docs/sharing.md gives the env recipe), since nothing can
// change a pod's environment once it exists.
//
// The device plugin knows nothing of parts, so tide keeps whole-GPU
// workers off the GPUs that hold parts by counting: on each node a GPU
// that holds parts counts as taken, in the engine (a GPU holds parts or a
// whole job, never both) and at bind (a node's free GPUs are its
// allocatable GPUs less those its live pods ask for and less the distinct
// indices its parts hold), so tide binds no more whole GPUs to a node
// than remain beside its parts.

// AnnotGPUIndex is the index, on its node, of the GPU whose part a pod
// holds ("0", "1", ...); tide sets it when it binds the pod.
const AnnotGPUIndex = Group + "/gpu-index"

// slot is where one worker goes: a node's name, and for a part "#" and
// the index of its GPU there (node names never hold a "#").
func partSlot(node string, idx int) string { return node + "#" + strconv.Itoa(idx) }

// slotNode splits a slot into its node and GPU index (-1 for a whole
// worker, or an index that is not one).
func slotNode(slot string) (node string, idx int) {
	node, i, ok := strings.Cut(slot, "#")
	if !ok {
		return slot, -1
	}
	n, err := strconv.Atoi(i)
	if err != nil || n < 0 {
		return node, -1
	}
	return node, n
}

// slotOf is the slot engine GPU g gives a worker of w.
func slotOf(c *cluster.Cluster, g cluster.GPUID, w *workload) string {
	n := c.NodeOf(g)
	if !w.indexed() {
		return n.Name
	}
	return partSlot(n.Name, int(g-n.First))
}

// podSlot is the slot a pod of w is bound to, "" when it is not bound (a
// MIG slice's is its engine node, mig.go); a part without a readable index is in slot "<node>#?", which no plan
// wants (it is evicted).
func (s *Scheduler) podSlot(p *corev1.Pod, w *workload) string {
	node := s.nodeOf(p)
	if node != "" && w.part.mig != "" {
		return migNode(node, w.part.mig)
	}
	if node == "" || !w.indexed() {
		return node
	}
	if i := s.podIndex(p); i >= 0 {
		return partSlot(node, i)
	}
	return node + "#?"
}

// podIndex is the GPU index a bound part holds: its annotation, or the
// index tide bound it to when the cache has not seen the bind yet; -1
// when it has none.
func (s *Scheduler) podIndex(p *corev1.Pod) int {
	if v, ok := p.Annotations[AnnotGPUIndex]; ok {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 {
			return -1
		}
		return i
	}
	if i, ok := s.partIdx[p.UID]; ok {
		return i
	}
	return -1
}

// notePartBind remembers the index a part is being bound to until the
// cache shows the pod bound (with its annotation).
func (s *Scheduler) notePartBind(uid types.UID, idx int) {
	if idx < 0 {
		return
	}
	if s.partIdx == nil {
		s.partIdx = map[types.UID]int{}
	}
	s.partIdx[uid] = idx
}

// forgetPartBinds drops the indices of binds the cache has caught up with
// (or that failed): only assumed pods need them.
func (s *Scheduler) forgetPartBinds() {
	for uid := range s.partIdx {
		if _, ok := s.assumed[uid]; !ok {
			delete(s.partIdx, uid)
		}
	}
}

// noteShared records, in v, the GPU index a live pod bound to node holds
// a part of (terminating pods too: their parts hold the GPU until gone),
// and the share and memory of its part: a plain pod's annotations, or a
// TideJob worker's, which tide writes as a plain pod's (partWorker); a
// packable worker's index counts as full to parts.
func (s *Scheduler) noteShared(v *view, node string, p *corev1.Pod) {
	_, annotated := p.Annotations[AnnotGPUIndex]
	_, binding := s.partIdx[p.UID]
	if !annotated && !binding {
		return // the common case, a whole worker: two map lookups
	}
	i := s.podIndex(p)
	if i < 0 || podGPUs(p) > 0 {
		return
	}
	v.noteIndexJob(node, i, workloadKey(p))
	if v.shared == nil {
		v.shared = map[string]map[int]bool{}
	}
	if v.shared[node] == nil {
		v.shared[node] = map[int]bool{}
	}
	v.shared[node][i] = true
	pt, err := podPart(p, 0)
	if tj := p.Labels[LabelTideJob]; err == nil && !pt.fractional() && tj != "" {
		// A TideJob's worker made before its part was annotated: its
		// TideJob's part, while the TideJob is there.
		if w := v.work["tidejob/"+p.Namespace+"/"+tj]; w != nil {
			pt = w.part
		}
	}
	switch {
	case err == nil && pt.fractional():
		share, mem := s.partDemand(v, node, pt)
		v.usePart(partSlot(node, i), share, mem)
	case err == nil:
		// A packable job's worker (a whole GPU bound by index): no part
		// goes beside it, whether or not its job is still there (pairRoom
		// knows it only while its workload is): one whose TideJob was
		// deleted runs on while it terminates.
		v.usePart(partSlot(node, i), 1, 0)
	}
}

// partDemand is the share and GiB a part pt takes of a GPU of node
// (job.Job.Demand, as the engine counts it).
func (s *Scheduler) partDemand(v *view, node string, pt part) (share, memGiB float64) {
	return (&job.Job{Share: pt.share, GPUMemGiB: pt.memGiB}).Demand(s.gpuMem(v, node))
}

// gpuMem is the memory of each GPU of node, GiB (0: unknown).
func (s *Scheduler) gpuMem(v *view, node string) float64 {
	n := v.nodes[node]
	if n == nil {
		return 0
	}
	return gpuMemOf(n, strings.ToLower(n.Labels[s.cfg.GPUTypeLabel]))
}

// usePart counts a part's share and memory on a slot (node#index).
func (v *view) usePart(slot string, share, memGiB float64) {
	if v.partUse == nil {
		v.partUse = map[string][2]float64{}
	}
	u := v.partUse[slot]
	u[0] += share
	u[1] += memGiB
	v.partUse[slot] = u
}

// partsRoom says whether w's parts fit on slots beside the parts live
// pods hold there, terminating ones and those of jobs the engine no longer
// runs included: the engine frees a part's GPU when its job stops, while
// its pod may still run there (being evicted, or its gang released), and
// a part bound beside it over-committed the GPU.
func (s *Scheduler) partsRoom(v *view, w *workload, slots []string) bool {
	add := map[string][2]float64{}
	for _, sl := range slots {
		node, idx := slotNode(sl)
		if idx < 0 {
			continue
		}
		share, mem := s.partDemand(v, node, w.part)
		u, a := v.partUse[sl], add[sl]
		if !job.Fits(u[0]+a[0], u[1]+a[1], share, mem, s.gpuMem(v, node)) {
			return false
		}
		add[sl] = [2]float64{a[0] + share, a[1] + mem}
	}
	return true
}

// claimParts counts w's parts being bound to slots.
func (s *Scheduler) claimParts(v *view, w *workload, slots []string) {
	for _, sl := range slots {
		if node, idx := slotNode(sl); idx >= 0 {
			share, mem := s.partDemand(v, node, w.part)
			v.usePart(sl, share, mem)
		}
	}
}

// slotNeeds is what binding a job's missing workers to slots takes of
// each node: the GPUs the device plugin must have free (a whole worker
// its GPUs; a part one GPU when no part holds its index yet, else none),
// the workers, and the indices newly opened to parts.
func (v *view) slotNeeds(w *workload, slots []string) (need, workers map[string]int, open map[string][]int) {
	need, workers = map[string]int{}, map[string]int{}
	for _, sl := range slots {
		node, idx := slotNode(sl)
		workers[node]++
		if idx < 0 {
			need[node] += w.per
			continue
		}
		if !v.shared[node][idx] && !slices.Contains(open[node], idx) {
			if open == nil {
				open = map[string][]int{}
			}
			open[node] = append(open[node], idx)
			need[node]++
		}
	}
	return need, workers, open
}

// openShared counts the indices a bind opened as holding parts.
func (v *view) openShared(open map[string][]int) {
	for node, idx := range open {
		if v.shared == nil {
			v.shared = map[string]map[int]bool{}
		}
		if v.shared[node] == nil {
			v.shared[node] = map[int]bool{}
		}
		for _, i := range idx {
			v.shared[node][i] = true
		}
	}
}

// freeGPUs is each node's GPUs the device plugin can still give: its
// allocatable GPUs less those its live pods ask for and less the GPUs
// parts hold.
func (v *view) freeGPUs() map[string]int {
	room := make(map[string]int, len(v.alloc))
	for n, a := range v.alloc {
		room[n] = a - v.phys[n] - len(v.shared[n])
	}
	return room
}

// bindAnnotations are the annotations a Binding of a worker to GPU index
// idx carries onto its pod (nil for a whole worker).
func bindAnnotations(idx int) map[string]string {
	if idx < 0 {
		return nil
	}
	return map[string]string{AnnotGPUIndex: strconv.Itoa(idx)}
}

// gpuMemOf is the memory of each GPU of node n, GiB: NVIDIA's GPU feature
// discovery label nvidia.com/gpu.memory (MiB), else the default for its
// type (cluster.DefaultGPUMemGiB), else 0 (unknown: only parts that ask
// for a share alone fit there).
func gpuMemOf(n *corev1.Node, typ string) float64 {
	if s := n.Labels[LabelGPUMemory]; s != "" {
		if mib, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && mib > 0 && !math.IsInf(mib, 0) {
			return mib / 1024
		}
	}
	return cluster.DefaultGPUMemGiB[typ]
}

// LabelGPUMemory is the node label giving its GPUs' memory in MiB, as
// NVIDIA's GPU feature discovery sets it.
const LabelGPUMemory = "nvidia.com/gpu.memory"

// partEnv is the environment of a TideJob worker holding part of GPU idx
// of a node whose GPUs have gpuMemGiB: NVIDIA_VISIBLE_DEVICES selects the
// GPU (the container sees it as device 0, hence CUDA_VISIBLE_DEVICES=0),
// TIDE_GPU_INDEX names it, and its share and memory are given as tide
// serve gives them (localexec.ShareEnv: CUDA MPS's active thread
// percentage and pinned memory limit, TIDE_GPU_SHARE, TIDE_GPU_MEM_GIB).
func partEnv(pt part, idx int, gpuMemGiB float64) []corev1.EnvVar {
	share, mem := pt.share, pt.memGiB
	if gpuMemGiB > 0 {
		share, mem = (&job.Job{Share: pt.share, GPUMemGiB: pt.memGiB}).Demand(gpuMemGiB)
	}
	return append(packEnv(idx, false), shareEnv(share, mem)...)
}

// partWorker makes worker pod p of w hold part of GPU idx on node, or the
// GPU for a packable job (packed: made while its job is packed,
// sharepairs.go): its index annotation and its environment (set over any
// of the same names the template gives).
func (s *Scheduler) partWorker(p *corev1.Pod, w *workload, node string, idx int, packed bool) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotGPUIndex] = strconv.Itoa(idx)
	var env []corev1.EnvVar
	if w.pack {
		env = packEnv(idx, packed)
	} else {
		// Its part, as a plain pod says it: what it holds of its GPU
		// once its TideJob no longer runs it (noteShared).
		if w.tj != nil && w.tj.Spec.GPUFraction != "" {
			p.Annotations[AnnotGPUFraction] = w.tj.Spec.GPUFraction
		}
		if w.tj != nil && w.tj.Spec.GPUMemory != "" {
			p.Annotations[AnnotGPUMemory] = w.tj.Spec.GPUMemory
		}
		mem := 0.0
		if n := s.cur.nodes[node]; n != nil {
			mem = gpuMemOf(n, strings.ToLower(n.Labels[s.cfg.GPUTypeLabel]))
		}
		env = partEnv(w.part, idx, mem)
	}
	c := &p.Spec.Containers[0]
	for _, e := range env {
		replaced := false
		for k := range c.Env {
			if c.Env[k].Name == e.Name {
				c.Env[k], replaced = e, true
			}
		}
		if !replaced {
			c.Env = append(c.Env, e)
		}
	}
}

// String says what a part asks, as errors name it.
func (p part) String() string {
	switch {
	case p.mig != "":
		return "MIG slice " + p.mig
	case p.share > 0 && p.memGiB > 0:
		return fmt.Sprintf("a share of %.3g and %.3g GiB", p.share, p.memGiB)
	case p.share > 0:
		return fmt.Sprintf("a share of %.3g", p.share)
	case p.memGiB > 0:
		return fmt.Sprintf("%.3g GiB", p.memGiB)
	}
	return "whole GPUs"
}

// gpuTaker hands a rebuilt engine's GPUs to the pods found bound: parts
// the GPUs their indices name (reserve), whole workers then the lowest
// GPUs of their node that no part holds.
type gpuTaker struct {
	c    *cluster.Cluster
	used []bool
	free []int // per node
}

func newGPUTaker(c *cluster.Cluster) *gpuTaker {
	t := &gpuTaker{c: c, used: make([]bool, c.TotalGPUs()), free: make([]int, len(c.Nodes))}
	for i, n := range c.Nodes {
		t.free[i] = n.GPUs
	}
	return t
}

// room is node's GPUs not taken.
func (t *gpuTaker) room(node int) int { return t.free[node] }

// take takes the k lowest free GPUs of node (room(node) >= k).
func (t *gpuTaker) take(node, k int) []cluster.GPUID {
	n := &t.c.Nodes[node]
	out := make([]cluster.GPUID, 0, k)
	for i := 0; i < n.GPUs && len(out) < k; i++ {
		if g := n.First + cluster.GPUID(i); !t.used[g] {
			t.reserve(g)
			out = append(out, g)
		}
	}
	return out
}

// reserve takes GPU g (a part's: several parts reserve it once).
func (t *gpuTaker) reserve(g cluster.GPUID) {
	if !t.used[g] {
		t.used[g] = true
		t.free[t.c.NodeOf(g).ID]--
	}
}

// give frees GPU g.
func (t *gpuTaker) give(g cluster.GPUID) {
	if t.used[g] {
		t.used[g] = false
		t.free[t.c.NodeOf(g).ID]++
	}
}

// partGPUs is the GPUs w's bound parts hold by their recorded indices,
// one per pod (a pod whose index is missing, out of its node's range, or
// repeats another of the job's is left out and warned about: the next
// reconcile evicts it).
func (s *Scheduler) partGPUs(w *workload, c *cluster.Cluster, byName map[string]int) []cluster.GPUID {
	var gs []cluster.GPUID
	for _, p := range w.pods {
		node := s.nodeOf(p)
		if node == "" {
			continue
		}
		i, ok := byName[node]
		idx := s.podIndex(p)
		var g cluster.GPUID
		if ok && idx >= 0 && idx < c.Nodes[i].GPUs {
			g = c.Nodes[i].First + cluster.GPUID(idx)
		}
		if !ok || idx < 0 || idx >= c.Nodes[i].GPUs || slices.Contains(gs, g) || len(gs) >= w.maxW {
			s.warnOnce("adopt/"+string(p.UID), "pod "+p.Namespace+"/"+p.Name,
				fmt.Sprintf("part bound to node %s at GPU index %q, which tide cannot hold for it; left out of its job", node, p.Annotations[AnnotGPUIndex]))
			continue
		}
		gs = append(gs, g)
	}
	return gs
}

// reserveParts reserves, before any whole worker is adopted, the GPUs
// the bound parts of the live workloads in v hold, so that no whole
// worker is adopted onto them.
func (s *Scheduler) reserveParts(v *view, c *cluster.Cluster, byName map[string]int, t *gpuTaker) {
	for _, w := range v.work {
		if !w.indexed() || w.ended() {
			continue
		}
		for _, g := range s.partGPUs(w, c, byName) {
			t.reserve(g)
		}
	}
}
