// Package engine is tide's scheduling core, shared by every executor: the
// simulator, the local process executor and Kubernetes.
//
// One scheduling round reads top to bottom:
//
//  1. account: bring every active job's attained service up to now (or,
//     with lazy counters, log now for them: incremental.go);
//  2. snapshot: hand the policy a read-only Snapshot of the cluster and the
//     active jobs with their history (the engine's own records, not copies),
//     and, for an IncrementalPolicy, the jobs that changed since the last
//     round (a Keep plan then costs the engine only the jobs it lists);
//  3. decide: hand the snapshot to the Policy, which returns a Plan (which
//     jobs should hold how many GPUs of which type, most important first);
//  4. check: reject a plan that gives a job GPUs twice, outside its limits, or
//     more GPUs of a type than exist, or packs jobs other than in mutual,
//     alike pairs (space sharing, share.go); fractional jobs count by their
//     shares (fraction.go);
//  5. place: the Placer maps the plan onto concrete GPUs, keeping jobs whose
//     allocation did not change where they are (a packed pair is placed as
//     one assignment and both members get its GPUs; jobs asking for part of
//     a GPU are packed best fit around it, never over-committing a GPU,
//     fraction.go);
//  6. diff: compare with what jobs hold now and emit Changes (start,
//     restart, resize, preempt) for the executor to apply, updating job states.
//
// The engine never reads the wall clock: it asks its Clock. It never runs
// anything either: executors apply Changes and report back through Report,
// Finish and Fail.
package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
)

// Clock tells the engine what time it is, in seconds.
type Clock interface{ Now() float64 }

// Memo is per-job scratch state a policy keeps between rounds (for example
// Tiresias' service at the last starvation reset). The engine stores it with
// the job, so it survives restarts of a live system, and hands it back in
// each snapshot; its meaning belongs to the policy that wrote it.
type Memo [4]float64

// Status is the engine's record of one job. Engine.Snapshot holds copies;
// the snapshot a policy gets in a round points at the engine's own records,
// which it must only read. The GPUs slice and Alloc.PerNode are shared and
// must not be modified by readers.
type Status struct {
	Job   *job.Job
	State job.State
	GPUs  []cluster.GPUID // held now, ascending; empty unless running
	Alloc perf.Alloc      // shape of GPUs

	Work     float64 // total work, model units (perf.Model.Work)
	Progress float64 // work done, model units, as last reported

	Attained float64 // GPU-seconds held so far
	Executed float64 // seconds holding GPUs so far
	Waited   float64 // seconds spent waiting (pending or preempted)
	// TypeExecuted is the seconds held on each GPU type (nil until the job
	// first runs): heterogeneity-aware policies (Gavel, Gandiva's rotation
	// across types, Gandiva_fair) read how much of each type a job
	// received, through TypeSeconds. In Engine.Snapshot's copies it holds
	// every type the job has held, counted up to the snapshot. The
	// engine's own records (a round's snapshot, Job, Active) are read
	// through TypeSeconds alone: there the map counts up to the start of
	// the job's current allocation (the engine adds the allocation's
	// seconds when it ends, so accounting a running job costs no map
	// work), and it stays nil while the job has been counted on one type
	// only (those seconds are kept beside it, segment.go, so the commonest
	// job makes no map). Readers must not modify it.
	TypeExecuted map[string]float64

	FirstStart float64 // first start time, -1 if never
	LastStart  float64 // last start, restart or resize time, -1 if never
	LastStop   float64 // last preemption, or submission
	Finish     float64 // completion time, -1 until finished

	Starts      int // launches, the first included
	Preemptions int
	Resizes     int

	Memo Memo

	// Slot is an index unique among the engine's active jobs (waiting or
	// running), reused after a job has ended and left them, and below the
	// most jobs active at once: a policy may keep per-job scratch in a
	// slice indexed by it instead of a map by ID (the slot alone does not
	// name the job: compare the status too).
	Slot int

	// reason is the policy's explanation of a decision about this job
	// (Reason, reasons.go): the one the round reasonAt gave it, or the
	// last one for good when reasonAt is reasonFinal; said is the last
	// non-zero one a round left it waiting with (WaitReason); expl is its
	// engine's lazily explained round (nil in copies).
	reason   Reason
	said     Reason
	reasonAt int
	expl     *explained

	// Share is the part of each held GPU's compute a fractional job holds
	// (job.Job.Demand on its GPUs, fraction.go); 0 for whole GPUs and while
	// it holds none. HeldGPUs weighs its GPUs by it.
	Share float64

	// PackedWith is the job sharing this job's GPUs now (space sharing,
	// Assignment.PackWith), "" when it runs alone or not at all.
	PackedWith string

	// Hints is the job's latest report of its own performance (a fitted
	// goodput model and gradient statistics); nil until it reports. Elastic
	// policies (Pollux, Optimus, AFS) read it; it is replaced, never
	// modified, so snapshots may share it.
	Hints *goodput.Hints

	since float64 // time up to which Attained/Executed/Waited are counted
	// typeNow is TypeExecuted[Alloc.GPUType] counted up to since, while
	// typeLive (from the start of the current allocation to its end,
	// segment.go); typeRan says the allocation was counted at all (only
	// then does TypeExecuted get its entry, as if counted in place).
	typeNow  float64
	typeLive bool
	typeRan  bool
	// gone says the job has left the active list (its slot and, under
	// Config.ForgetEnded, its record went) while its entry may still be
	// there, a tombstone until the list is swept (rounds.go). It sits
	// beside the counters a round's pass updates (since, typeNow), which
	// reads it for every entry: in the same cache line, not one more.
	gone    bool
	checked int // the round in which check last saw this job planned
	resized int // the round in which Schedule found it placed elsewhere
	planPos int // 1 + its index in the last checked plan (a lookup hint), 0 if none
	touched int // the engine's epoch when it last joined Changed (incremental.go)
	acct    int // the first of the engine's logged round times not yet counted (lazy counters)
	// oneType and oneSecs are the seconds written down for the only type
	// the job has been counted on, while oneSet (TypeExecuted is then nil;
	// segment.go).
	oneType string
	oneSecs float64
	oneSet  bool
}

