package place

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// VC is a HiveD virtual cluster: a tenant guaranteed GPUs cells of one
// GPU type ("" = the first type with room).
type VC struct {
	Tenant string
	GPUs   int
	Type   string
}

// HiveD places jobs in HiveD's multi-level cells (Zhao et al., OSDI'20;
// microsoft/hivedscheduler) with buddy allocation.
//
// Cells: each node is split into aligned power-of-two blocks (an 8-GPU node
// is one 8-GPU cell made of two 4-GPU cells, the PCIe-switch level, made of
// 2-GPU cells, made of GPUs; a 6-GPU node is a 4-cell and a 2-cell); nodes
// form rack cells. A job of n GPUs up to a node's size takes the binary
// decomposition of n (6 = 4 + 2) as buddy blocks on one node, each block
// the smallest free aligned cell that holds it (split as needed; freed
// buddies merge since free cells are recomputed from what is held). A
// larger job takes whole free nodes in one rack if it can (else across
// racks of one site) plus buddy blocks for the rest. The node chosen is the
// one with the fewest usable GPUs that fits (best fit keeps large cells
// whole); ties go to the lowest index.
//
// Virtual clusters: each VC's guaranteed GPUs are bound to physical cells
// when the placer first sees the cluster (whole nodes first, rack by rack,
// then buddy blocks), in the order the VCs are listed. A job whose tenant
// has a VC and whose priority is >= 0 is guaranteed: it is placed only in
// its VC's cells, and takes them back from opportunistic jobs, which are
// then preempted. Every other job (priority < 0, or a tenant with no VC) is
// opportunistic: it uses idle cells anywhere, bound or not. A guaranteed job
// that does not fit its VC's free cells waits, as in HiveD; one larger than
// all its VC's cells (which HiveD would refuse at submission) runs
// opportunistically rather than never.
//
// Jobs that keep their assignment keep their GPUs (guaranteed ones only when
// those lie in their VC's cells).
type HiveD struct {
	VCs []VC

	mu      sync.Mutex
	layouts map[*cluster.Cluster]*hivedLayout
}

// hivedLayout is what HiveD derives from a cluster once: the VC bound to
// each GPU ("" = none) and how much of each VC could be bound.
type hivedLayout struct {
	owner []string
	bound map[string]int
	// cells counts each VC's bound GPUs by type and site.
	cells map[string]map[typeSite]int
}

// typeSite is a GPU type on a site.
type typeSite struct{ typ, site string }

// ParseHiveD reads the options of "hived[:vc=T@N[@TYPE]/...]".
func ParseHiveD(opts string) (*HiveD, error) {
	h := &HiveD{}
	if opts == "" {
		return h, nil
	}
	seen := map[string]bool{} // over every vc= option: a tenant has one VC
	for _, kv := range strings.Split(opts, ":") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "vc" {
			return nil, fmt.Errorf("placer hived: option %q: want vc=TENANT@GPUS[@TYPE], several separated by /", kv)
		}
		for _, part := range strings.Split(v, "/") {
			f := strings.Split(part, "@")
			if len(f) < 2 || len(f) > 3 || f[0] == "" {
				return nil, fmt.Errorf("placer hived: vc %q: want TENANT@GPUS or TENANT@GPUS@TYPE", part)
			}
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("placer hived: vc %q: GPUs %q: want an integer >= 1", part, f[1])
			}
			if seen[f[0]] {
				return nil, fmt.Errorf("placer hived: vc %q: tenant %s given twice", part, f[0])
			}
			seen[f[0]] = true
			vc := VC{Tenant: f[0], GPUs: n}
			if len(f) == 3 {
				vc.Type = strings.ToLower(f[2])
			}
			h.VCs = append(h.VCs, vc)
		}
	}
	return h, nil
}

// Name implements engine.Placer.
func (h *HiveD) Name() string { return "hived" }

// Place implements engine.Placer: without job information every job is
// opportunistic.
func (h *HiveD) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	return h.PlaceJobs(c, held, run, func(id string) *job.Job { return &job.Job{ID: id, Priority: -1} })
}

// Bound returns, per GPU, the tenant whose VC it is bound to ("" = none),
// and how many GPUs each VC got (less than asked when the cluster is too
// small or has too few of the VC's type).
func (h *HiveD) Bound(c *cluster.Cluster) ([]string, map[string]int) {
	l := h.layout(c)
	return l.owner, l.bound
}

