package flow

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
)

// elasticFlowPolicies registers the policies this file defines; Policies calls it.
func elasticFlowPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "elasticflow",
		Summary: "ElasticFlow (ASPLOS'23): admits a job only if every admitted job still meets its deadline at its " +
			"minimum satisfactory share (EDF order), gives spare GPUs by marginal return, buddy placement",
		Knobs:          efKnobs,
		NeedsDeadlines: true,
		Elastic:        true,
		Defaults:       DefaultFlow,
		Build:          contract.Typed(DefaultFlow, func(_ contract.Context, k FlowKnobs) (*Flow, error) { return NewElasticFlow(k) }),
	})
}

const efKnobs = "slot=60: seconds a reservation is rounded to (ElasticFlow's scheduling_slot); " +
	"spare=time: spare GPUs go to the most completion time saved per extra GPU (paper, EdgeFlow), or gputime: " +
	"the least GPU-time added per extra GPU; admit=true: decline jobs that cannot meet their deadline; " +
	"site=: the cloud site (default: the first cloud site); reserve=early: reserve each share from now, or late: as late as the deadline allows " +
	"(ElasticFlow's code fills back from the deadline; here it meets fewer deadlines); " +
	"force_admit=: a diagnostic, the oracle of one decision (docs/tidal.md): ID@T, the job whose ID begins with ID " +
	"waits untried until T seconds and is then admitted whatever the test says; " +
	"force_decline=: a diagnostic: the job whose ID begins with this is declined at arrival"

// Flow is ElasticFlow and, with Edge set, EdgeFlow: one deadline-aware
// elastic scheduler over a cloud site, optionally offloading jobs to edge
// servers.
//
// Each round (the simulator runs one at every arrival, completion and
// change of capacity):
//
//  1. Minimum satisfactory share. Jobs with deadlines, by priority then
//     earliest deadline, each take the smallest power-of-two GPU count
//     (among the counts whose measured throughput still grows) that
//     finishes its remaining work by its deadline on a timeline of the cloud
//     GPUs left after the earlier jobs' reservations; it may run on fewer
//     GPUs where the timeline has fewer free, and reserves what it uses
//     until its predicted end, rounded up to Slot seconds.
//  2. Admission. A new job is admitted only if it meets its deadline in that
//     pass and no admitted job that met its own stops meeting it; otherwise
//     it is declined (plan.Decline). Jobs without a deadline are never
//     declined: they take spare GPUs.
//  3. Spare GPUs go one step (the next power of two) at a time to the job
//     with the best marginal return (Spare).
//  4. Buddy placement: jobs biggest first, a job of up to one node's GPUs on
//     the best-fitting node, a bigger one on whole nodes; a job that does
//     not fit is shrunk to the next power of two.
//
// EdgeFlow adds offloading between 1 and 3 (edgeflow.go).
//
// The cloud is planned as one GPU type (cloudOf). A job pinned to another
// type is never given GPUs of a type it does not ask for: it stays out of
// the plan, declined at admission with a deadline, run on idle GPUs of its
// own type without one (othertype.go).
type Flow struct {
	Slot      float64
	Spare     string // "time" or "gputime"
	Admit     bool
	Site      string // cloud site; "" = the first cloud site
	Reserve   string // "late": a job's share is reserved as late as its deadline allows; "early": from now
	Edge      bool   // EdgeFlow
	Offload   string // EdgeFlow: "all" or "missing"
	RemoteBps float64
	name      string
	// edgeCap, when set (tidal), is how many servers of an edge site may
	// hold jobs until time until (+Inf: as far as it plans ahead): an
	// offload or edge admission that would hold more is not made, and jobs
	// beyond it leave the edge.
	edgeCap func(s *engine.Snapshot, site string, until float64) int
	// edgeLater, when set (tidal), says whether j, which no edge server
	// up now finishes in time, meets its deadline on an edge server that
	// the forecast brings up later.
	edgeLater func(s *engine.Snapshot, j *fjob) bool
	// parks (tidal): jobs wait for their cloud share on idle edge servers,
	// so a job on an edge server that misses its deadline there is
	// planned in the cloud, and its server is free to the others.
	parks bool
	// holds (tidal): a job never admitted is up for admission every
	// round, even after it ran (on GPUs lent outside the deadline plan).
	holds bool
	// holdCap, when set (tidal), makes the re-trial of a held job (one
	// that admission turned away in an earlier round, marked efHeld)
	// stricter than EdgeFlow's test: it is admitted only if it also meets,
	// and makes no admitted job miss that meets without it, on a plan with
	// the cloud at holdCap(j) GPUs and (pessimistic set while that plan
	// runs) the edge servers the forecast may take back before j's
	// deadline taken back. A newcomer in its first round keeps EdgeFlow's
	// test.
	holdCap func(s *engine.Snapshot, c cloud, j *fjob) int
	// heldTest, when set (tidal's rollout), is the re-trial of a held job
	// instead of holdSafe (which it may call itself): as holdSafe, it
	// leaves the jobs' outcomes and edge servers as the test left them.
	heldTest func(s *engine.Snapshot, c cloud, e *edges, base, trial []*fjob, j *fjob) bool
	// pessimistic is set while the hold re-trial's plan runs: edgeCap
	// plans the servers running jobs keep up until pessUntil.
	pessimistic bool
	pessUntil   float64
	holdStrict  bool // the re-trial allows no swap: every job that meets without the held job meets with it
	// holdKeep (tidal's hold_keep): a held job is admitted again only if
	// every deadline job that meets on EdgeFlow's own plan without it
	// still meets with it (holdStrict asks that only on the pessimistic
	// plan, where the jobs it would push out may already miss).
	holdKeep bool
	// testCap, when set (tidal's admit_cloud=mean), is the cloud GPUs the
	// admission test plans on (at most those up now); placement keeps
	// every GPU up.
	testCap func(s *engine.Snapshot, c cloud) int
	// testPath, when set (tidal's admit_cloud=path), is the cloud's GPUs
	// ahead as the admission test plans them: caps[k] from ts[k] on
	// (ascending, after now); the GPUs up now hold until ts[0]. nil: the
	// GPUs up now throughout (EdgeFlow's).
	testPath func(s *engine.Snapshot, c cloud) (ts []float64, caps []int)
	// usePath: the pass running is the admission test's, on testPath.
	usePath bool
	// holdYield (tidal): a job admitted after being held is of a lower
	// class than its priority's: it is planned after the other jobs of
	// its priority, and a newcomer may make it miss.
	holdYield bool
	// swap, when set (tidal's swap=mh), is asked about a newcomer that
	// admission turns away (trial holds it, meets[i] is whether base[i]
	// met without it): it returns the set with the newcomer in and one
	// admitted job out, which it appends to swapped, or nil.
	swap    func(test func([]*fjob), base, trial []*fjob, j *fjob, meets []bool) []*fjob
	swapped []*fjob
	// batch, when set (tidal's swap_batch), is asked about the round's
	// admission once every newcomer was tried: it returns the set and the
	// declined jobs as they stay, or with admitted jobs out (appended to
	// swapped) and more of the declined newcomers in than went out.
	batch func(test func([]*fjob), base, declined []*fjob) ([]*fjob, []*fjob)
	// last is the cloud timeline the latest pass left, its jobs'
	// reservations taken (valid until the next pass; tidal's swap_room).
	last *timeline
	// reasonTo, when set (tidal, which adds its own words to them), takes
	// the reasons explain works out, as bytes valid during the call
	// (explain.Scratch.PlanTo), instead of the plan's Reasons.
	reasonTo func(st *engine.Status, text []byte, r engine.Reason)

	// forceID, forceAt and declineID are the diagnostics force_admit
	// (the job whose ID begins with forceID waits untried until forceAt,
	// then is admitted whatever the test says) and force_decline (the job
	// whose ID begins with declineID is declined at arrival).
	forceID   string
	forceAt   float64
	declineID string

	// prefix, during admission, is the cloud pass of the admitted jobs
	// before the newcomer on trial: pass starts from it (admission).
	prefix *passPrefix
	// fullPasses plans every admission trial from scratch, as before
	// passPrefix (tests compare the two).
	fullPasses bool
	// spareScan hands spare GPUs by scanning every job for each step, as
	// before spareHeap (tests compare the two).
	spareScan bool

	round roundCtx   // the round Schedule plans, while it runs
	steps roundSteps // admission's steps over round, made once
	mem   flowMem    // kept from round to round (flowmem.go)
}