// Snapshot is what a policy sees. It is read-only: policies must not modify
// it or anything it points to, nor keep it after Policy.Schedule returns
// (the engine reuses its memory for the next round, and its jobs are the
// engine's own records, which change as the engine goes on).
type Snapshot struct {
	Now     float64
	Round   int // rounds run before this one
	Cluster *cluster.Cluster
	Model   perf.Model
	// Jobs are the jobs that are waiting or running, ordered by submission
	// time, then ID. In the rounds of a JobsOnDemand policy it is nil until
	// ActiveJobs fills it.
	Jobs []*Status
	// GPUsPerNode is the largest GPU count of any node per GPU type, to shape
	// predictions (perf.Packed).
	GPUsPerNode map[string]int
	// Down marks, per GPU, the GPUs that are not available to training now
	// (taken back by inference, an edge server that is busy, a failed
	// node); nil when every GPU is up. The placer never hands them out.
	// See Available and UpGPUs.
	Down []bool
	// Sharing says the executor runs two jobs on the same GPUs
	// (Config.Sharing): only then may a plan pack pairs (Assignment.PackWith).
	Sharing bool

	// Changed lists, when Incremental is set, every job whose state,
	// GPUs, partner or history (Engine.Carry) changed since the previous
	// round's snapshot: the jobs submitted since, those that started,
	// stopped, moved or were adopted, and those that ended or were
	// declined (these are no longer in Jobs), each once, in no particular
	// order. The time-dependent counters (Attained, Executed, Waited,
	// Progress) change every round and do not by themselves make a job
	// changed. A policy that keeps per-job state from one round to the
	// next may update only these jobs, provided it planned this engine's
	// previous round (Round-1 of the engine From returns) itself.
	Changed []*Status
	// Incremental says Changed is complete: the engine's previous round
	// ran to its end (its plan was accepted and applied) and nothing
	// replaced the policy's memos since. False in the first round, after a
	// round that failed and after Engine.RestorePolicyState.
	Incremental bool
	// AddOnly says this round may be planned with Plan.Keep: the placer
	// places jobs around the GPUs held (Adder), no GPU is down and no jobs
	// share GPUs (in pairs or fractions).
	AddOnly bool
	// Explains says the engine takes this round's Plan.Explain from the
	// policy it holds whatever else the round is: it is set in every round
	// for a policy that implements ExplainsWhenRead and reports true, and
	// is false for any other (Incremental alone says the same for an
	// IncrementalPolicy, in its rounds planned from what changed). A
	// policy reads it, with From, to decide whether to leave its waiting
	// jobs' reasons to an Explainer or write them in Plan.Reasons.
	Explains bool

	eng      *Engine
	onDemand bool // Jobs is filled by ActiveJobs (JobsOnDemand)
}

// ActiveJobs returns Jobs, filling it first in a round of a JobsOnDemand
// policy (where it is nil until asked for): after it, Jobs holds the
// active jobs for whoever reads the snapshot.
func (s *Snapshot) ActiveJobs() []*Status {
	if s.onDemand && s.Jobs == nil {
		s.Jobs = s.eng.list()
	}
	return s.Jobs
}

// From returns the engine whose round the snapshot is (nil for snapshots
// built by hand and Engine.Snapshot's copies): with Round, it tells a policy whether this is the round after
// the last one it planned.
func (s *Snapshot) From() *Engine { return s.eng }

// Remaining predicts the seconds st needs to finish on n packed GPUs of type
// t ("" = the job's type or the cluster's first), ignoring restart costs,
// from its progress now (Snapshot.Progress: it pulls a running job's
// progress from the executor when the engine has a ProgressSource).
func (s *Snapshot) Remaining(st *Status, n int, t string) float64 {
	if t == "" {
		t = st.Job.GPUType
	}
	if t == "" {
		t = s.Cluster.GPUTypes()[0]
	}
	per := s.GPUsPerNode[t]
	a := s.eng.packed(t, n, per)
	if a.GPUType == "" {
		a = perf.Packed(t, n, per)
	}
	return perf.Remaining(s.Model, st.Job, a, s.Progress(st))
}

// packedKey names a packed allocation the engine keeps (packed).
type packedKey struct {
	t          string
	n, perNode int
}

// maxPacked bounds the packed allocations an engine keeps.
const maxPacked = 4096

// packed is perf.Packed(t, n, perNode), kept from call to call (the
// models only read an allocation), so that Snapshot.Remaining, which
// policies ask for every job they rank, allocates nothing; the zero Alloc
// on a nil engine.
func (e *Engine) packed(t string, n, perNode int) perf.Alloc {
	if e == nil {
		return perf.Alloc{}
	}
	// The last type and node size asked for first, by GPU count: a
	// policy ranks many jobs of one type in a row, and the map's key
	// hashes a string.
	f := &e.packedFast
	if t == f.t && perNode == f.perNode && n >= 0 && n < len(f.byN) && f.byN[n].GPUType != "" {
		return f.byN[n]
	}
	k := packedKey{t, n, perNode}
	if a, ok := e.packedAllocs[k]; ok {
		f.note(k, a)
		return a
	}
	a := perf.Packed(t, n, perNode)
	if e.packedAllocs == nil {
		e.packedAllocs = map[packedKey]perf.Alloc{}
	}
	if len(e.packedAllocs) < maxPacked {
		e.packedAllocs[k] = a
		f.note(k, a)
	}
	return a
}

// packedByN keeps the packed allocations of one GPU type and node size by
// GPU count (up to maxPackedByN GPUs), in front of Engine.packedAllocs.
type packedByN struct {
	t       string
	perNode int
	byN     []perf.Alloc // the zero Alloc: not kept
}

// maxPackedByN bounds the GPU counts packedByN keeps.
const maxPackedByN = 256

// note keeps a, the packed allocation of k, when k is of f's type and
// node size, else makes f that of k's.
func (f *packedByN) note(k packedKey, a perf.Alloc) {
	if k.n < 0 || k.n >= maxPackedByN || a.GPUType == "" {
		return
	}
	if k.t != f.t || k.perNode != f.perNode {
		f.t, f.perNode = k.t, k.perNode
		clear(f.byN)
	}
	if k.n >= len(f.byN) {
		f.byN = append(f.byN, make([]perf.Alloc, k.n+1-len(f.byN))...)
	}
	f.byN[k.n] = a
}

// Assignment asks for one job to hold GPUs.
type Assignment struct {
	Job     string // job ID
	GPUs    int    // how many, within the job's [MinGPUs, MaxGPUs]
	GPUType string // "" = any type (the placer picks)
	// Site, when set, is the site the job must run in. Whether set or not,
	// a job never spans sites, and on an edge site it uses one server.
	Site string
	// Nodes, when set, is the exact shape the policy wants (Pollux chooses
	// nodes itself): GPUs on each listed node, summing to GPUs. A placer
	// honours it or leaves the job unplaced; a job already holding this
	// shape keeps its GPUs.
	Nodes []NodeGPUs
	// PackWith, when set, names the job this one shares its GPUs with (space
	// sharing: both processes on every GPU at once). The contract:
	//   - the partner is in the same plan with PackWith naming this job (pairs
	//     are mutual, so no GPU ever holds more than two jobs);
	//   - both ask for the same GPUs, GPUType, Site and Nodes;
	//   - the engine was built with Config.Sharing (Snapshot.Sharing) and its
	//     model is a perf.Sharer that rates the pair on the GPUs placed.
	// The placer sees the pair as one assignment, at the position of the
	// member listed first, and both jobs get the same GPUs; capacity counts
	// them once. Forming, leaving or changing a pair is an ordinary start,
	// resize or preemption of the job that moves; a job that keeps its GPUs
	// while its partner comes or goes gets no Change, only a new PackedWith.
	PackWith string
}

// NodeGPUs is a GPU count on one node (cluster.Node.ID).
type NodeGPUs struct{ Node, GPUs int }

// Fits reports whether GPUs gs (on cluster c) have the shape a.Nodes asks
// for; true when a.Nodes is empty.
func (a *Assignment) Fits(c *cluster.Cluster, gs []cluster.GPUID) bool {
	if len(a.Nodes) == 0 {
		return true
	}
	left := 0
	for _, n := range a.Nodes {
		left += n.GPUs
	}
	if left != len(gs) {
		return false
	}
	for _, n := range a.Nodes {
		have := 0
		for _, g := range gs {
			if c.NodeOf(g).ID == n.Node {
				have++
			}
		}
		if have != n.GPUs {
			return false
		}
	}
	return true
}