func (h *HiveD) layout(c *cluster.Cluster) *hivedLayout {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.layouts[c]; l != nil {
		return l
	}
	l := &hivedLayout{owner: make([]string, c.TotalGPUs()), bound: map[string]int{}}
	for _, vc := range h.VCs {
		types := c.GPUTypes()
		if vc.Type != "" {
			types = []string{vc.Type}
		}
		for _, t := range types {
			if n := l.bind(c, vc.Tenant, t, vc.GPUs); n > 0 {
				l.bound[vc.Tenant] = n
				break
			}
		}
	}
	l.cells = map[string]map[typeSite]int{}
	for g, vc := range l.owner {
		if vc == "" {
			continue
		}
		if l.cells[vc] == nil {
			l.cells[vc] = map[typeSite]int{}
		}
		n := c.NodeOf(cluster.GPUID(g))
		l.cells[vc][typeSite{n.GPUType, n.Site}]++
	}
	if h.layouts == nil {
		h.layouts = map[*cluster.Cluster]*hivedLayout{}
	}
	h.layouts[c] = l
	return l
}

// bind gives tenant q unbound GPUs of type t as cells, or nothing when the
// type lacks room, and returns how many. Only cloud GPUs are bound: an
// edge server is its owner's and an inference GPU inference's, lent to
// training while idle, so no tenant can be guaranteed one.
func (l *hivedLayout) bind(c *cluster.Cluster, tenant, t string, q int) int {
	unbound := func(g cluster.GPUID) bool { return l.owner[g] == "" }
	room := 0
	for _, n := range c.Nodes {
		if n.GPUType == t && cloudNode(&n) {
			room += usable(&n, unbound)
		}
	}
	if room < q {
		return 0
	}
	got := 0
	// Whole nodes, rack by rack.
	nodes := nodesByRack(c, t)
	for _, id := range nodes {
		n := &c.Nodes[id]
		if n.GPUs > 0 && n.GPUs <= q-got && usable(n, unbound) == n.GPUs {
			for k := 0; k < n.GPUs; k++ {
				l.owner[n.First+cluster.GPUID(k)] = tenant
			}
			got += n.GPUs
		}
	}
	// Buddy blocks for the rest, each on the node with the fewest unbound
	// GPUs that holds it; a block no node has an aligned cell for is bound
	// as its two halves.
	pending := blocks(q - got)
	for len(pending) > 0 {
		size := pending[0]
		pending = pending[1:]
		best := -1
		var gs []cluster.GPUID
		for _, id := range nodes {
			n := &c.Nodes[id]
			if b := buddy(n, size, unbound); b != nil && (best < 0 || usable(n, unbound) < usable(&c.Nodes[best], unbound)) {
				best, gs = id, b
			}
		}
		switch {
		case best >= 0:
			for _, g := range gs {
				l.owner[g] = tenant
			}
			got += size
		case size > 1:
			pending = append([]int{size / 2, size / 2}, pending...)
		}
	}
	return got
}

// nodesByRack lists the nodes of type t by rack index, then node index.
func nodesByRack(c *cluster.Cluster, t string) []int {
	var ids []int
	for _, n := range c.Nodes {
		if n.GPUType == t && n.GPUs > 0 && cloudNode(&n) {
			ids = append(ids, n.ID)
		}
	}
	slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(c.Nodes[a].RackIdx, c.Nodes[b].RackIdx) })
	return ids
}

// cloudNode reports whether n is on a cloud site (the kind a VC binds).
func cloudNode(n *cluster.Node) bool {
	return n.SiteKind == "" || n.SiteKind == cluster.SiteCloud
}

// blocks is the binary decomposition of n, largest first (6 -> 4, 2).
func blocks(n int) []int {
	var out []int
	for n > 0 {
		b := 1 << (bits.Len(uint(n)) - 1)
		out = append(out, b)
		n -= b
	}
	return out
}

// usable counts node n's GPUs for which ok holds.
func usable(n *cluster.Node, ok func(cluster.GPUID) bool) int {
	k := 0
	for i := 0; i < n.GPUs; i++ {
		if ok(n.First + cluster.GPUID(i)) {
			k++
		}
	}
	return k
}

// freeCells returns node n's maximal aligned power-of-two cells whose GPUs
// all satisfy ok, as (offset, size) pairs: the node's top cells (its binary
// decomposition), each split into buddies until a half is wholly usable.
func freeCells(n *cluster.Node, ok func(cluster.GPUID) bool) [][2]int {
	var out [][2]int
	var walk func(off, size int)
	walk = func(off, size int) {
		all, none := true, true
		for i := off; i < off+size; i++ {
			if ok(n.First + cluster.GPUID(i)) {
				none = false
			} else {
				all = false
			}
		}
		switch {
		case all:
			out = append(out, [2]int{off, size})
		case !none && size > 1:
			walk(off, size/2)
			walk(off+size/2, size/2)
		}
	}
	off := 0
	for _, b := range blocks(n.GPUs) {
		walk(off, b)
		off += b
	}
	return out
}