// FlowKnobs are ElasticFlow's knobs (efKnobs documents them).
type FlowKnobs struct {
	Slot    float64 `knob:"slot"`    // seconds, > 0
	Spare   string  `knob:"spare"`   // time or gputime
	Admit   bool    `knob:"admit"`   // decline jobs that cannot meet their deadline
	Site    string  `knob:"site"`    // the cloud site; "" = the first cloud site
	Reserve string  `knob:"reserve"` // early or late
	// ForceAdmit and ForceDecline are diagnostics (docs/tidal.md, the
	// oracle of one decision): "ID@T" and "ID", ID a prefix of a job ID.
	ForceAdmit   string `knob:"force_admit"`
	ForceDecline string `knob:"force_decline"`
}

// EdgeKnobs are EdgeFlow's knobs: ElasticFlow's and its edge's
// (edgeKnobs documents them).
type EdgeKnobs struct {
	FlowKnobs
	Offload     string  `knob:"offload"`      // all, short or missing
	RemoteGiBps float64 `knob:"remote_gibps"` // > 0
}

// DefaultFlow and DefaultEdge hold the default knobs.
var (
	DefaultFlow = FlowKnobs{Slot: 60, Spare: "time", Admit: true, Reserve: "early"}
	DefaultEdge = EdgeKnobs{FlowKnobs: DefaultFlow, Offload: "all", RemoteGiBps: 0.125}
)

// NewElasticFlow builds ElasticFlow with knobs k.
func NewElasticFlow(k FlowKnobs) (*Flow, error) {
	return newFlow(EdgeKnobs{FlowKnobs: k}, false, "elasticflow")
}

// NewEdgeFlow builds EdgeFlow with knobs k.
func NewEdgeFlow(k EdgeKnobs) (*Flow, error) { return newFlow(k, true, "edgeflow") }

// newFlow builds ElasticFlow, or EdgeFlow with edge (which reads k's edge
// knobs), refusing values out of range with errors that name policy (the
// policy whose knobs they are: tidal's planner is EdgeFlow).
func newFlow(k EdgeKnobs, edge bool, policy string) (*Flow, error) {
	f := &Flow{Edge: edge, name: "elasticflow"}
	if edge {
		f.name = "edgeflow"
	}
	f.Slot, f.Spare, f.Admit, f.Site, f.Reserve = k.Slot, k.Spare, k.Admit, k.Site, k.Reserve
	if !(f.Slot > 0) {
		return nil, fmt.Errorf("policy %s: slot=%v: want seconds > 0", policy, f.Slot)
	}
	if f.Spare != "time" && f.Spare != "gputime" {
		return nil, fmt.Errorf("policy %s: spare=%q: want time or gputime", policy, f.Spare)
	}
	if f.Reserve != "late" && f.Reserve != "early" {
		return nil, fmt.Errorf("policy %s: reserve=%q: want late or early", policy, f.Reserve)
	}
	if k.ForceAdmit != "" {
		id, at, ok := strings.Cut(k.ForceAdmit, "@")
		t, err := strconv.ParseFloat(at, 64)
		if !ok || id == "" || err != nil || !(t >= 0) || math.IsInf(t, 1) {
			return nil, fmt.Errorf("policy %s: force_admit=%q: want ID@T, a job ID's prefix and seconds >= 0", policy, k.ForceAdmit)
		}
		f.forceID, f.forceAt = id, t
	}
	f.declineID = k.ForceDecline
	if edge {
		f.Offload, f.RemoteBps = k.Offload, k.RemoteGiBps
		if f.Offload != "all" && f.Offload != "missing" && f.Offload != "short" {
			return nil, fmt.Errorf("policy %s: offload=%q: want all, short or missing", policy, f.Offload)
		}
		if !(f.RemoteBps > 0) {
			return nil, fmt.Errorf("policy %s: remote_gibps=%v: want a bandwidth > 0", policy, f.RemoteBps)
		}
	}
	return f, nil
}

// Name implements engine.Policy.
func (f *Flow) Name() string { return f.name }

// ProgressOnDemand implements engine.ProgressOnDemand: ElasticFlow and
// EdgeFlow read progress only through Snapshot.Progress (jobs: each job's
// remaining work and its rates at the levels worth giving). Their rule
// re-plans every active job's share to its deadline and hands spare GPUs
// by every job's remaining time each round, so a round pulls every running
// job: the simulator's rounds stay lazy, and the pulls replace the
// advance. Where the simulator keeps every job current anyway (scenarios'
// sites, job agents) it changes nothing.
func (f *Flow) ProgressOnDemand() bool { return true }

// Memo slots.
const (
	efAdmitted = 0 // 1 once admitted
	efHeld     = 1 // 1 once tidal held it (admission turned it away in a round, and it waits)
)

