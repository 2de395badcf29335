package classic

import (
	"bufio"
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/present"
)

// tiresiasPolicies registers the policies this file defines; Policies calls it.
func tiresiasPolicies(register func(contract.Info)) {
	knobs := "preset=paper (paper: limits 3250/7200/18000 GPU-s, knob 0; pollux: the Pollux artifact's " +
		"one limit of 57600 GPU-s, knob 0); limits=A/B/..: queue thresholds in GPU-seconds (n limits, n+1 queues); " +
		"knob=K: starvation knob, a job waiting K x its executed time since it last ran is promoted to Q0 (0 = off)"
	register(contract.Info{
		Name:     "tiresias",
		Presets:  []string{"tiresias:preset=pollux"},
		Summary:  "Tiresias discretised 2D-LAS: multi-level queues by attained GPU-seconds, FIFO inside a queue, preemptive",
		Knobs:    knobs,
		Defaults: DefaultTiresias,
		Build:    contract.Typed(DefaultTiresias, NewTiresias),
	})
	register(contract.Info{
		Name:     "tiresias-gittins",
		Presets:  []string{"tiresias-gittins:preset=pollux"},
		Summary:  "Tiresias 2D-Gittins: the same queues, ordered inside by the Gittins index of a GPU-time distribution",
		Knobs:    knobs + "; dist=FILE: GPU-time samples (one column, header 'duration', e.g. tiresias/yarn-gput1000.csv; default: the trace's own jobs); quantum=3250: service quantum D of the last queue",
		Defaults: DefaultGittins,
		Build:    contract.Typed(DefaultGittins, NewTiresiasGittins),
	})
}

// Tiresias is the discretised two-dimensional least-attained-service
// scheduler of Tiresias (NSDI'19). A job's attained service is the
// GPU-seconds it has held since it entered the system or was last promoted.
// Queue i holds jobs whose service lies in [Limits[i-1], Limits[i]); queues
// are served from Q0 down; inside a queue jobs are served in the order they
// entered it (2D-LAS) or by descending Gittins index (2D-Gittins). Jobs run
// on their requested GPU count; those that do not fit wait (smaller jobs
// behind them may start) and running jobs that fall out are preempted.
type Tiresias struct {
	Limits  []float64 // ascending queue thresholds, GPU-seconds
	Knob    float64   // starvation knob; 0 disables promotion
	Gittins *Gittins  // nil for 2D-LAS
	// TraceOrder, when set, breaks ties between jobs submitted at the same
	// instant by their position in the trace (ID -> index) instead of by
	// ID, as the Pollux artifact's Tiresias does: it queues new jobs in
	// the workload file's row order (preset=pollux sets it).
	TraceOrder map[string]int
	name       string

	// Scratch reused from round to round (a round allocates only its plan).
	entries []tiresiasEntry
	queued  []tiresiasEntry // entries by queue
	counts  []int           // entries per queue
	order   []*engine.Status
	run     []engine.Assignment // the last plan's Run: the engine is done with it by the next round
	explain explain.Scratch
	why     explain.Queue                            // the waiting jobs' reasons, worked out when read (tiresias_why.go)
	pool    alloc.Pool                               // the greedy pass's, kept (alloc.Pool.Greedy)
	memo    map[string]engine.Memo                   // the last plan's Memo: the engine keeps no plan's maps
	terms   func(b []byte, st *engine.Status) []byte // appendTerms
	// queueKey and whyTerms are queueOfJob and appendWhy (tiresias_why.go).
	queueKey func(int, *engine.Status) float64
	whyTerms func(b []byte, st *engine.Status, q float64, _ [2]int) []byte
	inQueue  func(a, b tiresiasEntry) int // compareIn

	// The last round's order, kept to build this round's (2D-LAS only,
	// sortKept): prev are its entries; present finds this round's.
	prev    []tiresiasEntry
	mids    []int // per queue, where the jobs that moved start
	present present.Set
	// 2D-Gittins' (tiresias_gittins_order.go): the merge's scratch and
	// each job's last index.
	merge  []tiresiasEntry
	ixMemo []gittinsMemo

	// fast is what the rounds planned from what changed keep
	// (tiresias_fast.go).
	fast tiresiasFast
}

