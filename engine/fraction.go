package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
)

// Fractional GPUs (docs/sharing.md): a job that asks for part of each GPU
// (job.Job.Fractional: a share, GPU memory or a MIG profile) holds GPUs
// that other fractional jobs hold too. The invariants, which check and
// checkPlacement enforce whatever the policy and placer do:
//   - a GPU is held either by whole-GPU jobs (one, or a packed pair) or by
//     fractional jobs, never both;
//   - the fractional jobs on a GPU together use at most all of its compute
//     (shares sum to <= 1) and of its memory (job.Fits);
//   - a GPU's fractional jobs all use MIG profiles or none does (a GPU in
//     MIG mode runs nothing outside its instances);
//   - a fractional job's GPUs are distinct, of its type, in one site.
//
// Fractions are placed by the engine itself, best fit, before and after
// the placer places the whole-GPU jobs (placeAll): the placer sees the GPUs
// fractions use as held, so placers need not know about parts.

// partsJob is the name under which GPUs used by fractional jobs are shown
// to the placer, as downJob shows the GPUs that are down.
const partsJob = "\x00parts"

// gpuParts is what the fractional jobs on one GPU use.
type gpuParts struct {
	holders     []*Status
	share, mem  float64
	mig         bool // its holders use MIG profiles
	whole, down bool // scratch of placeParts: held by a whole job / down
}

// add records a part of share and mem.
func (u *gpuParts) add(share, mem float64, mig bool) {
	u.share += share
	u.mem += mem
	u.mig = mig
}

// gpuMem is the memory of GPU g, GiB: its node's, or the default for its
// type; 0 when unknown (then no request for memory fits on it).
func gpuMem(c *cluster.Cluster, g cluster.GPUID) float64 {
	n := c.NodeOf(g)
	if n.GPUMem > 0 {
		return n.GPUMem
	}
	return cluster.DefaultGPUMemGiB[n.GPUType]
}

// part is st's demand on GPU g.
func (e *Engine) part(g cluster.GPUID, st *Status) (share, mem float64) {
	return st.Job.Demand(gpuMem(e.cfg.Cluster, g))
}

// holdPart records fractional job st on GPU g.
func (e *Engine) holdPart(g cluster.GPUID, st *Status) {
	if e.parts == nil {
		e.parts = make([]gpuParts, len(e.owner))
	}
	share, mem := e.part(g, st)
	u := &e.parts[g]
	u.holders = append(u.holders, st)
	u.add(share, mem, st.Job.MIG != "")
	st.Share = share
}

// unholdPart removes fractional job st from GPU g.
func (e *Engine) unholdPart(g cluster.GPUID, st *Status) {
	if e.parts == nil {
		return
	}
	u := &e.parts[g]
	i := slices.Index(u.holders, st)
	if i < 0 {
		return
	}
	u.holders = slices.Delete(u.holders, i, i+1)
	if len(u.holders) == 0 {
		*u = gpuParts{holders: u.holders}
	} else {
		share, mem := e.part(g, st)
		u.share, u.mem = math.Max(0, u.share-share), math.Max(0, u.mem-mem)
	}
	st.Share = 0
}

// Sharers returns the fractional jobs holding GPU g, in the order they
// came (shared; do not modify). Whole-GPU holders are Holders'.
func (e *Engine) Sharers(g cluster.GPUID) []*Status {
	if e.parts == nil {
		return nil
	}
	return e.parts[g].holders
}

// Used returns the compute share and memory (GiB) the fractional jobs on
// GPU g use together.
func (e *Engine) Used(g cluster.GPUID) (share, memGiB float64) {
	if e.parts == nil {
		return 0, 0
	}
	return e.parts[g].share, e.parts[g].mem
}

// HeldGPUs is the GPUs st holds, counting a fractional job's GPUs by its
// share of each: what Attained accumulates per second.
func (st *Status) HeldGPUs() float64 {
	if st.Share > 0 {
		return st.Share * float64(len(st.GPUs))
	}
	return float64(len(st.GPUs))
}

// partGPUs counts the GPUs that fractional jobs hold (for Allocated).
func (e *Engine) partGPUs() int {
	n := 0
	for i := range e.parts {
		if len(e.parts[i].holders) > 0 {
			n++
		}
	}
	return n
}