// fjob is one job as the flow scheduler sees it.
type fjob struct {
	st       *engine.Status
	prog     float64 // progress now, model units (Snapshot.Progress, read once)
	rem      float64 // work left, model units
	deadline float64 // absolute; +Inf without one
	levels   []int   // cloud GPU counts worth giving, ascending
	rates    []float64
	delay    float64 // seconds without progress if it runs in the cloud from now
	cur      int     // cloud GPUs it runs on now (0: none)
	margin   float64 // seconds kept before the deadline for a later resize (reserve=late)
	admitted bool
	fresh    bool // arrived since the last round: up for admission
	held     bool // tidal: turned away in an earlier round, up for admission again
	// class orders the jobs before their deadlines do, and a newcomer may
	// make admitted jobs of a lower class miss: 2 x priority + 1, or
	// 2 x priority for a job tidal held (holdYield).
	class int
	ord   int // its place in the round's order (jobs)
	at    int // its index in the snapshot's Jobs (jobs)
	prio  int // its Job's Priority (jobs)

	// Outcome of a pass.
	share    int     // minimum satisfactory share (0: none meets the deadline)
	now      int     // cloud GPUs it runs on now
	end      float64 // predicted end
	meets    bool
	edge     int // edge node it runs on (EdgeFlow), -1 for none
	edgeGPUs int
	pin      int // EdgeFlow: the idle edge server admission gave it this round, -1 for none

	// other: it asks for a GPU type other than the one the cloud is
	// planned on (cloud.gpuType). It has no levels there and stays out of
	// the deadline plan (Schedule's splitOther, runOther).
	other bool
}

// cloud describes the cloud site of a snapshot.
type cloud struct {
	site    string
	gpuType string
	perNode int
	nodes   []int
	cap     int
}

// cloudOf is the cloud site f plans (Site, or the first cloud site) as one
// GPU type: ElasticFlow and EdgeFlow plan a homogeneous cloud. On a site
// of several types it is the type with the most GPUs there (the first in
// the site's order of nodes on a tie), not its first node's: the order of
// nodes is no choice of the user's (in tide kube, the nodes' names), and
// a site of 2 A100 nodes before 10 T4 nodes planned every job that names
// no type on the two. Nodes of other types count in neither perNode nor
// cap; the jobs pinned to another type (Job.GPUType) stay out of the plan
// (asksOther).
func (f *Flow) cloudOf(s *engine.Snapshot) (cloud, bool) {
	for _, site := range s.Cluster.Sites() {
		if (f.Site == "" && site.Kind == cluster.SiteCloud) || site.Name == f.Site {
			c := cloud{site: site.Name, nodes: site.Nodes, gpuType: mostGPUs(s.Cluster, site.Nodes)}
			for _, id := range site.Nodes {
				n := &s.Cluster.Nodes[id]
				if n.GPUType == c.gpuType {
					c.perNode = max(c.perNode, n.GPUs)
					c.cap += s.UpGPUs(n)
				}
			}
			return c, c.gpuType != ""
		}
	}
	return cloud{}, false
}

// mostGPUs is the GPU type of c's nodes ids with the most GPUs (counted
// up or not, so that faults do not move the plan from type to type), the
// first in ids' order on a tie; "" when ids is empty.
func mostGPUs(c *cluster.Cluster, ids []int) string {
	best, most := "", 0
	for _, t := range c.GPUTypes() {
		n, first := 0, -1
		for i, id := range ids {
			if nd := &c.Nodes[id]; nd.GPUType == t {
				n += nd.GPUs
				if first < 0 {
					first = i
				}
			}
		}
		if first >= 0 && (best == "" || n > most || (n == most && first < firstOf(c, ids, best))) {
			best, most = t, n
		}
	}
	return best
}

// firstOf is the index in ids of the first node of type t (-1 none).
func firstOf(c *cluster.Cluster, ids []int, t string) int {
	for i, id := range ids {
		if c.Nodes[id].GPUType == t {
			return i
		}
	}
	return -1
}

// rate is j's progress per second on g packed GPUs of type t, at its
// progress p (Snapshot.Progress, read once per job by jobs). The
// allocation asked about is in f's kept memory.
func (f *Flow) rate(s *engine.Snapshot, st *engine.Status, t string, g, perNode int, p float64) float64 {
	r, _ := s.Model.Rate(st.Job, f.mem.packedAlloc(t, g, perNode), p)
	return r
}

// jobs reads every active job: its remaining work and its rates at the
// levels worth giving, both at its progress now (Snapshot.Progress, which
// pulls a running job's from the executor: engine.ProgressOnDemand). The
// jobs are f's kept memory (flowMem.pool), valid until the next round.
func (f *Flow) jobs(s *engine.Snapshot, c cloud) []*fjob {
	m := &f.mem
	for i, st := range s.Jobs {
		if i == len(m.pool) {
			m.pool = append(m.pool, new(fjob))
		}
		f.fillJob(m.pool[i], s, c, st)
	}
	// Priority classes first, then earliest deadline, then submission
	// (the snapshot's order), from the last round's order (flow_order.go).
	return m.sortJobs(s.Jobs)
}

// fjobOf is st as the flow plans it on cloud c: its remaining work and its
// rates at the levels worth giving, at its progress now. It is a new fjob
// (tidal's record keeps its levels and rates).
func (f *Flow) fjobOf(s *engine.Snapshot, c cloud, st *engine.Status) *fjob {
	j := new(fjob)
	f.fillJob(j, s, c, st)
	return j
}

// oddSize is the one GPU count a job of range [lo, hi] runs on when the
// range holds no power of two (a rigid 3 GPUs, as tide serve and tide kube
// take jobs; the simulator gives its jobs ranges from 1): lo. ElasticFlow
// sizes jobs in powers of two, and a job with none was never planned and
// waited for ever on idle GPUs. 0 when the range holds a power of two, or
// nothing (lo > hi).
func oddSize(lo, hi int) int {
	if lo < 1 || lo > hi {
		return 0
	}
	for g := 1; g <= hi; g *= 2 {
		if g >= lo {
			return 0
		}
	}
	return lo
}

// fillJob sets j to st as fjobOf describes it, reusing j's levels' memory.
func (f *Flow) fillJob(j *fjob, s *engine.Snapshot, c cloud, st *engine.Status) {
	p := s.Progress(st)
	*j = fjob{st: st, prog: p, rem: math.Max(st.Work-p, 0), deadline: math.Inf(1), edge: -1, pin: -1,
		admitted: st.Memo[efAdmitted] == 1, fresh: st.Memo[efAdmitted] == 0 && (st.Starts == 0 || f.holds),
		held: st.Memo[efAdmitted] == 0 && st.Memo[efHeld] == 1, class: 2*st.Job.Priority + 1,
		levels: j.levels[:0], rates: j.rates[:0]}
	if f.holdYield && st.Memo[efHeld] == 1 {
		j.class--
	}
	if st.Job.Deadline > 0 {
		j.deadline = st.Job.Deadline
	}
	// A job pinned to another type has no level on the cloud's GPUs: the
	// plan can give it none of them (the engine refuses a plan that gives
	// a job GPUs of another type than it asks for).
	j.other = asksOther(st, c)
	best := 0.0
	for g := 1; !j.other && g <= min(st.Job.MaxGPUs, c.cap); g *= 2 {
		if g < st.Job.MinGPUs {
			continue
		}
		r := f.rate(s, st, c.gpuType, g, c.perNode, p)
		if r > best*(1+1e-9) {
			j.levels = append(j.levels, g)
			j.rates = append(j.rates, r)
			best = r
		}
	}
	if n := oddSize(st.Job.MinGPUs, min(st.Job.MaxGPUs, c.cap)); n > 0 && !j.other {
		j.levels = append(j.levels, n)
		j.rates = append(j.rates, f.rate(s, st, c.gpuType, n, c.perNode, p))
	}
	costs := s.Model.Costs(st.Job)
	j.margin = costs.Resize
	switch {
	case len(st.GPUs) > 0 && s.Cluster.NodeOf(st.GPUs[0]).Site == c.site:
		j.cur = len(st.GPUs)
	case st.Starts == 0:
		j.delay = costs.Start
	default:
		j.delay = costs.Restart
	}
	if len(st.GPUs) > 0 && s.Cluster.NodeOf(st.GPUs[0]).Site != c.site {
		j.delay += f.moveCost(st)
	}
}