// Plan is a policy's decision. Jobs not listed in Run hold no GPUs after the
// round: running ones are preempted. The engine keeps none of a plan's
// slices or maps after the round (it copies what it records), so a policy
// may reuse their memory for its next plan.
type Plan struct {
	Run  []Assignment    // most important first; the placer honours this order
	Memo map[string]Memo // updated policy memos by job ID
	// Decline lists waiting jobs the policy refuses at admission (they
	// cannot meet their deadline): they end in state declined and never run.
	Decline []string
	// Reasons explains, by job ID, the decision about each job the plan
	// leaves waiting, preempts, shrinks or declines (and may explain jobs it
	// runs). The engine copies each job's entry to the job (Status.Reason);
	// a job with no entry gets the zero Reason, or, with Explain, the one
	// Explain gives.
	Reasons map[string]Reason
	// Explain gives the reasons of the jobs the plan leaves waiting when
	// they are read rather than all at once (reasons.go): every active job
	// that holds no GPUs after the round, is not listed in Run, Stop or
	// Decline and has no entry in Reasons gets the reason Explain.Reason
	// gives it, asked when Status.Reason or WaitReason is read, not
	// before. In a plan without Keep the jobs it preempts are among them
	// unless Reasons lists them.
	Explain Explainer
	// Warnings are what went wrong inside the policy without stopping it,
	// above all a fallback (an LP the solver could not solve, replaced by a
	// simpler rule). The engine records every one (Engine.Warnings).
	Warnings []Warning
	// Err, when set, says the policy could not plan this round at all: the
	// engine records the warnings, then fails the round with Err, changing
	// no job (a live executor retries at its next round). A policy that can
	// still plan by a simpler rule returns that plan with a warning instead.
	Err error
	// Keep says the plan is "as before, plus these": every job that holds
	// GPUs keeps them unchanged, as if listed with what it holds, and Run
	// lists only jobs that hold none, to start in that order (most
	// important first). It is the plan, listing every job, that would
	// run the running jobs unchanged and start these after them, and it
	// has the same outcome; its cost to the engine follows the jobs Run
	// lists, not the jobs running. A policy may return it only when the
	// snapshot's AddOnly is set (else the round fails); its Run may not
	// pack jobs or list fractional ones. Memo, Decline, Reasons and
	// Warnings mean what they mean in any plan.
	Keep bool
	// Stop, with Keep, lists running jobs the plan preempts: the plan is
	// "as before, less these, plus Run", the plan that lists every other
	// running job unchanged and then Run, with its outcome (the jobs
	// stopped are preempted first, in the engine's order of the active
	// jobs, and Run is placed around the GPUs the rest hold). A job it
	// lists must hold GPUs and may not be listed in Run, Decline or Stop
	// again. Without Keep it must be empty.
	Stop []string
}

// Reason explains a policy's decision about one job, in the policy's own
// terms ("queue 2 of 3, attained 7.2 GPU-h, 4 jobs ahead").
type Reason struct {
	Text string `json:"text,omitempty"`
	// Position is the job's 1-based position in the policy's order this
	// round; 0 when the policy has no order for it.
	Position int `json:"position,omitempty"`
	// PredictedStart is when the policy expects the job to start, in
	// engine seconds (Snapshot.Now's clock); 0 when it cannot tell.
	PredictedStart float64 `json:"predicted_start,omitempty"`
}

// Warning is one thing that went wrong inside a policy in a round.
type Warning struct {
	// Kind classifies it: "fallback" when the policy replaced its own rule
	// by a simpler one (the reason says why and with what).
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	// Job is the job the warning is about when it is about one
	// (WarnDropped); "" for the round as a whole.
	Job string `json:"job,omitempty"`
}

// WarnFallback is the Warning.Kind of a policy that replaced its own rule by
// a simpler one for a round (a solver failed).
const WarnFallback = "fallback"

// WarnDropped is the Warning.Kind of an assignment the engine dropped from
// a plan (Config.DropInvalid); the reason names the job and the mistake.
const WarnDropped = "dropped"

// Policy decides who runs. Schedule must be deterministic: the same snapshot
// gives the same plan. It may read the snapshot's model for predictions but
// never touches an executor.
type Policy interface {
	Name() string
	Schedule(s *Snapshot) Plan
}

// IncrementalPolicy is an optional Policy interface: a policy that keeps
// per-job state from round to round and reads Snapshot.Changed, and may
// return Keep plans. Its snapshots' Jobs is the engine's own list, which
// it must not reorder (copy it first), and under Config.LazyCounters it
// reads a job's Attained, Executed, Waited or TypeSeconds only after
// Snapshot.Sync. The engine fills Changed, Incremental and AddOnly
// only for the policy it was built with (or given by RestorePolicyState)
// when that policy implements IncrementalPolicy and Incremental reports
// true; for any other policy Changed is nil and both flags are false. A
// wrapper that hands an inner policy a snapshot of its own making must
// therefore not implement it (the inner policy then plans every round in
// full).
type IncrementalPolicy interface {
	Policy
	Incremental() bool
}

// JobsOnDemand is an optional Policy interface: an IncrementalPolicy
// whose JobsOnDemand reports true reads the active jobs of a round only
// through Snapshot.ActiveJobs (its snapshots' Jobs is nil until then), so
// that a round in which it plans from Changed alone need not have the
// list of active jobs ready: the tombstones the jobs that end leave in
// the engine's list (rounds.go) are then swept out in one pass only once
// they are a quarter of it, not by every round.
// Only the policy the engine holds counts: wrappers do not forward it.
type JobsOnDemand interface {
	IncrementalPolicy
	JobsOnDemand() bool
}

// ExplainsWhenRead is an optional Policy interface: a policy whose
// ExplainsWhenRead reports true may, in any round (planned in full or not,
// the first included), leave the reasons of the jobs its plan leaves
// waiting to Plan.Explain, and the engine tells it so (Snapshot.Explains).
// Its Explainer must answer as the Explainer contract says (reasons.go):
// for round r until the policy is next asked to plan, and during the round
// after. Only the policy the engine holds counts: a wrapper forwards it
// only if it hands the inner policy the engine's own snapshot and returns
// the inner plan's Explain as it is (a wrapper that rebuilds the plan or
// the snapshot must not, so that the inner policy then writes every
// reason in Plan.Reasons).
type ExplainsWhenRead interface {
	Policy
	ExplainsWhenRead() bool
}

// Placer maps a plan onto GPUs. held gives the GPUs each job holds now; a
// job whose assignment matches what it holds (same count, compatible type)
// must keep them, and GPUs held by jobs not in run are free. Place returns
// GPUs for every assignment it could place; assignments it cannot place are
// left out (the jobs wait). The order of a job's GPUs is the order the
// placer chose them (it shapes perf.Alloc.PerNode); no GPU may appear twice.
type Placer interface {
	Name() string
	Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []Assignment) map[string][]cluster.GPUID
}