// buddy takes a cell of size (a power of two) on node n from the smallest
// free cell that holds it (lowest offset on ties): its first aligned part.
func buddy(n *cluster.Node, size int, ok func(cluster.GPUID) bool) []cluster.GPUID {
	best := [2]int{-1, 0}
	for _, cell := range freeCells(n, ok) {
		if cell[1] >= size && (best[0] < 0 || cell[1] < best[1]) {
			best = cell
		}
	}
	if best[0] < 0 {
		return nil
	}
	gs := make([]cluster.GPUID, size)
	for i := range gs {
		gs[i] = n.First + cluster.GPUID(best[0]+i)
	}
	return gs
}

// onNode allocates the blocks of n GPUs on node nd among GPUs for which ok
// holds, or returns nil.
func onNode(nd *cluster.Node, n int, ok func(cluster.GPUID) bool) []cluster.GPUID {
	taken := map[cluster.GPUID]bool{}
	still := func(g cluster.GPUID) bool { return ok(g) && !taken[g] }
	var out []cluster.GPUID
	for _, b := range blocks(n) {
		gs := buddy(nd, b, still)
		if gs == nil {
			return nil
		}
		for _, g := range gs {
			taken[g] = true
		}
		out = append(out, gs...)
	}
	return out
}

// PlaceJobs implements engine.JobPlacer.
func (h *HiveD) PlaceJobs(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment,
	jobOf func(id string) *job.Job) map[string][]cluster.GPUID {
	l := h.layout(c)
	quota := map[string]bool{}
	for _, vc := range h.VCs {
		quota[vc.Tenant] = true
	}
	// A job its VC's cells cannot hold (more GPUs than the VC has of the
	// type and site it asks for; HiveD refuses such a job at submission)
	// runs opportunistically rather than never.
	guaranteed := func(a engine.Assignment) (string, bool) {
		j := jobOf(a.Job)
		if j == nil || j.Priority < 0 || !quota[j.Tenant] || a.GPUs > l.bound[j.Tenant] {
			return "", false
		}
		t := a.GPUType
		if t == "" {
			t = j.GPUType
		}
		n := 0
		for k, v := range l.cells[j.Tenant] {
			if (t == "" || k.typ == t) && (a.Site == "" || k.site == a.Site) {
				n += v
			}
		}
		if n < a.GPUs {
			return "", false
		}
		return j.Tenant, true
	}
	holder := make([]string, c.TotalGPUs()) // GPU -> job placed or kept there
	soft := make([]bool, c.TotalGPUs())     // held by a kept opportunistic job
	out := map[string][]cluster.GPUID{}
	keeps := func(a engine.Assignment, vc string, isG bool) bool {
		h := held[a.Job]
		if len(h) == 0 || len(h) != a.GPUs || !a.Fits(c, h) {
			return false
		}
		for _, g := range h {
			n := c.NodeOf(g)
			if (a.GPUType != "" && n.GPUType != a.GPUType) || (a.Site != "" && n.Site != a.Site) || (isG && l.owner[g] != vc) {
				return false
			}
		}
		return true
	}
	take := func(id string, gs []cluster.GPUID) {
		out[id] = gs
		for _, g := range gs {
			holder[g] = id
		}
	}
	// 1. Kept jobs: the engine's own (down GPUs) and guaranteed ones hold
	// firmly; opportunistic ones hold until a guaranteed job needs the cell.
	var keptOpp []engine.Assignment
	for _, a := range run {
		vc, isG := guaranteed(a)
		if !keeps(a, vc, isG) {
			continue
		}
		if jobOf(a.Job) == nil || isG {
			take(a.Job, held[a.Job])
			continue
		}
		keptOpp = append(keptOpp, a)
		for _, g := range held[a.Job] {
			soft[g] = true
		}
	}
	// 2. New guaranteed jobs, in plan order, in their VC's cells: idle
	// cells first, else cells whose opportunistic jobs are evicted.
	evicted := map[string]bool{}
	for _, a := range run {
		vc, isG := guaranteed(a)
		if _, done := out[a.Job]; done || !isG {
			continue
		}
		mine := func(g cluster.GPUID) bool { return l.owner[g] == vc && holder[g] == "" }
		gs := h.find(c, a, func(g cluster.GPUID) bool { return mine(g) && !soft[g] })
		if gs == nil {
			gs = h.find(c, a, mine)
		}
		if gs == nil {
			continue
		}
		for _, g := range gs {
			if soft[g] {
				for _, o := range keptOpp {
					if slices.Contains(held[o.Job], g) {
						evicted[o.Job] = true
					}
				}
			}
		}
		take(a.Job, gs)
	}
	// 3. Kept opportunistic jobs that were not evicted.
	for _, a := range keptOpp {
		if !evicted[a.Job] {
			take(a.Job, held[a.Job])
		}
	}
	// 4. New opportunistic jobs, and evicted ones elsewhere, in plan
	// order, in any idle cell.
	for _, a := range run {
		if _, done := out[a.Job]; done {
			continue
		}
		if _, isG := guaranteed(a); isG || jobOf(a.Job) == nil {
			continue
		}
		if gs := h.find(c, a, func(g cluster.GPUID) bool { return holder[g] == "" }); gs != nil {
			take(a.Job, gs)
		}
	}
	return out
}