// moveCost is EdgeFlow's estimate of a move through remote storage.
func (f *Flow) moveCost(st *engine.Status) float64 {
	if f.RemoteBps <= 0 {
		return 0
	}
	return 2 * perf.CheckpointGiB(st.Job.Model) / f.RemoteBps
}

// level is the largest of j's levels <= n (0 when none).
func (j *fjob) level(n int) (int, float64) {
	g, r := 0, 0.0
	for i, l := range j.levels {
		if l <= n {
			g, r = l, j.rates[i]
		}
	}
	return g, r
}

// timeline is the cloud's free GPUs over time: free[k] from t[k] to t[k+1]
// (the last segment never ends).
type timeline struct {
	t    []float64
	free []int
}

// reset makes tl capacity GPUs free from now on, in tl's memory.
func (tl *timeline) reset(now float64, capacity int) {
	tl.t = append(tl.t[:0], now)
	tl.free = append(tl.free[:0], capacity)
}

// resetPath is reset with caps[k] GPUs from ts[k] on (those after now).
func (tl *timeline) resetPath(now float64, capacity int, ts []float64, caps []int) {
	tl.reset(now, capacity)
	for k, t := range ts {
		if t > now {
			tl.t = append(tl.t, t)
			tl.free = append(tl.free, caps[k])
		}
	}
}

// copyFrom makes tl a copy of o, in tl's memory.
func (tl *timeline) copyFrom(o *timeline) {
	tl.t = append(tl.t[:0], o.t...)
	tl.free = append(tl.free[:0], o.free...)
}

// fill runs j from now with at most g GPUs, as many as each segment has
// (rounded down to a level), and returns its end; ok is false when it does
// not end slack seconds before its deadline (or ever).
func (tl *timeline) fill(j *fjob, g int, slack float64) (end float64, ok bool) {
	start := tl.t[0] + j.delay
	done := 0.0
	for k := range tl.t {
		a := math.Max(tl.t[k], start)
		b := math.Inf(1)
		if k+1 < len(tl.t) {
			b = tl.t[k+1]
		}
		if a >= j.deadline {
			return 0, false
		}
		if b <= a {
			continue
		}
		_, r := j.level(min(g, tl.free[k]))
		if r <= 0 {
			continue
		}
		if need := (j.rem - done) / r; a+need <= b {
			end = a + need
			return end, end+slack <= j.deadline
		}
		done += (b - a) * r
	}
	return 0, false
}

// reserve takes from the timeline what fill(j, g) used, until end rounded
// up to slot seconds from now.
func (tl *timeline) reserve(j *fjob, g int, end, slot float64) {
	now := tl.t[0]
	until := now + math.Ceil((end-now)/slot-1e-9)*slot
	tl.split(until)
	for k := range tl.t {
		if tl.t[k] >= until {
			break
		}
		l, _ := j.level(min(g, tl.free[k]))
		tl.free[k] -= l
	}
}

// fillLate runs j back from its deadline with at most g GPUs, as many as
// each segment has (rounded down to a level), and returns when it must
// begin; ok is false when that is before it can start (now plus its delay).
func (tl *timeline) fillLate(j *fjob, g int) (begin float64, ok bool) {
	start := tl.t[0] + j.delay
	need := j.rem
	for k := len(tl.t) - 1; k >= 0; k-- {
		a := math.Max(tl.t[k], start)
		b := j.deadline - j.margin
		if k+1 < len(tl.t) {
			b = math.Min(b, tl.t[k+1])
		}
		if b <= a {
			continue
		}
		_, r := j.level(min(g, tl.free[k]))
		if r <= 0 {
			continue
		}
		if need <= (b-a)*r {
			return b - need/r, true
		}
		need -= (b - a) * r
	}
	return 0, need <= 0
}

// reserveLate takes what fillLate(j, g) used, from begin to the deadline,
// and returns the GPUs j holds now (0 when its reservation starts later).
func (tl *timeline) reserveLate(j *fjob, g int, begin float64) int {
	begin = math.Max(begin, tl.t[0])
	end := j.deadline - j.margin
	tl.split(begin)
	tl.split(end)
	now := 0
	for k := range tl.t {
		if tl.t[k] < begin {
			continue
		}
		if tl.t[k] >= end {
			break
		}
		l, _ := j.level(min(g, tl.free[k]))
		tl.free[k] -= l
		if k == 0 {
			now = l
		}
	}
	return now
}

// split makes t a segment boundary.
func (tl *timeline) split(t float64) {
	if t <= tl.t[0] {
		return
	}
	k := sort.SearchFloat64s(tl.t, t)
	if k < len(tl.t) && tl.t[k] == t {
		return
	}
	tl.t = append(tl.t, 0)
	tl.free = append(tl.free, 0)
	copy(tl.t[k+1:], tl.t[k:])
	copy(tl.free[k+1:], tl.free[k:])
	tl.t[k] = t
	tl.free[k] = tl.free[k-1]
}

// pass computes minimum satisfactory shares for the deadline jobs among js
// (in order) that are not on the edge, on a fresh timeline of capacity GPUs,
// and sets each job's share, current GPUs, end and meets. When js begins
// with f.prefix's jobs, as they were, it starts from there instead.
func (f *Flow) pass(now float64, capacity int, js []*fjob) {
	if p := f.prefix; p != nil && p.path == f.usePath && p.fits(now, capacity, js) {
		p.restore()
		p.trial.copyFrom(&p.tl)
		for _, j := range js[len(p.jobs):] {
			f.passOne(&p.trial, j)
		}
		f.last = &p.trial
		return
	}
	tl := &f.mem.tl
	if f.usePath {
		tl.resetPath(now, capacity, f.round.pts, f.round.pcaps)
	} else {
		tl.reset(now, capacity)
	}
	for _, j := range js {
		f.passOne(tl, j)
	}
	f.last = tl
}