// Adder is an optional Placer interface for the commonest round that
// changes something: every running job keeps its GPUs and some jobs that
// hold none start. PlaceAdded places add, in order, on the GPUs busy does
// not mark (busy[g]: GPU g is held; the engine's, read-only), and must give
// each job the GPUs Place would give it in that round, when every running
// job is planned unchanged and kept where it is. It writes them into
// placed, by job ID, and leaves out the jobs it cannot place: placed is
// the caller's map, empty on entry, which the engine reuses round after
// round (so the commonest changing round makes no map), so the placer must
// not keep it; the GPU slices it puts there are the caller's to keep (they
// become the jobs' Status.GPUs). The engine calls it only when no GPU is
// down and no jobs share GPUs (in pairs or fractions), so its cost can
// follow the jobs placed rather than the jobs running.
type Adder interface {
	Placer
	PlaceAdded(c *cluster.Cluster, busy []bool, add []Assignment, placed map[string][]cluster.GPUID)
}

// PartRoom is an optional Placer interface for placers whose workers need
// more of a node than its GPUs (tide kube: taints, selectors and affinity,
// CPU and memory). The engine places fractional jobs itself, around the
// placer (placeAll); each round it asks PartRoom for the nodes' room (nil:
// GPUs alone decide) and puts a fractional job's new parts, one worker per
// GPU, only where that room takes them.
type PartRoom interface {
	Placer
	PartRoom(c *cluster.Cluster) NodeRoom
}

// NodeRoom is the room on a cluster's nodes beyond their GPUs during one
// placement. Nodes are indices in the cluster's nodes.
type NodeRoom interface {
	// Fits reports whether k more workers of job fit on node.
	Fits(job string, node, k int) bool
	// Take counts k workers of job on node.
	Take(job string, node, k int)
}

// ChangeKind says what an executor must do to a job.
type ChangeKind string

// Change kinds.
const (
	Start   ChangeKind = "start"   // first launch
	Restart ChangeKind = "restart" // relaunch after a preemption
	Resize  ChangeKind = "resize"  // different GPUs while running
	Preempt ChangeKind = "preempt" // stop, keeping the checkpoint
	Decline ChangeKind = "decline" // refused at admission; the job is over
)

// Change is one thing the executor must do.
type Change struct {
	Kind     ChangeKind
	Status   *Status
	From, To []cluster.GPUID
}

// Config builds an Engine.
type Config struct {
	Cluster *cluster.Cluster
	Model   perf.Model
	Policy  Policy
	Placer  Placer
	Clock   Clock
	// ForgetEnded drops a job's record once it has ended and left the
	// active list (at the next round): Job no longer finds it, and its ID
	// may be submitted again. For executors that keep their own record of
	// ended jobs (the simulator): an engine replaying millions of jobs then
	// holds only the active ones.
	ForgetEnded bool
	// LazyCounters lets the engine keep the time-dependent counters of
	// the active jobs (Attained, Executed, Waited and the seconds per GPU
	// type) lazily when its policy is an IncrementalPolicy that says so: a
	// round then logs its time instead of adding each job's seconds, and a
	// job's counters are brought up to date, through every logged time in
	// order (the same sums, to the bit), when the engine changes the job
	// or someone asks (Snapshot.Sync, Engine.Sync, Engine.Snapshot). For
	// executors that read no job's counters in between (the simulator).
	LazyCounters bool
	// Sharing: the executor can run two jobs on the same GPUs and rates
	// them with the model's perf.Sharer (the simulator does). Without it a
	// plan that packs jobs is refused; policies read Snapshot.Sharing and
	// plan without packing instead.
	Sharing bool
	// Progress, when set, is the executor's hook for progress on demand
	// (progress.go): Snapshot.Progress asks it for a running job's progress
	// when a policy reads it, so the executor need not report every running
	// job's before each round for a policy that reads progress only so
	// (ProgressOnDemand). Nil for executors that report progress as their
	// jobs report it (the live ones).
	Progress ProgressSource
	// DropInvalid: an assignment of the plan that no placement could
	// honour for its job alone (a job that is not active, a GPU count
	// outside its limits, a GPU type it does not ask for) is dropped with
	// a warning (WarnDropped), and the round goes on for every other job.
	// Without it such a plan fails the round. For the live executors: a
	// policy's mistake about one job once stopped every job's scheduling,
	// round after round. The simulator leaves it off, so that tests fail
	// on the mistake.
	DropInvalid bool
}

// Engine holds the jobs and the GPU assignment.
type Engine struct {
	cfg     Config
	jobs    map[string]*Status
	given   []int     // scratch for checkPlacement, one per GPU
	active  []*Status // waiting or running, by (Submit, ID)
	owner   []*Status // GPU -> holder
	busy    []bool    // GPU -> held by a job (owner[g] != nil), for Adder
	co      []*Status // GPU -> second holder when two jobs share it; nil until then
	rounds  int
	perNode map[string]int
	oneNode [][]int // k -> []int{k}, shared by the allocations on one node (shape)
	down    []bool  // GPU -> not available; replaced, never modified, when it changes
	nDown   int
	// warnings are every Plan.Warnings so far, with their rounds.
	warnings []RoundWarning
	dropped  int // warnings dropped to keep MaxWarnings
	// ended counts entries of active that have become terminal since the
	// last compact: removing them lazily keeps Finish O(1).
	ended     int
	endedList []*Status // the jobs ended since the last compact
	// tombs counts the entries of active that have left (Status.gone):
	// they stay until swept (rounds.go), by the next round's pass over
	// the active jobs or, under a JobsOnDemand policy, once they are a
	// quarter of the list.
	tombs    int
	lazyJobs bool // the policy is a JobsOnDemand one that says so
	// slots are the Status.Slot values free for new jobs; nSlots is how
	// many were ever handed out.
	slots  []int
	nSlots int

	// Scratch reused from round to round, so that a round in which
	// nothing changes allocates nothing (rounds.go).
	scratch scratch

	// parts are, per GPU, its fractional holders (fraction.go); nil until
	// one runs.
	parts []gpuParts

	// Incremental rounds (incremental.go): changed are the jobs touched in
	// the current epoch (one per round's snapshot); incr says the last
	// round ran to its end; typeOf is each GPU's type index and heldOfType
	// the GPUs held per type index (by whole-GPU holders).
	changed    []*Status
	epoch      int
	incr       bool
	incrPolicy bool // the policy is an IncrementalPolicy that says so
	explains   bool // the policy is an ExplainsWhenRead that says so
	// Lazy counters (incremental.go): lazy says rounds log their time in
	// acctLog (entries from the acctBase-th on) instead of counting every
	// active job's seconds.
	lazy     bool
	acctLog  []float64
	acctBase int
	// lastOdd is the index (counted from the first time ever logged) of
	// the last logged time that is not a whole number of seconds, or is
	// below the time before it; -1 when none (syncWhole).
	lastOdd    int
	typeOf     []uint16
	heldOfType []int
	// expl is the round whose reasons the jobs read (reasons.go); inRound
	// says a round is running.
	expl    explained
	inRound bool
	// packedAllocs are the packed allocations Snapshot.Remaining asked
	// for (packed).
	packedAllocs map[packedKey]perf.Alloc
	packedFast   packedByN // the last type's, by GPU count
}