// adoptable refuses to adopt st onto GPU g when that would break the
// sharing invariants: a whole job onto a GPU fractions hold, a fraction
// onto a GPU a whole job holds or without room.
func (e *Engine) adoptable(g cluster.GPUID, st *Status) error {
	if !st.Job.Fractional() {
		if e.parts != nil && len(e.parts[g].holders) > 0 {
			return fmt.Errorf("adopt: job %s on GPU %d, which fractional job %s holds", st.Job.ID, g, e.parts[g].holders[0].Job.ID)
		}
		return nil
	}
	if o := e.owner[g]; o != nil {
		return fmt.Errorf("adopt: job %s on GPU %d, which %s holds", st.Job.ID, g, o.Job.ID)
	}
	var u gpuParts
	if e.parts != nil {
		u = e.parts[g]
	}
	if !e.fitsOn(&u, g, st) {
		return fmt.Errorf("adopt: job %s does not fit on GPU %d beside %d other jobs (share %.3g, %.3g GiB used)", st.Job.ID, g, len(u.holders), u.share, u.mem)
	}
	return nil
}

// fitsOn reports whether st's part fits on GPU g beside the use u.
func (e *Engine) fitsOn(u *gpuParts, g cluster.GPUID, st *Status) bool {
	if u.share > 0 && u.mig != (st.Job.MIG != "") {
		return false
	}
	share, mem := e.part(g, st)
	return job.Fits(u.share, u.mem, share, mem, gpuMem(e.cfg.Cluster, g))
}

// resetParts forgets the last plan's fractional sums (check starts here).
func (e *Engine) resetParts() {
	e.scratch.anyParts = false
	clear(e.scratch.partShare)
}

// MaxPartGPUs is the most GPUs fractional job j could ever hold on c
// (cluster.MaxJobGPUs, of j's type), counting only the GPUs whose memory
// holds its part, each alone.
func MaxPartGPUs(c *cluster.Cluster, j *job.Job) int {
	return c.MaxJobGPUsWhere(j.GPUType, func(n *cluster.Node) bool {
		mem := n.GPUMemGiB()
		share, need := j.Demand(mem)
		return job.Fits(0, 0, share, need, mem)
	})
}

// planParts counts a fractional assignment in check: its shares, summed
// per type in sc.partShare (an untyped part apart, except on a cluster of
// one type, where it shares GPUs with the typed parts), are rounded up to
// whole GPUs by partsTotal. It
// refuses what the engine cannot place: a fraction that packs with another
// job, or asks for an exact node shape.
func (e *Engine) planParts(a Assignment, st *Status, t string) error {
	if a.PackWith != "" {
		return fmt.Errorf("plan packs job %s, which asks for part of a GPU: fractional jobs share GPUs by their parts, not in pairs", a.Job)
	}
	if len(a.Nodes) > 0 {
		return fmt.Errorf("plan gives job %s an exact node shape, which fractional jobs do not take", a.Job)
	}
	sc := &e.scratch
	n := len(e.cfg.Cluster.GPUTypes())
	if len(sc.partShare) != n+1 {
		sc.partShare = make([]float64, n+1)
	}
	k := n // untyped
	if n == 1 {
		k = 0 // one type: an untyped part shares GPUs with that type's parts
	}
	mem := 0.0
	if t != "" {
		k = typeIndex(e.cfg.Cluster, t)
		if k < 0 {
			return fmt.Errorf("plan asks for %d %s GPUs, the cluster has 0", a.GPUs, t)
		}
	}
	for _, nd := range e.cfg.Cluster.Nodes {
		if nd.GPUs > 0 && (t == "" || nd.GPUType == t) {
			mem = max(mem, gpuMem(e.cfg.Cluster, nd.First))
		}
	}
	// On GPUs of unknown memory (mem 0) a share alone counts as that
	// share, as fitsOn places it there; a part asking for memory never
	// fits them and counts as a whole GPU.
	share, _ := st.Job.Demand(mem)
	sc.partShare[k] += share * float64(a.GPUs)
	sc.anyParts = true
	return nil
}

// partsTotal adds the plan's fractional shares, rounded up to whole GPUs,
// to the per-type counts, and returns them all (typed and untyped); it
// resets the sums for the next plan.
func (e *Engine) partsTotal(perType []int) int {
	sc := &e.scratch
	if !sc.anyParts {
		return 0
	}
	total := 0
	for k, s := range sc.partShare {
		whole := int(math.Ceil(s - 1e-9))
		if k < len(perType) {
			perType[k] += whole
		}
		total += whole
		sc.partShare[k] = 0
	}
	return total
}