// passOne is pass for one job, on the timeline the jobs before it left.
func (f *Flow) passOne(tl *timeline, j *fjob) {
	j.share, j.now, j.meets, j.end = 0, 0, false, math.Inf(1)
	if j.edge >= 0 {
		return
	}
	if math.IsInf(j.deadline, 1) || len(j.levels) == 0 {
		return
	}
	base := j.delay
	f.share(tl, j, base, j.margin)
	if !j.meets && f.Reserve == "early" && j.margin > 0 {
		// No share keeps a resize of slack (a job near its end or its
		// deadline): the first that still ends by the deadline.
		// Without it the job counted as missing, was shrunk to
		// leftovers, and that resize made it miss.
		f.share(tl, j, base, 0)
	}
}

// passPrefix is the cloud pass over the first admitted jobs of a round,
// kept while admission tries the newcomers after them. A newcomer's trial
// set is the admitted jobs plus it, in the round's order, and newcomers
// come in that order; so every trial begins with the admitted jobs before
// the newcomer, which plan the same way in every trial (the pass is
// sequential: a job's share depends only on the jobs before it). The
// prefix grows as admission moves on, and each trial plans only the
// newcomer and the jobs after it: admission costs what the jobs behind
// each newcomer cost, not the whole set for every newcomer.
type passPrefix struct {
	now      float64
	capacity int
	jobs     []*fjob       // planned into tl, in order
	edge     []int         // each one's edge server when planned (it must not have moved since)
	out      []passOutcome // what the pass gave each one
	tl       timeline      // after jobs
	trial    timeline      // a trial's timeline (memory reused)
	path     bool          // tl began on the admission test's path (testPath)
}

// passOutcome is what pass sets on a job.
type passOutcome struct {
	share, now int
	end        float64
	meets      bool
}

// reset makes p the empty prefix of a pass from now on capacity GPUs, in
// p's memory.
func (p *passPrefix) reset(now float64, capacity int) {
	p.now, p.capacity, p.path = now, capacity, false
	p.jobs, p.edge, p.out = p.jobs[:0], p.edge[:0], p.out[:0]
	p.tl.reset(now, capacity)
}

// resetPrefix is p.reset for admission's test: on the round's test path
// when there is one (testPath).
func (f *Flow) resetPrefix(p *passPrefix, now float64, capacity int) {
	p.reset(now, capacity)
	if f.round.pts != nil {
		p.tl.resetPath(now, capacity, f.round.pts, f.round.pcaps)
		p.path = true
	}
}

// advance plans js, the admitted jobs that follow p's, onto p's timeline.
func (p *passPrefix) advance(f *Flow, js []*fjob) {
	for _, j := range js {
		f.passOne(&p.tl, j)
		p.jobs = append(p.jobs, j)
		p.edge = append(p.edge, j.edge)
		p.out = append(p.out, passOutcome{j.share, j.now, j.end, j.meets})
	}
}

// fits reports whether js begins with p's jobs, none of them moved to or
// from an edge server since p planned it, on the same cloud.
func (p *passPrefix) fits(now float64, capacity int, js []*fjob) bool {
	if now != p.now || capacity != p.capacity || len(js) < len(p.jobs) {
		return false
	}
	for i, j := range p.jobs {
		if js[i] != j || j.edge != p.edge[i] {
			return false
		}
	}
	return true
}

// restore sets p's jobs' outcomes back to what the pass gave them (what
// runs after a pass, EdgeFlow's edge test, may change them).
func (p *passPrefix) restore() {
	for i, j := range p.jobs {
		o := p.out[i]
		j.share, j.now, j.end, j.meets = o.share, o.now, o.end, o.meets
	}
}

// share gives j (not on the edge, with a deadline) the smallest level that
// meets its deadline with slack seconds to spare, on the timeline from now
// after base seconds without progress, and reserves it.
func (f *Flow) share(tl *timeline, j *fjob, base, slack float64) {
	defer func() { j.delay = base }()
	for _, g := range j.levels {
		// A running job given another count pays a resize: without
		// it the plan shrank jobs to a share that just met the
		// deadline, grew them again with spare GPUs, and the resizes
		// it never counted made them miss.
		j.delay = base
		if j.cur > 0 && g != j.cur {
			j.delay += j.margin
		}
		if f.Reserve == "late" {
			begin, ok := tl.fillLate(j, g)
			if !ok {
				continue
			}
			// Allocations change only at rounds: begin at the slot
			// boundary before, which leaves time to spare.
			begin = math.Floor(begin/f.Slot) * f.Slot
			j.share, j.end, j.meets = g, j.deadline, true
			j.now = tl.reserveLate(j, g, begin)
			return
		}
		end, ok := tl.fill(j, g, slack)
		if !ok {
			continue
		}
		j.share, j.end, j.meets = g, end, true
		j.now, _ = j.level(min(g, tl.free[0]))
		tl.reserve(j, g, end, f.Slot)
		return
	}
}