// New makes an engine. All Config fields are required.
func New(cfg Config) (*Engine, error) {
	if cfg.Cluster == nil || cfg.Model == nil || cfg.Policy == nil || cfg.Placer == nil || cfg.Clock == nil {
		return nil, fmt.Errorf("engine: cluster, model, policy, placer and clock are all required")
	}
	if cfg.Cluster.TotalGPUs() == 0 {
		return nil, fmt.Errorf("engine: the cluster has no GPUs")
	}
	e := &Engine{cfg: cfg, jobs: map[string]*Status{}, owner: make([]*Status, cfg.Cluster.TotalGPUs()), busy: make([]bool, cfg.Cluster.TotalGPUs()), given: make([]int, cfg.Cluster.TotalGPUs()), perNode: map[string]int{}}
	most := 0
	for _, n := range cfg.Cluster.Nodes {
		e.perNode[n.GPUType] = max(e.perNode[n.GPUType], n.GPUs)
		most = max(most, n.GPUs)
	}
	// oneNode[k] is the shape PerNode of k GPUs on one node, []int{k}, one
	// for every job of that shape (shape).
	counts := make([]int, most+1)
	e.oneNode = make([][]int, most+1)
	for k := range counts {
		counts[k] = k
		e.oneNode[k] = counts[k : k+1 : k+1]
	}
	e.gpuTypeIndex()
	e.setPolicyMode(cfg.Policy)
	e.epoch = 1 // a new status (touched 0) is not yet in Changed
	e.lastOdd = -1
	return e, nil
}

// Submit accepts a job as pending. It fails, accepting nothing, when the job
// is invalid, its ID is taken, the model cannot run it or the cluster could
// never hold it (Fits: per site, a job never spans sites).
func (e *Engine) Submit(j *job.Job) (*Status, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	if _, dup := e.jobs[j.ID]; dup {
		return nil, fmt.Errorf("job %s: id already submitted", j.ID)
	}
	if err := e.cfg.Model.Check(j); err != nil {
		return nil, err
	}
	// Per site, not over the cluster: a job never spans sites, and one
	// that no site can hold would wait for ever.
	if err := Fits(e.cfg.Cluster, j); err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now()
	st := &Status{Job: j, State: job.Pending, Work: e.cfg.Model.Work(j),
		FirstStart: -1, LastStart: -1, LastStop: now, Finish: -1, since: now, Slot: e.takeSlot(), acct: e.acctBase + len(e.acctLog),
		expl: &e.expl, reasonAt: e.expl.at} // no reason until a round gives one
	e.jobs[j.ID] = st
	e.insertActive(st)
	e.touch(st)
	return st, nil
}

func (e *Engine) insertActive(st *Status) {
	i := sort.Search(len(e.active), func(i int) bool { return lessSubmit(st, e.active[i]) })
	e.active = append(e.active, nil)
	copy(e.active[i+1:], e.active[i:])
	e.active[i] = st
}

func lessSubmit(a, b *Status) bool {
	if a.Job.Submit != b.Job.Submit {
		return a.Job.Submit < b.Job.Submit
	}
	return a.Job.ID < b.Job.ID
}

// Job returns a job's status, or nil.
func (e *Engine) Job(id string) *Status { return e.jobs[id] }

// Active returns the waiting and running jobs (shared; do not modify).
func (e *Engine) Active() []*Status { return e.list() }

// Rounds is the number of scheduling rounds run.
func (e *Engine) Rounds() int { return e.rounds }

// Allocated is the number of GPUs held by jobs (a shared GPU counts once,
// whether a packed pair or fractional jobs share it).
func (e *Engine) Allocated() int {
	n := 0
	for _, st := range e.list() {
		if (st.PackedWith == "" || st.Job.ID < st.PackedWith) && st.Share == 0 {
			n += len(st.GPUs)
		}
	}
	return n + e.partGPUs()
}

// Report records an executor's progress report for a running job, in model
// units. Progress never goes backwards: a lower value is ignored.
func (e *Engine) Report(id string, progress float64) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("report: unknown job %s", id)
	}
	if progress > st.Progress {
		st.Progress = min(progress, st.Work)
	}
	return nil
}

// ReportStatus is Report for st, a status this engine handed out (in a
// Change), without the lookup by ID: executors that report every running
// job every round use it.
func (e *Engine) ReportStatus(st *Status, progress float64) {
	if progress > st.Progress {
		st.Progress = min(progress, st.Work)
	}
}

// Hint records a job's report of its own performance. The engine keeps the
// pointer: the caller must not modify *h afterwards.
func (e *Engine) Hint(id string, h *goodput.Hints) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("hint: unknown job %s", id)
	}
	st.Hints = h
	return nil
}

// Finish marks a job finished now and frees its GPUs. No round runs: the
// caller decides whether a completion triggers one.
func (e *Engine) Finish(id string) error { return e.end(id, job.Finished) }

// Fail marks a job failed now and frees its GPUs.
func (e *Engine) Fail(id string) error { return e.end(id, job.Failed) }

func (e *Engine) end(id string, s job.State) error {
	st := e.jobs[id]
	if st == nil {
		return fmt.Errorf("finish: unknown job %s", id)
	}
	if st.State.Terminal() {
		return fmt.Errorf("finish: job %s is already %s", id, st.State)
	}
	now := e.cfg.Clock.Now()
	e.accountJob(st, now)
	if s == job.Finished {
		st.Progress = st.Work
	}
	e.release(st)
	e.endReason(st)
	st.State, st.Finish = s, now
	e.touch(st)
	e.ended++ // compact drops it from active
	e.endedList = append(e.endedList, st)
	return nil
}

func (e *Engine) release(st *Status) {
	e.sync(st)
	e.touch(st)
	for _, g := range st.GPUs {
		e.unhold(g, st)
	}
	e.unpack(st)
	st.endSegment()
	st.GPUs, st.Alloc = nil, perf.Alloc{}
}

// account brings every active job's counters up to now (or, with lazy
// counters, logs now for them).
func (e *Engine) account(now float64) {
	e.compact()
	if e.lazy {
		e.logAccount(now)
		return
	}
	if e.tombs == 0 {
		for _, st := range e.active {
			e.accountJob(st, now)
		}
		return
	}
	// The pass sweeps the tombstones compact left (every entry is active
	// or a tombstone once compact has run): at each tombstone it moves
	// the run of active entries before it down over the tombstones met so
	// far, in one copy (the entries just read), so the jobs that ended
	// since the last round cost it one move of the list in all, however
	// many they are, not one each.
	active := e.active
	k, from := 0, 0 // active[from:i] are active entries still to move to k
	for i, st := range active {
		if !st.gone {
			e.accountJob(st, now)
			continue
		}
		if k != from {
			copy(active[k:], active[from:i])
		}
		k, from = k+i-from, i+1
	}
	if k != from {
		copy(active[k:], active[from:])
	}
	k += len(active) - from
	clear(active[k:])
	e.active, e.tombs = active[:k], 0
}

// accountJob brings st's counters up to now.
func (e *Engine) accountJob(st *Status, now float64) {
	e.sync(st)
	e.countTo(st, now)
}

// countTo adds st's seconds from its last count up to now.
func (e *Engine) countTo(st *Status, now float64) {
	dt := now - st.since
	if dt <= 0 {
		return
	}
	if len(st.GPUs) > 0 {
		st.Executed += dt
		st.Attained += dt * st.HeldGPUs()
		st.typeNow += dt
		st.typeRan = true
	} else {
		st.Waited += dt
	}
	st.since = now
}

