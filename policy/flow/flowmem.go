package flow

import (
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/kept"
)

// flowMem is the memory a Flow keeps from round to round, so that a round
// in which nothing changed allocates nothing once it has grown (issue #19
// point 1: ElasticFlow's full round allocated 777 times at 200 GPUs, most
// of it one fjob and its levels per active job). Each buffer belongs to one
// step of a round and is reset where that step begins; nothing in it is
// read across rounds but ord, the last round's order of the jobs, which
// the next round's order starts from (flow_order.go). The engine keeps none of a plan's slices or maps
// after the round (engine.Plan), so the plan's Run, Decline, Memo and
// Reasons are kept here too; tidal adds to them within its round.
type flowMem struct {
	pool  []*fjob           // the round's jobs, reused: pool[i] is the i-th active job read
	js    []*fjob           // jobs' order
	ord   kept.Order[*fjob] // the last round's order of the jobs (flow_order.go)
	base  []*fjob           // admission's admitted set
	trial []*fjob           // admission's trial set, never base's memory
	meets []bool            // admission's outcomes of base
	// declined is admission's declined jobs.
	declined []*fjob
	prefix   passPrefix // admission's kept pass (Flow.prefix points here)
	tl       timeline   // pass's timeline when it starts from scratch
	packed   []int      // PerNode of the perf.Alloc that rate asks the model about
	heap     []spareStep

	run     []engine.Assignment
	nodes   []engine.NodeGPUs // the plan's Assignment.Nodes, one sub-slice each
	decline []string
	memo    map[string]engine.Memo
	// buddy: each node's free GPUs by node ID (0 outside the cloud's GPU
	// type), the jobs to place, the nodes by free GPUs, and a job's GPUs
	// per node where it runs now.
	free  []int
	order []*fjob
	ids   []int
	// byFreeAt is byFree's scratch: where each count of free GPUs starts.
	byFreeAt []int
	cur      []engine.NodeGPUs

	byStatus map[*engine.Status]*fjob // explain's terms
	statuses []*engine.Status         // explain's order
	sc       explain.Scratch

	saved []savedJob // holdSafe's outcomes of the trial set
	met   []bool     // holdSafe's outcomes of the admitted set

	edges    edges
	siteHeld map[string]int // keepEdge's jobs per edge site (edgeCap)
	taken    map[int]bool   // admitTest's servers taken
	held     map[int]bool   // pinEdge's servers held
	missing  []edgeCand     // offload's candidates
	meeting  []edgeCand
	moved    []*fjob

	// Jobs of another type than the cloud's (othertype.go): the round's,
	// those runOther places, a site's nodes of a job's type, a reason's
	// text and the plan's Reasons when explain made none.
	other        []*fjob
	otherRun     []*fjob
	otherNodes   []int
	otherBuf     []byte
	otherReasons map[string]engine.Reason
}

// savedJob is what holdSafe keeps of a job's outcome and edge server.
type savedJob struct {
	o              passOutcome
	edge, edgeGPUs int
}

// packedAlloc is perf.Packed(t, n, perNode) in m's kept memory: valid until
// the next call (perf.Model does not keep an Alloc's PerNode).
func (m *flowMem) packedAlloc(t string, n, perNode int) perf.Alloc {
	if perNode <= 0 {
		perNode = n
	}
	p := m.packed[:0]
	for n > 0 {
		k := min(n, perNode)
		p = append(p, k)
		n -= k
	}
	m.packed = p
	return perf.Alloc{GPUType: t, PerNode: p}
}

// nodeGPUs appends one node's share to the plan's kept Nodes (an
// assignment's are those from len(m.nodes) before its first: nodesFrom).
func (m *flowMem) nodeGPUs(node, gpus int) {
	m.nodes = append(m.nodes, engine.NodeGPUs{Node: node, GPUs: gpus})
}

// nodesFrom is the sub-slice of the kept Nodes from start on, capped so
// that an append to it cannot write over the next assignment's.
func (m *flowMem) nodesFrom(start int) []engine.NodeGPUs {
	return m.nodes[start:len(m.nodes):len(m.nodes)]
}

// reset empties e for a new round, keeping its memory.
func (e *edges) reset() {
	e.nodes = e.nodes[:0]
	if e.used == nil {
		e.used = map[int]bool{}
	}
	clear(e.used)
}

// emptied returns *m emptied, made when nil.
func emptied[K comparable, V any](m *map[K]V) map[K]V {
	if *m == nil {
		*m = map[K]V{}
	}
	clear(*m)
	return *m
}

// byFree returns nodes ordered by their free GPUs (free[id]), most first,
// ties in nodes' order: the order a stable sort by free GPUs gives, made
// by counting (a node's free GPUs are few: at most its GPUs), so that a
// job placed on several nodes costs a pass over the cloud's nodes rather
// than a sort of them (at 10,000 GPUs the sort, once per such job, was a
// tenth of ElasticFlow's, EdgeFlow's and tidal's decision time). The
// slice is m's (ids), valid until the next call.
func (m *flowMem) byFree(nodes, free []int) []int {
	if len(nodes) == 0 {
		return m.ids[:0]
	}
	most, least := free[nodes[0]], free[nodes[0]]
	for _, id := range nodes {
		most, least = max(most, free[id]), min(least, free[id])
	}
	// Most free first: the key is how many fewer than the most a node has.
	m.ids, m.byFreeAt = kept.ByCount(m.ids, nodes, func(id int) int { return most - free[id] }, 0, most-least, m.byFreeAt)
	return m.ids
}