// tiresiasEntry is one job's place in the queues this round.
type tiresiasEntry struct {
	st      *engine.Status
	queue   int
	entered float64
	index   float64 // Gittins index, higher first
	kept    bool    // layKept found it in the last round's order, in the same place
}

// Memo slots used by Tiresias.
const (
	memoQueue    = 0 // queue index + 1 (0 = not yet queued)
	memoEntered  = 1 // time the job entered its current queue
	memoBaseServ = 2 // attained GPU-seconds at the last promotion
	memoBaseExec = 3 // executed seconds at the last promotion
)

// TiresiasKnobs are Tiresias' knobs (`tide policies tiresias`); nil ones
// take their preset's value.
type TiresiasKnobs struct {
	Preset string    `knob:"preset"` // paper or pollux
	Limits []float64 `knob:"limits"` // GPU-seconds, ascending
	Knob   *float64  `knob:"knob"`   // >= 0
}

// GittinsKnobs are 2D-Gittins' knobs: Tiresias' and its distribution's.
type GittinsKnobs struct {
	TiresiasKnobs
	Dist    *string `knob:"dist"`    // GPU-time samples; nil: the trace's jobs
	Quantum float64 `knob:"quantum"` // > 0
}

// DefaultTiresias and DefaultGittins hold the default knobs.
var (
	DefaultTiresias = TiresiasKnobs{Preset: "paper"}
	DefaultGittins  = GittinsKnobs{TiresiasKnobs: DefaultTiresias, Quantum: 3250}
)

// NewTiresias builds Tiresias (2D-LAS) with knobs k; ctx gives the trace's
// order for preset=pollux.
func NewTiresias(ctx contract.Context, k TiresiasKnobs) (*Tiresias, error) {
	return newTiresias(ctx, k, nil)
}

// NewTiresiasGittins builds 2D-Gittins with knobs k; ctx gives the
// trace's order for preset=pollux and, without dist, its GPU-time samples.
func NewTiresiasGittins(ctx contract.Context, k GittinsKnobs) (*Tiresias, error) {
	return newTiresias(ctx, k.TiresiasKnobs, &k)
}

func newTiresias(ctx contract.Context, k TiresiasKnobs, gittins *GittinsKnobs) (*Tiresias, error) {
	t := &Tiresias{name: "tiresias"}
	if gittins != nil {
		t.name = "tiresias-gittins"
	}
	preset := k.Preset
	switch preset {
	case "paper":
		t.Limits, t.Knob = []float64{3250, 7200, 18000}, 0
	case "pollux":
		t.Limits, t.Knob = []float64{57600}, 0
	default:
		return nil, fmt.Errorf("policy %s: preset=%q: want paper or pollux", t.name, preset)
	}
	if preset != "paper" {
		t.name += ":preset=" + preset
	}
	if preset == "pollux" {
		t.TraceOrder = make(map[string]int, len(ctx.Jobs))
		for i, j := range ctx.Jobs {
			t.TraceOrder[j.ID] = i
		}
	}
	if k.Limits != nil {
		t.Limits = k.Limits
	}
	for i, l := range t.Limits {
		if !(l > 0) || (i > 0 && l <= t.Limits[i-1]) {
			return nil, fmt.Errorf("policy %s: limits must be positive and ascending, got %v", t.name, t.Limits)
		}
	}
	if k.Knob != nil {
		t.Knob = *k.Knob
	}
	if t.Knob < 0 {
		return nil, fmt.Errorf("policy %s: knob must be >= 0, got %v", t.name, t.Knob)
	}
	if gittins != nil {
		quantum := gittins.Quantum
		if quantum <= 0 {
			return nil, fmt.Errorf("policy %s: quantum must be > 0, got %v", t.name, quantum)
		}
		var samples []float64
		if gittins.Dist != nil && *gittins.Dist != "" {
			var err error
			if samples, err = ReadServiceSamples(*gittins.Dist); err != nil {
				return nil, err
			}
		} else {
			for _, j := range ctx.Jobs {
				s := j.Duration * float64(j.GPUs)
				if ctx.Service != nil {
					s = ctx.Service(j)
				}
				if s > 0 && !math.IsInf(s, 0) {
					samples = append(samples, s)
				}
			}
		}
		if len(samples) == 0 {
			return nil, fmt.Errorf("policy %s: no GPU-time samples for the Gittins index: pass dist=FILE", t.name)
		}
		t.Gittins = NewGittins(samples, quantum)
	}
	return t, nil
}