// placeAll places a plan: fractional assignments by placeParts around the
// placer's placement of the others (through placePairs). Without any
// fractional job it is placePairs.
func (e *Engine) placeAll(held map[string][]cluster.GPUID, run []Assignment) map[string][]cluster.GPUID {
	if !e.scratch.anyParts && e.partGPUs() == 0 {
		return e.placePairs(held, run)
	}
	c := e.cfg.Cluster
	use := make([]gpuParts, c.TotalGPUs())
	for g := range use {
		use[g].down = e.IsDown(cluster.GPUID(g))
	}
	var whole, parts []Assignment
	for _, a := range run {
		if e.jobs[a.Job].Job.Fractional() {
			parts = append(parts, a)
		} else {
			whole = append(whole, a)
		}
	}
	var room NodeRoom
	if pr, ok := e.cfg.Placer.(PartRoom); ok {
		room = pr.PartRoom(c)
	}
	placed := map[string][]cluster.GPUID{}
	// 1. Fractions whose assignment is unchanged keep their GPUs.
	for _, a := range parts {
		h := held[a.Job]
		delete(held, a.Job)
		if len(h) != a.GPUs || !e.keepsParts(a, h, use) {
			continue
		}
		placed[a.Job] = h
		e.usePart(use, h, e.jobs[a.Job])
	}
	// 2. New fractions onto GPUs that fractions use already: they touch no
	// further GPU.
	for _, a := range parts {
		if _, ok := placed[a.Job]; !ok {
			if gs := e.fitParts(a, use, true, room); gs != nil {
				placed[a.Job] = gs
				e.usePart(use, gs, e.jobs[a.Job])
			}
		}
	}
	// 3. Whole GPUs, around the GPUs fractions use.
	var busy []cluster.GPUID
	for g := range use {
		if len(use[g].holders) > 0 {
			busy = append(busy, cluster.GPUID(g))
		}
	}
	if len(busy) > 0 {
		held[partsJob] = busy
		whole = append([]Assignment{{Job: partsJob, GPUs: len(busy)}}, whole...)
	}
	for id, gs := range e.placePairs(held, whole) {
		if id == partsJob {
			continue
		}
		placed[id] = gs
		for _, g := range gs {
			use[g].whole = true
		}
	}
	delete(held, partsJob)
	// 4. The fractions left, onto GPUs nothing uses.
	for _, a := range parts {
		if _, ok := placed[a.Job]; !ok {
			if gs := e.fitParts(a, use, false, room); gs != nil {
				placed[a.Job] = gs
				e.usePart(use, gs, e.jobs[a.Job])
			}
		}
	}
	return placed
}

// keepsParts reports whether fractional assignment a may keep GPUs h: they
// are of its type and site and still have room for it beside the jobs kept
// so far.
func (e *Engine) keepsParts(a Assignment, h []cluster.GPUID, use []gpuParts) bool {
	c := e.cfg.Cluster
	st := e.jobs[a.Job]
	for _, g := range h {
		n := c.NodeOf(g)
		if (a.GPUType != "" && n.GPUType != a.GPUType) || (a.Site != "" && n.Site != a.Site) || use[g].down || !e.fitsOn(&use[g], g, st) {
			return false
		}
	}
	return true
}

// usePart adds st's part on each of gs to use.
func (e *Engine) usePart(use []gpuParts, gs []cluster.GPUID, st *Status) {
	for _, g := range gs {
		share, mem := e.part(g, st)
		use[g].holders = append(use[g].holders, st)
		use[g].add(share, mem, st.Job.MIG != "")
	}
}