// Snapshot returns a read-only view of the engine now. It is the caller's to
// keep: its jobs are copies, which later rounds do not change.
func (e *Engine) Snapshot() *Snapshot {
	s := &Snapshot{}
	jobs := e.snapshot(s, nil, false)
	s.eng = nil // copies: no round follows from it
	copies := make([]Status, len(jobs))
	for i, st := range jobs {
		e.sync(st)
		copies[i] = *st
		copies[i].reason, copies[i].said, copies[i].expl = st.Reason(), st.WaitReason(), nil
		copies[i].TypeExecuted = st.typeExecutedNow() // the engine updates its own in place
		copies[i].typeLive, copies[i].typeRan = false, false
		copies[i].clearOne() // in the map now
		jobs[i] = &copies[i]
	}
	return s
}

// snapshot accounts every active job up to now and fills s, its Jobs in
// ptrs (grown as needed), which it returns. The jobs are the engine's own
// statuses, not copies: a round's policy only reads them, and nothing
// changes them while it runs, so copying each active job every round (what
// the round cost most for large traces) buys nothing. The pointer slice is
// the snapshot's own, so a policy that reorders Jobs leaves the engine's
// order alone; with shared, Jobs is the engine's active list itself (for
// an IncrementalPolicy, which must not reorder it), nil until
// Snapshot.ActiveJobs for a JobsOnDemand one, and ptrs is returned unused.
func (e *Engine) snapshot(s *Snapshot, ptrs []*Status, shared bool) []*Status {
	now := e.cfg.Clock.Now()
	e.account(now)
	var jobs []*Status
	switch {
	case !shared:
		ptrs = append(ptrs[:0], e.list()...)
		jobs = ptrs
	case !e.lazyJobs:
		jobs = e.list()
	}
	*s = Snapshot{Now: now, Round: e.rounds, Cluster: e.cfg.Cluster, Model: e.cfg.Model,
		Jobs: jobs, GPUsPerNode: e.perNode, Down: e.downView(), Sharing: e.cfg.Sharing, eng: e,
		onDemand: shared && e.lazyJobs}
	return ptrs
}

// Schedule runs one round and returns the changes for the executor, in a
// deterministic order: preemptions first (they free GPUs), then resizes and
// starts in plan order. The slice is the engine's, reused by its next
// Schedule (a round that changes jobs then makes none): read it before
// then, and copy what is kept longer.
func (e *Engine) Schedule() ([]Change, error) {
	// 1-2. Account and snapshot, into memory reused every round (policies
	// must not keep a snapshot).
	sc := &e.scratch
	clear(sc.changes) // last round's, handed out until now
	sc.changes = sc.changes[:0]
	snap := &sc.snap
	sc.ptrs = e.snapshot(snap, sc.ptrs, e.incrPolicy)
	e.handChanged(snap)
	now := snap.Now
	e.rounds++
	e.inRound = true
	explained := e.expl.at
	defer func() {
		e.inRound = false
		if e.expl.at != explained {
			e.noteWaits()
		} else {
			// The round failed before it explained anything: the
			// policy has moved on from the round its Explainer answers
			// for, so its reasons are kept as they are now.
			e.materialize()
		}
	}()
	// The round must run to its end for the next one's Changed to be
	// complete for the policy (Snapshot.Incremental).
	e.incr = false
	// 3. Decide.
	plan := e.cfg.Policy.Schedule(snap)
	if e.cfg.DropInvalid {
		plan = e.dropInvalid(plan, now)
	}
	if plan.Err != nil {
		e.warn(plan.Warnings, now)
		return nil, fmt.Errorf("policy %s at t=%.0f: %w", e.cfg.Policy.Name(), now, plan.Err)
	}
	if plan.Keep {
		changes, err := e.scheduleKeep(plan, snap)
		if err != nil {
			return nil, fmt.Errorf("policy %s at t=%.0f: %w", e.cfg.Policy.Name(), now, err)
		}
		e.incr = true
		sc.keepChanges(changes)
		return changes, nil
	}
	if len(plan.Stop) > 0 {
		return nil, fmt.Errorf("policy %s at t=%.0f: plan stops jobs (Plan.Stop) without keeping the others (Plan.Keep)", e.cfg.Policy.Name(), now)
	}
	changes, err := e.scheduleAll(plan, now)
	e.incr = err == nil
	sc.keepChanges(changes)
	return changes, err
}

// scheduleAll finishes a round whose plan lists every job to run.
func (e *Engine) scheduleAll(plan Plan, now float64) ([]Change, error) {
	sc := &e.scratch
	// 4. Check.
	planned, err := e.check(plan)
	if err != nil {
		return nil, fmt.Errorf("policy %s at t=%.0f: %w", e.cfg.Policy.Name(), now, err)
	}
	e.memos(plan)
	e.explain(plan, planned, now)
	declined, err := e.decline(plan, now)
	if err != nil {
		return nil, fmt.Errorf("policy %s at t=%.0f: %w", e.cfg.Policy.Name(), now, err)
	}
	kept, adds := e.keeps(plan, planned)
	if len(declined) == 0 && kept && adds == 0 {
		// The placer must leave every job on what it holds: nothing changes.
		// Most rounds end here, which keeps large simulations fast.
		return nil, nil
	}
	// 5. Place.
	var placed map[string][]cluster.GPUID
	if adder, ok := e.cfg.Placer.(Adder); ok && kept && len(declined) == 0 && e.nDown == 0 && e.co == nil && !packs(plan.Run) &&
		!e.scratch.anyParts && e.partGPUs() == 0 {
		// Every running job keeps its GPUs and others start: the placer
		// need only place those, around the GPUs held (the commonest round
		// that changes something; its cost no longer grows with the jobs
		// that keep running).
		run := sc.adds[:0]
		for i, a := range plan.Run {
			if len(planned[i].GPUs) == 0 {
				run = append(run, a)
			}
		}
		sc.adds = run
		placed = e.placeAdded(adder, run)
		err := e.checkPlacement(Plan{Run: run}, placed, true)
		var changes []Change
		if err == nil {
			changes = e.apply(plan, planned, placed, sc.changes[:0], now)
		}
		e.placedDone(run)
		clear(run) // the assignments' strings belong to the plan
		if err != nil {
			return nil, fmt.Errorf("placer %s at t=%.0f: %w", e.cfg.Placer.Name(), now, err)
		}
		return changes, nil
	}
	active := e.list()
	if sc.held == nil {
		sc.held = make(map[string][]cluster.GPUID, len(active))
	}
	held := sc.held
	clear(held)
	for _, st := range active {
		if len(st.GPUs) > 0 {
			held[st.Job.ID] = st.GPUs
		}
	}
	placed = e.placeAll(held, plan.Run)
	if err := e.checkPlacement(plan, placed, false); err != nil {
		return nil, fmt.Errorf("placer %s at t=%.0f: %w", e.cfg.Placer.Name(), now, err)
	}
	// 6. Diff. Free GPUs first (preemptions, then the old GPUs of resized
	// jobs), then hand out new ones in plan order.
	changes := declined
	for _, st := range active {
		if len(st.GPUs) == 0 {
			continue
		}
		var to []cluster.GPUID
		if st.checked == e.rounds { // planned: check marked it
			to = placed[st.Job.ID]
		}
		switch {
		case to == nil:
			changes = e.preempt(st, now, changes)
		case !sameGPUs(to, st.GPUs):
			st.resized = e.rounds
		}
	}
	changes = e.apply(plan, planned, placed, changes, now)
	e.pair(plan, placed)
	return changes, nil
}