// find places assignment a on GPUs for which ok holds: an exact node shape
// when a names one; else one node when a fits a node of its type; else
// whole nodes of one rack (else of one site) and buddy blocks for the rest.
func (h *HiveD) find(c *cluster.Cluster, a engine.Assignment, ok func(cluster.GPUID) bool) []cluster.GPUID {
	fits := func(n *cluster.Node) bool {
		return n.GPUs > 0 && (a.GPUType == "" || n.GPUType == a.GPUType) && (a.Site == "" || n.Site == a.Site)
	}
	if len(a.Nodes) > 0 {
		var out []cluster.GPUID
		for _, ng := range a.Nodes {
			if ng.Node < 0 || ng.Node >= len(c.Nodes) || !fits(&c.Nodes[ng.Node]) {
				return nil
			}
			if len(a.Nodes) > 1 && c.Nodes[ng.Node].SiteKind == cluster.SiteEdge {
				return nil // a job on an edge site uses one server
			}
			gs := onNode(&c.Nodes[ng.Node], ng.GPUs, func(g cluster.GPUID) bool { return ok(g) && !slices.Contains(out, g) })
			if gs == nil {
				return nil
			}
			out = append(out, gs...)
		}
		return out
	}
	// One node, best fit.
	best, bestFree := -1, 0
	var bestGs []cluster.GPUID
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if !fits(n) || n.GPUs < a.GPUs {
			continue
		}
		if gs := onNode(n, a.GPUs, ok); gs != nil {
			if f := usable(n, ok); best < 0 || f < bestFree {
				best, bestFree, bestGs = i, f, gs
			}
		}
	}
	if best >= 0 {
		return bestGs
	}
	// Whole free nodes of one group (a rack, else a site) of one GPU type
	// plus buddy blocks for the rest; the group needing the fewest nodes
	// wins. Never edge servers: a job on an edge site uses one server.
	keys := func(n *cluster.Node) []string {
		return []string{"rack:" + strconv.Itoa(n.RackIdx) + "/" + n.GPUType, "site:" + n.Site + "/" + n.GPUType}
	}
	var order []string
	members := map[string][]int{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if !fits(n) || n.SiteKind == cluster.SiteEdge {
			continue
		}
		for _, k := range keys(n) {
			if _, seen := members[k]; !seen {
				order = append(order, k)
			}
			members[k] = append(members[k], i)
		}
	}
	slices.SortStableFunc(order, func(x, y string) int { return cmp.Compare(x[:4], y[:4]) }) // racks before sites
	var bestOut []cluster.GPUID
	bestNodes := 0
	for _, k := range order {
		if bestOut != nil && strings.HasPrefix(k, "site:") {
			break // a rack did it
		}
		ids := slices.Clone(members[k])
		slices.SortStableFunc(ids, func(x, y int) int { return -cmp.Compare(c.Nodes[x].GPUs, c.Nodes[y].GPUs) })
		var out []cluster.GPUID
		used := map[int]bool{}
		left := a.GPUs
		for _, id := range ids {
			n := &c.Nodes[id]
			if n.GPUs <= left && usable(n, ok) == n.GPUs {
				for k := 0; k < n.GPUs; k++ {
					out = append(out, n.First+cluster.GPUID(k))
				}
				used[id] = true
				left -= n.GPUs
			}
		}
		if left > 0 {
			var rest []cluster.GPUID
			restFree := 0
			for _, id := range ids {
				n := &c.Nodes[id]
				if used[id] || n.GPUs < left {
					continue
				}
				if gs := onNode(n, left, ok); gs != nil {
					if f := usable(n, ok); rest == nil || f < restFree {
						rest, restFree = gs, f
					}
				}
			}
			if rest == nil {
				continue
			}
			out = append(out, rest...)
			used[-1] = true // one more node, partly used
		}
		if bestOut == nil || len(used) < bestNodes {
			bestOut, bestNodes = out, len(used)
		}
	}
	return bestOut
}