// fitParts chooses a.GPUs distinct GPUs for fractional assignment a, best
// fit: among GPUs where its part fits (with used, only GPUs fractions use
// already; else any GPU no whole job holds), it takes them on one node if
// it can, the node whose chosen GPUs would have the least room left, else
// in one site (not an edge site, whose jobs use one server) and of one
// GPU type the GPUs with the least room left. Among equal room, GPUs on nodes with fewer free
// GPUs come first (keeping whole nodes for gangs), then lower ids. With
// room, only the nodes it takes a's workers on count, and the workers
// chosen are taken there. It returns nil when a cannot be placed.
func (e *Engine) fitParts(a Assignment, use []gpuParts, used bool, room NodeRoom) []cluster.GPUID {
	c := e.cfg.Cluster
	st := e.jobs[a.Job]
	type cand struct {
		g    cluster.GPUID
		node int
		left float64 // share left on g after st's part
		free int     // GPUs on g's node nothing uses
	}
	var cands []cand
	for _, nd := range c.Nodes {
		if nd.GPUs == 0 || (a.GPUType != "" && nd.GPUType != a.GPUType) || (st.Job.GPUType != "" && nd.GPUType != st.Job.GPUType) || (a.Site != "" && nd.Site != a.Site) ||
			(room != nil && !room.Fits(a.Job, nd.ID, 1)) {
			continue
		}
		free := 0
		for k := 0; k < nd.GPUs; k++ {
			if u := &use[nd.First+cluster.GPUID(k)]; !u.whole && !u.down && len(u.holders) == 0 {
				free++
			}
		}
		for k := 0; k < nd.GPUs; k++ {
			g := nd.First + cluster.GPUID(k)
			u := &use[g]
			if u.whole || u.down || (used && len(u.holders) == 0) || !e.fitsOn(u, g, st) {
				continue
			}
			share, _ := e.part(g, st)
			cands = append(cands, cand{g: g, node: nd.ID, left: 1 - u.share - share, free: free})
		}
	}
	if len(cands) < a.GPUs {
		return nil
	}
	slices.SortStableFunc(cands, func(x, y cand) int {
		return cmp.Or(cmp.Compare(x.left, y.left), cmp.Compare(x.free, y.free), cmp.Compare(x.g, y.g))
	})
	var on map[int]int // workers picked per node, with room
	pick := func(keep func(cand) bool) (gs []cluster.GPUID, left float64) {
		clear(on)
		for _, x := range cands {
			if len(gs) < a.GPUs && keep(x) {
				if room != nil {
					if !room.Fits(a.Job, x.node, on[x.node]+1) {
						continue
					}
					if on == nil {
						on = map[int]int{}
					}
					on[x.node]++
				}
				gs = append(gs, x.g)
				left += x.left
			}
		}
		if len(gs) < a.GPUs {
			return nil, 0
		}
		return gs, left
	}
	// One node, the best fit.
	var best []cluster.GPUID
	bestLeft := 0.0
	for _, nd := range c.Nodes {
		if gs, left := pick(func(x cand) bool { return x.node == nd.ID }); gs != nil && (best == nil || left < bestLeft) {
			best, bestLeft = gs, left
		}
	}
	// Else one site, on one GPU type (a job's workers never mix types).
	if best == nil && a.GPUs > 1 {
		for _, site := range c.Sites() {
			if site.Kind == cluster.SiteEdge {
				continue
			}
			for _, t := range c.GPUTypes() {
				if gs, left := pick(func(x cand) bool { n := &c.Nodes[x.node]; return n.Site == site.Name && n.GPUType == t }); gs != nil && (best == nil || left < bestLeft) {
					best, bestLeft = gs, left
				}
			}
		}
	}
	if room != nil && best != nil {
		k := map[int]int{}
		for _, g := range best {
			k[c.NodeOf(g).ID]++
		}
		for node, n := range k {
			room.Take(a.Job, node, n)
		}
	}
	slices.Sort(best)
	return best
}

// checkParts enforces the sharing invariants on a placement: every
// fractional job's GPUs are distinct, given to no whole-GPU job (given, set
// by checkPlacement) and, all fractions together, within each GPU's compute
// and memory, MIG and non-MIG parts never on one GPU.
func (e *Engine) checkParts(p Plan, placed map[string][]cluster.GPUID) error {
	if !e.scratch.anyParts {
		return nil
	}
	use := map[cluster.GPUID]*gpuParts{}
	for _, a := range p.Run {
		gs, ok := placed[a.Job]
		st := e.jobs[a.Job]
		if !ok || !st.Job.Fractional() {
			continue
		}
		for i, g := range gs {
			if slices.Contains(gs[:i], g) {
				return fmt.Errorf("job %s placed on GPU %d twice", a.Job, g)
			}
			if o := e.given[g]; o != 0 {
				return fmt.Errorf("GPU %d given to both whole-GPU job %s and fractional job %s", g, p.Run[o-1].Job, a.Job)
			}
			u := use[g]
			if u == nil {
				u = &gpuParts{}
				use[g] = u
			}
			if !e.fitsOn(u, g, st) {
				return fmt.Errorf("GPU %d over-committed: job %s does not fit beside %d other jobs (share %.3g, %.3g GiB used, MIG %v)", g, a.Job, len(u.holders), u.share, u.mem, u.mig)
			}
			share, mem := e.part(g, st)
			u.holders = append(u.holders, st)
			u.add(share, mem, st.Job.MIG != "")
		}
	}
	return nil
}