// preempt stops running job st now, appending its Change to changes.
func (e *Engine) preempt(st *Status, now float64, changes []Change) []Change {
	changes = append(changes, Change{Kind: Preempt, Status: st, From: st.GPUs})
	e.release(st)
	st.State, st.LastStop = job.Preempted, now
	st.Preemptions++
	return changes
}

// apply appends to changes the starts, restarts and resizes of the jobs
// the plan placed (planned are their statuses, by assignment) on GPUs they
// do not hold, in plan order, and gives them their GPUs.
func (e *Engine) apply(plan Plan, planned []*Status, placed map[string][]cluster.GPUID, changes []Change, now float64) []Change {
	first := len(changes)
	for i, a := range plan.Run {
		st := planned[i]
		resized := st.resized == e.rounds
		if len(st.GPUs) > 0 && !resized {
			continue // unchanged
		}
		to := placed[a.Job]
		if to == nil {
			e.notPlaced(st, a)
			continue
		}
		ch := Change{Status: st, From: st.GPUs, To: to}
		switch {
		case resized:
			ch.Kind = Resize
			st.Resizes++
			e.release(st)
		case st.Starts > 0:
			ch.Kind = Restart
		default:
			ch.Kind = Start
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes[first:] {
		st := ch.Status
		e.sync(st)
		e.touch(st)
		for _, g := range ch.To {
			e.hold(g, st)
		}
		st.GPUs, st.Alloc = ch.To, e.shape(ch.To)
		st.beginSegment()
		if st.FirstStart < 0 {
			st.FirstStart = now
		}
		st.LastStart = now
		st.Starts++
		st.State = job.Running
	}
	return changes
}

// explain records the plan's reasons (planned are the jobs its Run
// lists) and its warnings.
func (e *Engine) explain(plan Plan, planned []*Status, now float64) {
	e.setReasons(plan, planned)
	e.warn(plan.Warnings, now)
}

// MaxWarnings is how many warnings an engine keeps between drains: a
// live executor that never drains them (or a policy that falls back every
// round for months) keeps the newest MaxWarnings, and WarningsDropped
// counts the rest.
const MaxWarnings = 1024

// warn records a round's policy warnings.
func (e *Engine) warn(ws []Warning, now float64) {
	for _, w := range ws {
		e.warnings = append(e.warnings, RoundWarning{Time: now, Round: e.rounds, Policy: e.cfg.Policy.Name(), Warning: w})
	}
	if n := len(e.warnings) - MaxWarnings; n > 0 {
		e.dropped += n
		e.warnings = append(e.warnings[:0], e.warnings[n:]...)
	}
}

// RoundWarning is a policy warning with the round that raised it.
type RoundWarning struct {
	Time   float64 `json:"time"` // engine seconds
	Round  int     `json:"round"`
	Policy string  `json:"policy"`
	Warning
}

// Warnings returns the warnings policies raised since the last
// DrainWarnings, oldest first, at most MaxWarnings of them (shared; do not
// modify).
func (e *Engine) Warnings() []RoundWarning { return e.warnings }

// DrainWarnings returns the warnings Warnings would and forgets them: an
// executor that acts on each round's warnings drains them after the round.
func (e *Engine) DrainWarnings() []RoundWarning {
	ws := e.warnings
	e.warnings = nil
	return ws
}

// WarningsDropped counts the warnings dropped, oldest first, to keep at
// most MaxWarnings between drains.
func (e *Engine) WarningsDropped() int { return e.dropped }

// placeAdded has adder place run into the round's reused map (Adder), which
// placedDone empties once the round is done with it.
func (e *Engine) placeAdded(adder Adder, run []Assignment) map[string][]cluster.GPUID {
	sc := &e.scratch
	if sc.added == nil {
		sc.added = make(map[string][]cluster.GPUID)
	}
	adder.PlaceAdded(e.cfg.Cluster, e.busy, run, sc.added)
	return sc.added
}

// keptAdded is the most jobs a round may place for the map placeAdded
// filled to be kept for the next round.
const keptAdded = 64

// placedDone empties the map placeAdded filled for run. A map grown for a
// round that placed many jobs (the first round may start thousands) is
// dropped instead: clearing or ranging over a map costs its capacity, not
// its entries, and checkPlacement ranges over it every round. A kept map
// loses run's jobs by deletion, and is cleared only when a placer put
// other keys there (checkPlacement fails that round).
func (e *Engine) placedDone(run []Assignment) {
	m := e.scratch.added
	if len(run) > keptAdded || len(m) > keptAdded {
		e.scratch.added = nil
		return
	}
	for _, a := range run {
		delete(m, a.Job)
	}
	if len(m) > 0 {
		clear(m)
	}
}

func sameGPUs(a, b []cluster.GPUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// shape turns a GPU list into the allocation shape the model needs: GPUs
// per node in the order nodes first appear. An allocation on one node
// gets its PerNode from oneNode, shared with every other one of its size
// (Alloc.PerNode is read, never modified: perf.Model keeps none and the
// statuses' readers must not modify them), so most starts make no slice;
// one across nodes makes one, of the length its nodes are counted to.
func (e *Engine) shape(gpus []cluster.GPUID) perf.Alloc {
	if len(gpus) == 0 {
		return perf.Alloc{}
	}
	c := e.cfg.Cluster
	runs, last := 0, -1 // runs: the entries of PerNode
	for _, g := range gpus {
		if n := c.NodeOf(g).ID; n != last {
			runs++
			last = n
		}
	}
	if k := len(gpus); runs == 1 && k < len(e.oneNode) {
		return perf.Alloc{GPUType: c.NodeOf(gpus[0]).GPUType, PerNode: e.oneNode[k]}
	}
	a := perf.Alloc{PerNode: make([]int, 0, runs)}
	last = -1
	for _, g := range gpus {
		n := c.NodeOf(g)
		if a.GPUType == "" {
			a.GPUType = n.GPUType
		}
		if n.ID != last {
			a.PerNode = append(a.PerNode, 0)
			last = n.ID
		}
		a.PerNode[len(a.PerNode)-1]++
	}
	return a
}

// keeps reports whether every running job is planned on the count, type,
// shape, site and partner it holds (so a placer must leave it where it
// is), and counts the planned jobs that hold no GPUs.
func (e *Engine) keeps(p Plan, planned []*Status) (kept bool, adds int) {
	running := 0
	for _, st := range e.list() {
		if len(st.GPUs) > 0 {
			running++
		}
	}
	for i, a := range p.Run {
		st := planned[i]
		if len(st.GPUs) == 0 {
			adds++
			continue
		}
		if len(st.GPUs) != a.GPUs || (a.GPUType != "" && st.Alloc.GPUType != a.GPUType) || !a.Fits(e.cfg.Cluster, st.GPUs) || a.PackWith != st.PackedWith ||
			(a.Site != "" && e.cfg.Cluster.NodeOf(st.GPUs[0]).Site != a.Site) {
			return false, adds
		}
		running--
	}
	return running == 0, adds
}

// check validates a plan and returns the status of each job it runs, in
// plan order.
func (e *Engine) check(p Plan) ([]*Status, error) {
	sc := &e.scratch
	planned := sc.planned[:0]
	perType := sc.perTypeCounts(e.cfg.Cluster)
	total := 0
	hint := 0
	e.resetParts()
	for _, a := range p.Run {
		st, err := e.checkAssignment(a, &hint)
		if err != nil {
			return nil, err
		}
		planned = append(planned, st)
		if a.PackWith != "" && e.packedSecond(a) {
			continue // the pair's GPUs were counted with its first member
		}
		t := a.GPUType
		if t == "" {
			t = st.Job.GPUType
		}
		if st.Job.Fractional() {
			if err := e.planParts(a, st, t); err != nil {
				return nil, err
			}
			continue // counted by partsTotal
		}
		if t != "" {
			k := typeIndex(e.cfg.Cluster, t)
			if k < 0 {
				return nil, fmt.Errorf("plan asks for %d %s GPUs, the cluster has 0", a.GPUs, t)
			}
			perType[k] += a.GPUs
		}
		total += a.GPUs
	}
	sc.planned = planned
	total += e.partsTotal(perType)
	if err := e.checkPairs(p); err != nil {
		return nil, err
	}
	if total > e.cfg.Cluster.TotalGPUs() {
		return nil, fmt.Errorf("plan asks for %d GPUs, the cluster has %d", total, e.cfg.Cluster.TotalGPUs())
	}
	for k, n := range perType {
		if t := e.cfg.Cluster.GPUTypes()[k]; n > e.cfg.Cluster.GPUsOfType(t) {
			return nil, fmt.Errorf("plan asks for %d %s GPUs, the cluster has %d", n, t, e.cfg.Cluster.GPUsOfType(t))
		}
	}
	sc.remember(planned)
	return planned, nil
}

// invalid says why no placement could honour assignment a for its job
// alone, or "" when one could (checkAssignment's per-job tests, but for a
// job listed twice).
func (e *Engine) invalid(a Assignment) string {
	st := e.jobs[a.Job]
	if st == nil || st.State.Terminal() {
		return fmt.Sprintf("plan runs job %q, which is not active", a.Job)
	}
	return mismatch(a, st)
}

// mismatch says how a asks for what job st cannot take (a GPU count
// outside its limits, a type it does not ask for), or "".
func mismatch(a Assignment, st *Status) string {
	switch {
	case a.GPUs < st.Job.MinGPUs || a.GPUs > st.Job.MaxGPUs:
		return fmt.Sprintf("plan gives job %s %d GPUs, outside its [%d, %d]", a.Job, a.GPUs, st.Job.MinGPUs, st.Job.MaxGPUs)
	case st.Job.GPUType != "" && a.GPUType != "" && a.GPUType != st.Job.GPUType:
		return fmt.Sprintf("plan gives job %s %s GPUs, it asks for %s", a.Job, a.GPUType, st.Job.GPUType)
	}
	return ""
}

// dropInvalid returns p without the assignments invalid refuses, and
// without those packed with them (a pair goes together), warning of each
// (Config.DropInvalid). A plan without any is returned as it is, with
// nothing allocated.
func (e *Engine) dropInvalid(p Plan, now float64) Plan {
	first := slices.IndexFunc(p.Run, func(a Assignment) bool { return e.invalid(a) != "" })
	if first < 0 {
		return p
	}
	dropped := map[string]bool{}
	var ws []Warning
	for _, a := range p.Run[first:] {
		if why := e.invalid(a); why != "" {
			dropped[a.Job] = true
			ws = append(ws, Warning{Kind: WarnDropped, Job: a.Job, Reason: why + ": the engine dropped it, and the job waits"})
		}
	}
	run := make([]Assignment, 0, len(p.Run))
	for _, a := range p.Run {
		switch {
		case dropped[a.Job]:
		case a.PackWith != "" && dropped[a.PackWith]:
			ws = append(ws, Warning{Kind: WarnDropped, Job: a.Job, Reason: fmt.Sprintf("job %s was packed with job %s, whose assignment was dropped: the engine dropped it too", a.Job, a.PackWith)})
		default:
			run = append(run, a)
		}
	}
	e.warn(ws, now)
	p.Run = run
	// A dropped job's reason is the drop, not what the policy said of a
	// job it meant to run. The policy's map is its own: copied, not
	// written.
	reasons := make(map[string]Reason, len(p.Reasons)+len(ws))
	maps.Copy(reasons, p.Reasons)
	for _, w := range ws {
		reasons[w.Job] = Reason{Text: w.Reason}
	}
	p.Reasons = reasons
	return p
}

// checkAssignment finds the job a names (see lookup) and checks that it
// is active, listed once (marking it checked this round), and asked
// within its GPU limits and type.
func (e *Engine) checkAssignment(a Assignment, hint *int) (*Status, error) {
	st := e.lookup(a.Job, hint)
	if st == nil || st.State.Terminal() {
		return nil, fmt.Errorf("plan runs job %q, which is not active", a.Job)
	}
	if st.checked == e.rounds {
		return nil, fmt.Errorf("plan lists job %s twice", a.Job)
	}
	st.checked = e.rounds
	if why := mismatch(a, st); why != "" {
		return nil, errors.New(why)
	}
	return st, nil
}

// checkPlacement enforces the invariants no placer may break: every GPU
// exists and is given at most once, and a job gets the count it was planned.
// With added, p holds only jobs that hold no GPUs and every GPU given must
// be free (no job holds it).
func (e *Engine) checkPlacement(p Plan, placed map[string][]cluster.GPUID, added bool) error {
	// e.given[g] holds 1 + the index in p.Run of the job given GPU g in this
	// round: a reused slice, since a map here dominated large simulations.
	// It is all zero between rounds: only the GPUs marked are cleared.
	defer func() {
		for _, gpus := range placed {
			for _, g := range gpus {
				if g >= 0 && int(g) < len(e.given) {
					e.given[g] = 0
				}
			}
		}
	}()
	planned := 0
	for i, a := range p.Run {
		gpus, ok := placed[a.Job]
		if !ok {
			continue
		}
		planned++
		id := a.Job
		if len(gpus) != a.GPUs {
			return fmt.Errorf("job %s planned %d GPUs, placed on %d", id, a.GPUs, len(gpus))
		}
		for _, g := range gpus {
			if g < 0 || int(g) >= len(e.owner) {
				return fmt.Errorf("job %s placed on GPU %d, which does not exist", id, g)
			}
			if a.GPUType != "" {
				if t := e.cfg.Cluster.NodeOf(g).GPUType; t != a.GPUType {
					return fmt.Errorf("job %s planned on %s GPUs, placed on GPU %d of type %s", id, a.GPUType, g, t)
				}
			}
			if h := e.owner[g]; added && h != nil {
				return fmt.Errorf("job %s placed on GPU %d, which job %s holds", id, g, h.Job.ID)
			}
			if e.scratch.anyParts && e.jobs[id].Job.Fractional() {
				continue // checkParts counts fractions, once every whole GPU is given
			}
			if o := e.given[g]; o != 0 {
				if other := p.Run[o-1]; other.PackWith == id && a.PackWith == other.Job {
					continue // its partner's: checkPairs saw they are mutual
				}
				return fmt.Errorf("GPU %d given to both %s and %s", g, p.Run[o-1].Job, id)
			}
			e.given[g] = i + 1
		}
		if err := e.checkSites(a, gpus); err != nil {
			return err
		}
	}
	if planned != len(placed) {
		return fmt.Errorf("placed %d jobs, only %d of them were planned", len(placed), planned)
	}
	if err := e.checkParts(p, placed); err != nil {
		return err
	}
	return e.checkPairRates(p, placed)
}