// Name implements engine.Policy.
func (t *Tiresias) Name() string { return t.name }

func (t *Tiresias) queueOf(service float64) int {
	q := 0
	for q < len(t.Limits) && service >= t.Limits[q] {
		q++
	}
	return q
}

// Schedule implements engine.Policy.
func (t *Tiresias) Schedule(s *engine.Snapshot) engine.Plan {
	var memo map[string]engine.Memo // only the memos that change, in t.memo's memory
	t.clearMemo()
	if t.inQueue == nil {
		t.inQueue = t.compareIn
		t.fast.cmp = t.inQueue
	}
	t.fast.newRound(s.Round)
	t.why.Next(s.Round)
	if t.fastUsable(s) {
		if plan, ok := t.scheduleFast(s, &memo); ok {
			return plan
		}
		t.clearMemo()
		memo = nil
	}
	t.keepPrev() // the last round's reasons, before the full pass rebuilds the order
	jobs := s.ActiveJobs()
	entries := slices.Grow(t.entries[:0], len(jobs))[:len(jobs)]
	for i, st := range jobs {
		q, m := t.standing(s, st, &memo)
		e := tiresiasEntry{st: st, queue: q, entered: m[memoEntered]}
		if t.Gittins != nil {
			service := st.Attained - m[memoBaseServ]
			d := t.Gittins.Quantum
			if q < len(t.Limits) {
				d = t.Limits[q] - service
			}
			e.index = t.gittinsIndex(st, service, d)
		}
		entries[i] = e
	}
	if t.Gittins == nil {
		entries = t.sortKept(entries, jobs)
	} else {
		entries = t.sortGittins(entries, jobs) // every running job's index moves each round: repaired
	}
	t.prev = append(t.prev[:0], entries...)
	order := slices.Grow(t.order[:0], len(entries))
	for _, e := range entries {
		order = append(order, e.st)
	}
	plan := t.pool.Greedy(s, order, false, t.run)
	t.run = plan.Run
	plan.Memo = memo
	if t.terms == nil { // made once: a closure made every round would be allocated every round
		t.terms, t.queueKey, t.whyTerms = t.appendTerms, t.queueOfJob, t.appendWhy
	}
	if !t.lazyFull(s, &plan, order) {
		t.explain.PlanAppend(s, &plan, order, t.terms)
	}
	t.fast.rebuild(t, s, entries)
	// Keep the buffers, not the snapshot's jobs they point to.
	clear(t.entries)
	clear(t.queued)
	clear(order)
	t.entries, t.queued, t.order = t.entries[:0], t.queued[:0], order[:0]
	return plan
}

// memoKeep is the most memos t.memo may have held for it to be cleared
// and reused; a larger one is dropped. A Go map keeps the room of its
// largest size, and walking it (the engine walks Plan.Memo every round)
// costs that room, not its entries: the first round of 100,000 jobs gives
// every job a memo, and a map kept with room for them made every later
// round, in which a few jobs change queue, walk 100,000 empty entries.
const memoKeep = 256

// clearMemo empties t.memo for this round's memos: clears it, or drops it
// when it grew past memoKeep (standing makes a new one when a memo changes).
func (t *Tiresias) clearMemo() {
	if len(t.memo) > memoKeep {
		t.memo = nil
		return
	}
	clear(t.memo)
}

// appendTerms appends a waiting job's standing to b: "queue 2 of 4,
// attained 7.25 GPU-h", its queue as this round's Schedule computed it
// (with the memos t.memo holds for the jobs whose memo changed).
func (t *Tiresias) appendTerms(b []byte, st *engine.Status) []byte {
	return t.appendQueue(b, st, t.queueOf(st.Attained-t.memoOf(st)[memoBaseServ]))
}