// admission runs the admission test on the fresh jobs, in order: each is
// kept only if it meets its deadline without making an admitted job miss
// its own. It returns the jobs taking part and the declined ones.
//
// test plans a set for the admission test and place plans the final set:
// ElasticFlow's cloud pass for both; EdgeFlow tests on the cloud with the
// jobs already on edge servers left out, plus a direct check for an idle
// edge server, and places with its offloading (edgeflow.go).
//
// edge, when set (EdgeFlow), is tried on a newcomer the cloud would decline
// (trial holds it, missing is the admitted jobs' misses without it): true
// when it admits the job with the help of the edge (edgeAdmit).
//
// held, when set (tidal's holdCap), is asked about a held job that the test
// admits, with the set before it and the trial: false turns it away again.
func (f *Flow) admission(now float64, capacity int, js []*fjob, test, place func([]*fjob), edge func(trial []*fjob, j *fjob, missing int) bool, held func(base, trial []*fjob, j *fjob) bool) ([]*fjob, []*fjob) {
	m := &f.mem
	base, declined := m.base[:0], m.declined[:0]
	defer func() { m.base, m.declined = base, declined }() // kept for the next round
	for _, j := range js {
		if !j.fresh || !f.Admit || math.IsInf(j.deadline, 1) {
			base = append(base, j)
		}
	}
	// meets[i]: whether base[i] meets its deadline when base is tested
	// (known = base has not changed since).
	meets := m.meets[:0]
	defer func() { m.meets = meets }()
	known := false
	if !f.fullPasses {
		f.resetPrefix(&m.prefix, now, capacity)
		f.prefix = &m.prefix
		defer func() { f.prefix = nil }()
	}
	for _, j := range js {
		if !j.fresh || !f.Admit || math.IsInf(j.deadline, 1) {
			continue
		}
		forced := f.forceID != "" && strings.HasPrefix(j.st.Job.ID, f.forceID)
		if forced && now < f.forceAt {
			continue // waits, untried
		}
		if f.declineID != "" && strings.HasPrefix(j.st.Job.ID, f.declineID) {
			declined = append(declined, j)
			continue
		}
		// Priority classes: a newcomer may make admitted jobs of a lower
		// class miss, never those of its own class or above.
		if !known || f.fullPasses {
			test(base)
			meets = outcomes(meets, base)
			known = true
		}
		missing := 0
		for i, b := range base {
			if !math.IsInf(b.deadline, 1) && !meets[i] && b.class >= j.class {
				missing++
			}
		}
		at, _ := slices.BinarySearchFunc(base, j, func(a, b *fjob) int { return cmp.Compare(a.ord, b.ord) })
		if p := f.prefix; p != nil {
			p.advance(f, base[len(p.jobs):at])
		}
		// The trial set in memory of its own (m.trial), never base's:
		// admitted, it becomes base and base's memory the next trial's.
		trial := append(append(m.trial[:0], base[:at]...), j)
		trial = append(trial, base[at:]...)
		m.trial = trial
		test(trial)
		admit := j.meets && countMissing(trial, j.class) <= missing
		if admit && j.held && f.holdKeep && !keepsMet(base, meets) {
			admit = false // holdKeep: a held job takes no admitted job's place
		}
		if !admit && edge != nil && edge(trial, j, missing) {
			admit = true
		}
		if admit && j.held && held != nil && !held(base, trial, j) {
			admit = false
			j.pin = -1
		}
		if admit || forced {
			base, m.trial = trial, base
			meets = outcomes(meets, base)
			continue
		}
		if f.swap != nil {
			if set := f.swap(test, base, trial, j, meets); set != nil {
				base = set
				meets = outcomes(meets, base)
				if f.prefix != nil {
					f.resetPrefix(f.prefix, now, capacity) // the job out may have been in it
				}
				continue
			}
		}
		declined = append(declined, j)
	}
	f.prefix = nil
	if f.batch != nil && len(declined) > 1 {
		base, declined = f.batch(test, base, declined)
	}
	place(base)
	return base, declined
}

// holdSafe is the hold re-trial's stricter test (holdCap): j, a held job
// that EdgeFlow's test admits into trial, also meets on the pessimistic
// plan, and no more jobs of base (of its priority or above) miss there
// with it than without it, as EdgeFlow's own test counts.
// The jobs' outcomes and edge servers are as the test left them after.
func (f *Flow) holdSafe(s *engine.Snapshot, c cloud, e *edges, base, trial []*fjob, j *fjob) bool {
	keep := f.mem.saved[:0]
	for _, x := range trial {
		keep = append(keep, savedJob{passOutcome{x.share, x.now, x.end, x.meets}, x.edge, x.edgeGPUs})
	}
	f.mem.saved = keep
	pc := c
	pc.cap = max(min(f.holdCap(s, c, j), c.cap), 0)
	f.pessimistic, f.pessUntil = true, j.deadline
	plan := func(set []*fjob) {
		if e != nil {
			f.admitTest(s, pc, e, set)
			return
		}
		f.pass(s.Now, pc.cap, set)
	}
	plan(base)
	missing := countMissing(base, j.class)
	met := outcomes(f.mem.met, base)
	f.mem.met = met
	plan(trial)
	ok := j.meets && countMissing(trial, j.class) <= missing
	if f.holdStrict {
		for i, x := range base {
			if met[i] && !x.meets && !math.IsInf(x.deadline, 1) && x.class >= j.class {
				ok = false
			}
		}
	}
	f.pessimistic = false
	for i, x := range trial {
		k := keep[i]
		x.share, x.now, x.end, x.meets, x.edge, x.edgeGPUs = k.o.share, k.o.now, k.o.end, k.o.meets, k.edge, k.edgeGPUs
	}
	if e != nil {
		for id := range e.used {
			delete(e.used, id)
		}
		for _, x := range trial {
			if x.edge >= 0 {
				e.used[x.edge] = true
			}
		}
	}
	return ok
}

// keepsMet reports whether every deadline job of base that met (met[i],
// its outcome before the trial) still meets after it.
func keepsMet(base []*fjob, met []bool) bool {
	for i, b := range base {
		if met[i] && !b.meets && !math.IsInf(b.deadline, 1) {
			return false
		}
	}
	return true
}

// outcomes returns whether each job of js meets its deadline, in buf's memory.
func outcomes(buf []bool, js []*fjob) []bool {
	buf = buf[:0]
	for _, j := range js {
		buf = append(buf, j.meets)
	}
	return buf
}

// countMissing counts deadline jobs of class >= class that do not meet
// their deadline.
func countMissing(js []*fjob, class int) int {
	n := 0
	for _, j := range js {
		if !math.IsInf(j.deadline, 1) && !j.meets && j.class >= class {
			n++
		}
	}
	return n
}

// spare hands the cloud GPUs left now to jobs one level step at a time and
// returns how many are left. Each step goes to the job with the best
// marginal return (stepGain) among those whose next level fits in what is
// left, the first in js's order among equal gains.
func (f *Flow) spare(free int, js []*fjob) int {
	if f.spareScan {
		return f.spareByScan(free, js)
	}
	return f.spareHeap(free, js)
}

// nextStep is j's next level above the GPUs it runs on now, with its rate
// (0 when it has none or runs on the edge).
func (j *fjob) nextStep() (int, float64) {
	if j.edge >= 0 {
		return 0, 0
	}
	for i, l := range j.levels {
		if l > j.now {
			return l, j.rates[i]
		}
	}
	return 0, 0
}

// stepGain is the marginal return of giving j its next level, next at
// rate rNext: starting a waiting job comes first (a deadline job before
// the others), then the most completion time saved per extra GPU (or,
// spare=gputime, the least GPU-time added).
func (f *Flow) stepGain(j *fjob, next int, rNext float64) float64 {
	_, rNow := j.level(j.now)
	extra := float64(next - j.now)
	switch {
	case j.now == 0:
		// Starting a waiting job comes first; earlier deadlines first.
		gain := math.MaxFloat64 / 4
		if !math.IsInf(j.deadline, 1) {
			gain *= 2
		}
		return gain
	case f.Spare == "gputime":
		return -(float64(next)*j.rem/rNext - float64(j.now)*j.rem/rNow) / extra
	default:
		return (j.rem/rNow - j.rem/rNext) / extra
	}
}