// appendQueue appends appendTerms' text for st in queue q (0-based).
func (t *Tiresias) appendQueue(b []byte, st *engine.Status, q int) []byte {
	b = append(b, "queue "...)
	b = strconv.AppendInt(b, int64(q+1), 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, int64(len(t.Limits)+1), 10)
	b = append(b, ", attained "...)
	b = strconv.AppendFloat(b, st.Attained/3600, 'f', 2, 64)
	return append(b, " GPU-h"...)
}

// sort orders entries by queue (Q0 first), then inside a queue by
// compareIn, and returns them sorted (in t.queued's memory).
//
// Entries come in the snapshot's order (submission, then ID) and a job's
// place inside its queue changes only when it enters the queue, so each
// queue is usually in order already: a stable pass by queue and one check
// per queue make the usual round linear in the jobs, and only a queue out
// of order is sorted. The order is total (IDs are unique), so the result is
// the one sorting everything at once gives.
func (t *Tiresias) sort(entries []tiresiasEntry) []tiresiasEntry {
	if t.inQueue == nil {
		t.inQueue = t.compareIn
	}
	nq, counts, queued := t.buckets(entries)
	next := counts[:nq]
	for _, e := range entries {
		queued[next[e.queue]] = e
		next[e.queue]++
	}
	// next[q] is now where queue q ends.
	from := 0
	for q := range nq {
		in := queued[from:next[q]]
		if !slices.IsSortedFunc(in, t.inQueue) {
			slices.SortFunc(in, t.inQueue)
		}
		from = next[q]
	}
	t.counts, t.queued, t.entries = counts, queued, entries
	return queued
}

// sortKept is sort, built from the last round's order: 2D-LAS places a job
// inside its queue by the time it entered the queue, so the jobs still in
// the queue they were in keep their relative order from round to round,
// and only the jobs that changed queue (or arrived) need placing: at their
// queue's end, as they entered it now. A queue is checked where its moved
// jobs begin and sorted if out of order after all (a job promoted to Q0
// while others arrived, a restored state): the result is always sort's.
// Its cost follows the jobs, with no comparison sort in a usual round.
//
// jobs are the snapshot's jobs, in entries' order.
func (t *Tiresias) sortKept(entries []tiresiasEntry, jobs []*engine.Status) []tiresiasEntry {
	// The jobs of the last order, in that order, that are still active and
	// in the same place (queue and entry time): they were sorted then and
	// their keys have not changed, so they are sorted now.
	nq, next, mid, queued, ok := t.layKept(entries, jobs, true)
	if !ok {
		return t.sort(entries)
	}
	from := 0
	for q := range nq {
		in, m := queued[from:next[q]], mid[q]-from
		if m < len(in) && !(slices.IsSortedFunc(in[m:], t.inQueue) && (m == 0 || t.inQueue(in[m-1], in[m]) < 0)) {
			slices.SortFunc(in, t.inQueue)
		}
		from = next[q]
	}
	return queued
}

// layKept lays entries out by queue where sortKept and sortGittins start
// from the last round's order (t.prev): in each queue, first the jobs of
// that order still active and in the same queue (and, with entered, that
// entered it at the same time: 2D-LAS' order inside a queue depends on
// it), in that order, then the others in entries' order. next[q] is where
// queue q ends and mid[q] where its others begin, in queued (t.queued's
// memory). ok is false, and nothing laid out, where there is no last
// order to start from (the first round, a snapshot whose jobs are not one
// engine's: present.Set.Mark).
//
// jobs are the snapshot's jobs, in entries' order.
func (t *Tiresias) layKept(entries []tiresiasEntry, jobs []*engine.Status, entered bool) (nq int, next, mid []int, queued []tiresiasEntry, ok bool) {
	if len(t.prev) == 0 || !t.present.Mark(jobs) {
		return 0, nil, nil, nil, false
	}
	if t.inQueue == nil {
		t.inQueue = t.compareIn
	}
	nq, counts, queued := t.buckets(entries)
	next = counts[:nq]
	for _, p := range t.prev {
		i, ok := t.present.Index(p.st)
		if !ok {
			continue // ended
		}
		e := &entries[i]
		if e.queue != p.queue || e.kept || (entered && e.entered != p.entered) {
			continue // moved
		}
		e.kept = true
		queued[next[e.queue]] = *e
		next[e.queue]++
	}
	mid = slices.Grow(t.mids[:0], nq)[:nq]
	copy(mid, next)
	for i := range entries {
		if e := &entries[i]; !e.kept {
			queued[next[e.queue]] = *e
			next[e.queue]++
		} else {
			e.kept = false
		}
	}
	t.counts, t.queued, t.entries, t.mids = counts, queued, entries, mid
	return nq, next, mid, queued, true
}

// buckets returns the number of queues, where each queue starts in an
// order by queue (counts[q], in t.counts' memory) and room for that order
// (in t.queued's memory).
func (t *Tiresias) buckets(entries []tiresiasEntry) (nq int, counts []int, queued []tiresiasEntry) {
	nq = len(t.Limits) + 1
	counts = slices.Grow(t.counts[:0], nq+1)[:nq+1]
	clear(counts)
	for _, e := range entries {
		counts[e.queue+1]++
	}
	for q := 1; q <= nq; q++ {
		counts[q] += counts[q-1] // counts[q] is where queue q starts
	}
	return nq, counts, slices.Grow(t.queued[:0], len(entries))[:len(entries)]
}

// compareIn orders two entries of the same queue: by Gittins index
// (highest first) under 2D-Gittins, then by the time they entered the
// queue, their submission, their trace position (preset=pollux) and ID.
func (t *Tiresias) compareIn(ea, eb tiresiasEntry) int {
	if t.Gittins != nil && ea.index != eb.index {
		return -cmp.Compare(ea.index, eb.index)
	}
	if ea.entered != eb.entered {
		return cmp.Compare(ea.entered, eb.entered)
	}
	ja, jb := ea.st.Job, eb.st.Job
	if ja.Submit != jb.Submit {
		return cmp.Compare(ja.Submit, jb.Submit)
	}
	if t.TraceOrder != nil {
		ia, oka := t.TraceOrder[ja.ID]
		ib, okb := t.TraceOrder[jb.ID]
		if oka && okb && ia != ib {
			return cmp.Compare(ia, ib)
		}
	}
	return strings.Compare(ja.ID, jb.ID)
}

// Gittins computes Gittins indexes of an empirical service distribution.
type Gittins struct {
	Quantum float64
	sorted  []float64 // ascending samples
	prefix  []float64 // prefix[i] = sum(sorted[:i])
}

// NewGittins builds the index over GPU-time samples (GPU-seconds).
func NewGittins(samples []float64, quantum float64) *Gittins {
	g := &Gittins{Quantum: quantum, sorted: append([]float64(nil), samples...)}
	sort.Float64s(g.sorted)
	g.prefix = make([]float64, len(g.sorted)+1)
	for i, v := range g.sorted {
		g.prefix[i+1] = g.prefix[i] + v
	}
	return g
}

// Index is G(a, D) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a] for a
// job that has attained a GPU-seconds, with service quantum D. A job that has
// outlived every sample gets 0 (lowest priority).
func (g *Gittins) Index(a, d float64) float64 {
	if d <= 0 {
		d = g.Quantum
	}
	n := len(g.sorted)
	lo := sort.Search(n, func(i int) bool { return g.sorted[i] > a })   // first S > a
	hi := sort.Search(n, func(i int) bool { return g.sorted[i] > a+d }) // first S > a+d
	alive := n - lo
	if alive == 0 {
		return 0
	}
	done := hi - lo
	// E[min(S-a, D)]: samples finishing within D contribute S-a, the rest D.
	expect := (g.prefix[hi] - g.prefix[lo] - float64(done)*a + float64(n-hi)*d) / float64(alive)
	if expect <= 0 {
		return math.Inf(1)
	}
	return float64(done) / float64(alive) / expect
}

// ReadServiceSamples reads a one-column CSV of GPU-time samples (seconds)
// with a header line, such as Tiresias' yarn-gput*.csv.
func ReadServiceSamples(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gittins distribution: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out []float64
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if line == 1 || text == "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.Split(text, ",")[0], 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("gittins distribution %s line %d field duration: %q is not a non-negative number", path, line, text)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gittins distribution %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gittins distribution %s: no samples", path)
	}
	return out, nil
}