// spareByScan is spare as it was first written: each step scans every job
// for the best gain. It costs jobs x steps (0.45 s a round at 10,000 jobs
// and GPUs); spareHeap makes the same choices.
func (f *Flow) spareByScan(free int, js []*fjob) int {
	for free > 0 {
		var best *fjob
		bestGain, bestNext := math.Inf(-1), 0
		for _, j := range js {
			next, rNext := j.nextStep()
			if next == 0 || next-j.now > free {
				continue
			}
			if gain := f.stepGain(j, next, rNext); gain > bestGain {
				best, bestGain, bestNext = j, gain, next
			}
		}
		if best == nil {
			return free
		}
		free -= bestNext - best.now
		best.now = bestNext
	}
	return free
}

// spareStep is a job's next step in spareHeap's heap: its gain and its
// place in the jobs' order (the tie-break).
type spareStep struct {
	gain float64
	at   int
}

// before says a's step goes before b's: the larger gain, then the earlier
// job.
func (a spareStep) before(b spareStep) bool {
	return a.gain > b.gain || (a.gain == b.gain && a.at < b.at)
}

// spareHeap is spare with each job's next step in a max-heap by gain,
// then order: O((jobs + steps) log jobs) instead of spareByScan's jobs x
// steps. It makes spareByScan's choices, step for step:
//   - A job's gain depends only on its own state, which changes only when
//     it is given a step: the heap holds each job's current gain, the same
//     figure the scan computes, recomputed when the job is given one.
//   - The scan skips a job whose step is larger than the GPUs left; those
//     only shrink, so such a job is never given a step again: it is
//     dropped when it comes to the top.
//   - The scan takes a gain only if it is above every earlier one
//     (strictly, from -Inf): the first job of the order among equal gains,
//     and never a job whose gain is -Inf or NaN. Those never enter the
//     heap, and ties go to the earlier job.
func (f *Flow) spareHeap(free int, js []*fjob) int {
	h := f.mem.heap[:0]
	defer func() { f.mem.heap = h }()
	if free <= 0 {
		return free
	}
	for i, j := range js {
		if next, rNext := j.nextStep(); next > 0 {
			if g := f.stepGain(j, next, rNext); g > math.Inf(-1) {
				h = append(h, spareStep{g, i})
			}
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for free > 0 && len(h) > 0 {
		j := js[h[0].at]
		next, _ := j.nextStep()
		if next-j.now > free {
			h = popTop(h) // never fits again: what is left only shrinks
			continue
		}
		free -= next - j.now
		j.now = next
		if next, rNext := j.nextStep(); next > 0 {
			if g := f.stepGain(j, next, rNext); g > math.Inf(-1) {
				h[0].gain = g
				siftDown(h, 0)
				continue
			}
		}
		h = popTop(h)
	}
	return free
}

// popTop removes h's top and restores the heap.
func popTop(h []spareStep) []spareStep {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	if len(h) > 0 {
		siftDown(h, 0)
	}
	return h
}

// siftDown moves h[i] down to its place in the heap below it.
func siftDown(h []spareStep, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].before(h[c]) {
			c++
		}
		if !h[c].before(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// Schedule implements engine.Policy.
func (f *Flow) Schedule(s *engine.Snapshot) engine.Plan {
	c, ok := f.cloudOf(s)
	if !ok {
		return engine.Plan{}
	}
	js, other := f.splitOther(f.jobs(s, c))
	var e *edges
	if f.Edge {
		e = f.edgesOf(s)
	}
	// The steps admission is handed read the round from f.round; they are
	// made once (closures over s, c and e made each round escape through
	// f.swap and allocated).
	f.round = roundCtx{s: s, c: c, tc: c, e: e}
	if f.testCap != nil {
		f.round.tc.cap = min(f.testCap(s, c), c.cap)
	}
	if f.testPath != nil {
		f.round.pts, f.round.pcaps = f.testPath(s, c)
	}
	defer func() { f.round = roundCtx{} }() // keep no snapshot alive
	if f.steps.pass == nil {
		f.steps = f.makeSteps()
	}
	place, test := f.steps.pass, f.steps.test
	var edge func([]*fjob, *fjob, int) bool
	if e != nil {
		place, test, edge = f.steps.offload, f.steps.admitTest, f.steps.edgeAdmit
	}
	var held func(base, trial []*fjob, j *fjob) bool
	if f.holdCap != nil {
		held = f.steps.holdSafe
	}
	if f.heldTest != nil {
		held = func(base, trial []*fjob, j *fjob) bool { return f.heldTest(s, c, e, base, trial, j) }
	}
	f.swapped = f.swapped[:0]
	kept, declined := f.admission(s.Now, f.round.tc.cap, js, test, place, edge, held)
	if len(other) > 0 {
		declined = f.declineOther(other, declined)
	}
	used := 0
	for _, j := range kept {
		if j.edge < 0 {
			used += j.now
		}
	}
	if left := f.spare(c.cap-used, kept); left > 0 && e != nil {
		f.pullBack(s, left, kept)
	}
	m := &f.mem
	plan := engine.Plan{Memo: emptied(&m.memo)}
	if len(declined) > 0 {
		m.decline = m.decline[:0]
		for _, j := range declined {
			m.decline = append(m.decline, j.st.Job.ID)
		}
		plan.Decline = m.decline
	}
	for _, j := range f.swapped {
		m := j.st.Memo
		m[efAdmitted], m[efHeld] = 0, 1 // out again, held: tried again each round
		plan.Memo[j.st.Job.ID] = m
	}
	for _, j := range kept {
		if j.st.Memo[efAdmitted] != 1 {
			m := j.st.Memo
			m[efAdmitted] = 1
			plan.Memo[j.st.Job.ID] = m
		}
	}
	m.nodes = m.nodes[:0]
	plan.Run = f.buddy(s, c, kept)
	if e != nil {
		plan.Run = f.assign(e, plan.Run, kept)
	}
	if len(other) > 0 {
		plan.Run = f.runOther(s, plan.Run, other)
	}
	m.run = plan.Run
	f.explain(s, &plan, js, other, c, c.cap-used)
	return plan
}

// roundCtx is the round Schedule plans: its snapshot, cloud and edge
// servers (nil without EdgeFlow).
type roundCtx struct {
	s  *engine.Snapshot
	c  cloud
	tc cloud // c as the admission test plans it (testCap)
	// pts, pcaps: the cloud ahead as the admission test plans it
	// (testPath); nil: tc.cap throughout.
	pts   []float64
	pcaps []int
	e     *edges
}

// roundSteps are the steps Schedule hands admission, over f.round.
type roundSteps struct {
	pass, test, offload, admitTest func([]*fjob)
	edgeAdmit                      func(set []*fjob, j *fjob, missing int) bool
	holdSafe                       func(base, trial []*fjob, j *fjob) bool
}

func (f *Flow) makeSteps() roundSteps {
	r := &f.round
	return roundSteps{
		pass: func(set []*fjob) { f.pass(r.s.Now, r.c.cap, set) },
		test: func(set []*fjob) {
			f.usePath = r.pts != nil
			f.pass(r.s.Now, r.tc.cap, set)
			f.usePath = false
		},
		offload: func(set []*fjob) { f.offload(r.s, r.c, r.e, set) },
		admitTest: func(set []*fjob) {
			f.usePath = r.pts != nil
			f.admitTest(r.s, r.tc, r.e, set)
			f.usePath = false
		},
		edgeAdmit: func(set []*fjob, j *fjob, missing int) bool { return f.edgeAdmit(r.s, r.tc, r.e, set, j, missing) },
		holdSafe:  func(base, trial []*fjob, j *fjob) bool { return f.holdSafe(r.s, r.c, r.e, base, trial, j) },
	}
}

// explain states, for each job left out, the share it needs against what
// the admitted jobs leave free before its deadline (appendTerms); for a
// job of other (asksOther), the types and its place outside the plan
// (appendOther), the jobs of other after js in the order.
func (f *Flow) explain(s *engine.Snapshot, plan *engine.Plan, js, other []*fjob, c cloud, free int) {
	m := &f.mem
	byStatus := emptied(&m.byStatus)
	order := m.statuses[:0]
	for _, j := range js {
		byStatus[j.st] = j
		order = append(order, j.st)
	}
	for _, j := range other {
		byStatus[j.st] = j
		order = append(order, j.st)
	}
	m.statuses = order
	m.sc.PlanTo(s, plan, order, func(b []byte, st *engine.Status) []byte {
		if j := byStatus[st]; j != nil {
			if j.other {
				return f.appendOther(b, s, c, j)
			}
			b = appendTerms(b, j, free)
		}
		return b
	}, f.reasonTo)
	if len(other) > 0 {
		f.otherReasons(s, plan, c, other)
	}
}

// appendTerms appends to b j's standing in ElasticFlow's terms: the share
// its deadline needs against the free GPUs the admitted jobs leave (free),
// or, without a deadline, those GPUs. Figures are written as fmt's %d and
// %.0f write them (TestAppendTermsMatchesSprintf).
func appendTerms(b []byte, j *fjob, free int) []byte {
	if math.IsInf(j.deadline, 1) {
		b = append(b, "no deadline: best effort on what deadline jobs leave ("...)
		b = strconv.AppendInt(b, int64(max(free, 0)), 10)
		return append(b, " cloud GPUs)"...)
	}
	b = append(b, "deadline t="...)
	b = strconv.AppendFloat(b, j.deadline, 'f', 0, 64)
	if j.share == 0 {
		b = append(b, " s: no share of the GPUs free before it meets it (predicted end t="...)
		b = strconv.AppendFloat(b, j.end, 'f', 0, 64)
		return append(b, " s)"...)
	}
	b = append(b, " s: needs a share of "...)
	b = strconv.AppendInt(b, int64(j.share), 10)
	b = append(b, " GPUs, "...)
	b = strconv.AppendInt(b, int64(max(free, 0)), 10)
	return append(b, " left free before it by the admitted jobs"...)
}

// buddy places the cloud jobs: biggest first, a job of at most one node's
// GPUs on the best-fitting node (its own node when it already runs there),
// a bigger one on the emptiest nodes; a job that does not fit is shrunk to
// the next lower level. It returns the assignments in f's kept memory.
func (f *Flow) buddy(s *engine.Snapshot, c cloud, js []*fjob) []engine.Assignment {
	m := &f.mem
	// Free GPUs by node ID; 0 for the nodes outside the cloud or of
	// another type, which no job is placed on (a job takes g >= 1 GPUs
	// of a node only where its free count is at least that).
	free := m.free[:0]
	free = slices.Grow(free, len(s.Cluster.Nodes))[:len(s.Cluster.Nodes)]
	clear(free)
	m.free = free
	for _, id := range c.nodes {
		if n := &s.Cluster.Nodes[id]; n.GPUType == c.gpuType {
			free[id] = s.UpGPUs(n)
		}
	}
	order := m.order[:0]
	for _, j := range js {
		if j.edge < 0 && j.now > 0 {
			order = append(order, j)
		}
	}
	m.order = order
	slices.SortStableFunc(order, func(a, b *fjob) int { return cmp.Compare(b.now, a.now) })
	out := m.run[:0]
	for _, j := range order {
		for g := j.now; g > 0; {
			if nodes := f.fit(s, c, free, j.st, g); nodes != nil {
				out = append(out, engine.Assignment{Job: j.st.Job.ID, GPUs: g, GPUType: c.gpuType, Site: c.site, Nodes: nodes})
				break
			}
			lower, _ := j.level(g - 1)
			g = lower
		}
	}
	return out
}

// fit finds g >= 1 GPUs for st on the cloud nodes' free counts (by node
// ID), taking them; the nodes are in f's kept memory.
func (f *Flow) fit(s *engine.Snapshot, c cloud, free []int, st *engine.Status, g int) []engine.NodeGPUs {
	m := &f.mem
	start := len(m.nodes)
	// Where it runs now, if that still fits: its GPUs per node, in the
	// order its nodes first appear.
	if len(st.GPUs) == g {
		cur := m.cur[:0]
		for _, gpu := range st.GPUs {
			n := s.Cluster.NodeOf(gpu).ID
			k := len(cur) - 1
			for k >= 0 && cur[k].Node != n {
				k--
			}
			if k < 0 {
				cur = append(cur, engine.NodeGPUs{Node: n})
				k = len(cur) - 1
			}
			cur[k].GPUs++
		}
		m.cur = cur
		// Its nodes must be c's, of c's type: runOther's free counts
		// cover every cloud site and type (buddy's only c's nodes of c's
		// type, so there this changes nothing).
		fits := true
		for _, n := range cur {
			nd := &s.Cluster.Nodes[n.Node]
			fits = fits && free[n.Node] >= n.GPUs && nd.Site == c.site && nd.GPUType == c.gpuType
		}
		if fits {
			for _, n := range cur {
				free[n.Node] -= n.GPUs
				m.nodeGPUs(n.Node, n.GPUs)
			}
			return m.nodesFrom(start)
		}
	}
	if g <= c.perNode {
		best := -1
		for _, id := range c.nodes {
			if fr := free[id]; fr >= g && (best < 0 || fr < free[best]) {
				best = id
			}
		}
		if best < 0 {
			return nil
		}
		free[best] -= g
		m.nodeGPUs(best, g)
		return m.nodesFrom(start)
	}
	ids := m.byFree(c.nodes, free)
	left := g
	for _, id := range ids {
		if left == 0 || free[id] == 0 {
			break
		}
		k := min(free[id], left)
		m.nodeGPUs(id, k)
		left -= k
	}
	if left > 0 {
		m.nodes = m.nodes[:start]
		return nil
	}
	nodes := m.nodesFrom(start)
	for _, n := range nodes {
		free[n.Node] -= n.GPUs
	}
	return nodes
}
