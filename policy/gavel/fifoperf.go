package gavel

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// FIFOKnobs are gavel-fifo's knobs: Gavel's and how a job's type is
// picked.
type FIFOKnobs struct {
	Knobs
	Pick string `knob:"pick"` // random or gavel
}

// DefaultFIFOKnobs holds gavel-fifo's defaults.
var DefaultFIFOKnobs = FIFOKnobs{Knobs: DefaultKnobs, Pick: "random"}

// fifoPerfPolicies registers the policies this file defines; Policies calls it.
func fifoPerfPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "fifo-perf",
		Summary: "Gavel's heterogeneity-aware FIFO: in arrival order, each job gets the fastest GPU type with room " +
			"(jobs move to faster types as they free up), realised in Gavel's rounds",
		Knobs:    gavelKnobs,
		Defaults: DefaultKnobs,
		Build: contract.Typed(DefaultKnobs, func(_ contract.Context, k Knobs) (*Gavel, error) {
			if k.Agnostic {
				return nil, fmt.Errorf("policy fifo-perf: agnostic=true is gavel-fifo")
			}
			g, err := newGavel("fifo-perf", fifoPerf{}, k, false, false)
			if err != nil {
				return nil, err
			}
			g.ZeroPriorityWaits = true
			g.incr.on = true
			return g, nil
		}),
	})
	register(contract.Info{
		Name:    "gavel-fifo",
		Presets: []string{"gavel-fifo:pick=gavel"},
		Summary: "Gavel's heterogeneity-agnostic FIFO: in arrival order, each job gets a GPU type with room and keeps it " +
			"until it finishes, realised in Gavel's rounds",
		Knobs: gavelKnobs + "; pick=random: the type a job gets, random among those with room " +
			"(Gavel's intent), or pick=gavel: what Gavel's simulator does (its FIFO falls back on the last type in name " +
			"order still listed as free, v100 before p100 before k80, and may over-commit it, docs/heterogeneity.md); " +
			"seed=0: the random draws (under pick=gavel Gavel's own generator: seed=N is Gavel's --seed N)",
		Defaults: DefaultFIFOKnobs,
		Build: contract.Typed(DefaultFIFOKnobs, func(_ contract.Context, k FIFOKnobs) (*Gavel, error) {
			if k.Pick != "random" && k.Pick != "gavel" {
				return nil, fmt.Errorf("policy gavel-fifo: pick=%q: want random or gavel", k.Pick)
			}
			f := &gavelFIFO{}
			g, err := newGavel("gavel-fifo", f, k.Knobs, false, false)
			if err != nil {
				return nil, err
			}
			g.ZeroPriorityWaits = true
			*f = *newGavelFIFO(k.Pick == "gavel", g.Seed)
			if f.gavelPick {
				g.name += ":pick=gavel"
			}
			return g, nil
		}),
	})
}

// fifoPerf is Gavel's FIFOPolicyWithPerf allocation, recomputed from scratch
// each time: jobs in arrival order each take the type with the highest
// throughput among those with enough free GPUs (the first in name order on a
// tie); the first job for which no type has room ends the pass.
type fifoPerf struct{}

func (fifoPerf) allocate(p *gavelProblem) ([][]float64, error) {
	x := make([][]float64, len(p.jobs))
	free := slices.Clone(p.cap)
	for m := range p.jobs {
		x[m] = make([]float64, len(p.types))
	}
	// On a cluster of several sites a job gets a type only where one site
	// (or edge server) has room for it beside the jobs before it; one that
	// has room only across sites is passed over, as one that cannot run on
	// the types with room is, and the pass still stops where no type has
	// room.
	bins := p.siteBins()
	for m := range p.jobs {
		best, fits := -1, false
		for k := range p.types {
			if free[k] < p.gpus[m] {
				continue
			}
			fits = true
			if !canTake(bins, p, m, k) {
				continue
			}
			if best < 0 || p.tput[m][k] > p.tput[m][best] {
				best = k
			}
		}
		if !fits {
			break
		}
		if best >= 0 && p.tput[m][best] > 0 {
			x[m][best] = 1
			free[best] -= p.gpus[m]
			take(bins, p, m, best)
		}
	}
	return x, nil
}

// canTake reports whether job m fits one site's (or edge server's) room
// of type k; always with bins nil (one site: the type's GPUs are one pool).
func canTake(bins *alloc.Bins, p *gavelProblem, m, k int) bool {
	return bins == nil || bins.CanTake(p.jobs[m], p.types[k], int(p.gpus[m]))
}

// take counts job m in a site's room of type k, when there are sites and
// one has room.
func take(bins *alloc.Bins, p *gavelProblem, m, k int) {
	if bins != nil {
		bins.Take(p.jobs[m], p.types[k], int(p.gpus[m]))
	}
}

// gavelFIFO is Gavel's FIFOPolicy (mode base): a job keeps the type it was
// given until it finishes; the GPUs a finished job frees go to the first
// waiting job if it fits there; then waiting jobs, in arrival order, get a
// type with room. The pass stops at the first job no type has room for.
type gavelFIFO struct {
	types     map[string]int // job ID -> type index it holds in the allocation
	rng       *rand.Rand
	pcg       *rand.PCG // rng's source, saved with the state (state.go)
	gavelPick bool
	// Under pick=gavel: Gavel's own generator (random.Random(seed)) and each
	// job's place in arrival order (Gavel's job ID), kept while the job is
	// present or holds a type.
	py    *pyRandom
	seq   map[string]int
	nextQ int
}

// newGavelFIFO is gavel-fifo's allocator; seed is the policy's seed= knob
// (Gavel's --seed).
func newGavelFIFO(gavelPick bool, seed uint64) *gavelFIFO {
	pcg := rand.NewPCG(seed, 0xf1f0)
	return &gavelFIFO{types: map[string]int{}, gavelPick: gavelPick, rng: rand.New(pcg), pcg: pcg,
		py: newPyRandom(seed), seq: map[string]int{}}
}

// allocate walks Gavel's FIFOPolicy.get_allocation (mode base,
// scheduler/policies/fifo.py):
//
//   - The queue is the jobs without a type, in arrival order. A waiting
//     job that can no longer run on the type it holds (edge servers gone,
//     GPUs taken back by inference; not in Gavel, whose cluster is fixed)
//     gives it back and is queued.
//   - The jobs holding a type are walked in order; a job still present
//     takes its GPUs off the free count, a job that left hands its type to
//     the head of the queue if the head fits in the free count as it stands
//     at that point of the walk.
//   - Types with free GPUs are listed in name order; each queued job in turn
//     gets a listed type with room, and a type whose free count reaches
//     exactly 0 leaves the list. The pass stops at the first job no listed
//     type has room for.
//
// A job is only ever given a type it can run on (throughput > 0): every
// type, for the jobs of Gavel's traces. On a cluster of several sites it
// can run on a type only where one site (or edge server) has room for it
// beside the jobs holding a type (running jobs where they run): a job
// with room only across sites is passed over, and the pass goes on.
//
// The two picks differ in the order and in which type a job gets:
//
//   - pick=random (what the code evidently means): snapshot order, departed
//     jobs walked first; a job gets the type drawn among those with room.
//   - pick=gavel (what the code does): Gavel's order, by job ID (arrival,
//     numbered as the trace's lines); Gavel draws an index among the listed
//     types with room (random.Random(seed).randrange) but assigns the type
//     its loop over the listed types ended on, the last one, room or not,
//     and unlists the drawn one when that type fills. So V100s (last in name
//     order) fill first and can be over-committed. The draws decide which
//     type leaves the list and so where later jobs go, hence Gavel's
//     generator (pyRandom) and its seed.
func (f *gavelFIFO) allocate(p *gavelProblem) ([][]float64, error) {
	order := make([]int, len(p.jobs)) // snapshot indices in queue order
	for m := range order {
		order[m] = m
	}
	present := map[string]int{}
	for m, st := range p.jobs {
		present[st.Job.ID] = m
	}
	walk := func(a, b string) int { return compareIDs(p, present, a, b) }
	if f.gavelPick {
		slices.SortStableFunc(order, func(a, b int) int { return compareArrival(p.jobs[a], p.jobs[b]) })
		for _, m := range order {
			if id := p.jobs[m].Job.ID; !hasKey(f.seq, id) {
				f.seq[id] = f.nextQ
				f.nextQ++
			}
		}
		walk = func(a, b string) int { return f.seq[a] - f.seq[b] }
	}
	// A waiting job that can no longer run on the type it holds (no site,
	// or edge server, has enough of its GPUs up: gavelCapacity) gives the
	// type back and queues again in its place: holding it would leave the
	// job waiting while other types idle, for good once those GPUs stay
	// down. A running job holds GPUs that are up and keeps its type. On a
	// one-site cluster a job holds only a type it can run on, so this
	// changes nothing there.
	for id, k := range f.types {
		if m, ok := present[id]; ok && len(p.jobs[m].GPUs) == 0 && p.tput[m][k] <= 0 {
			delete(f.types, id)
		}
	}
	var queue []int
	for _, m := range order {
		if !hasKey(f.types, p.jobs[m].Job.ID) {
			queue = append(queue, m)
		}
	}
	held := make([]string, 0, len(f.types))
	for id := range f.types {
		held = append(held, id)
	}
	slices.SortFunc(held, walk)
	free := slices.Clone(p.cap)
	// On a cluster of several sites a type has room for a job only where
	// one site (or edge server) has, beside the jobs that hold a type:
	// those running where they run, then the others where they would go.
	bins := p.siteBins()
	if bins != nil {
		for _, running := range []bool{true, false} {
			for _, id := range held {
				if m, ok := present[id]; ok && (len(p.jobs[m].GPUs) > 0) == running {
					take(bins, p, m, f.types[id])
				}
			}
		}
	}
	for _, id := range held {
		k := f.types[id]
		if m, ok := present[id]; ok {
			free[k] -= p.gpus[m]
			continue
		}
		delete(f.types, id)
		if len(queue) > 0 {
			m := queue[0]
			if p.gpus[m] <= free[k] && p.tput[m][k] > 0 && canTake(bins, p, m, k) {
				queue = queue[1:]
				f.types[p.jobs[m].Job.ID] = k
				free[k] -= p.gpus[m]
				take(bins, p, m, k)
			}
		}
	}
	for id := range f.seq {
		if !hasKey(present, id) && !hasKey(f.types, id) {
			delete(f.seq, id)
		}
	}
	var listed []int // type indices in name order (p.types is sorted)
	for k := range p.types {
		if free[k] > 0 {
			listed = append(listed, k)
		}
	}
	for len(queue) > 0 && len(listed) > 0 {
		m := queue[0]
		queue = queue[1:]
		// A job that can run on every type (every job of Gavel's traces)
		// gets a type as Gavel gives it. One that cannot run on some type
		// (another type asked for; too big for any one site or edge
		// server; GPUs down) is given only a type it can run on: given one
		// it cannot, it was skipped, and could be left without a type for
		// good once nothing else arrives or leaves.
		var roomy, fit []int // positions in listed with room for the job; those of them it can run on
		last := -1           // position in listed of the last type it can run on
		for i, k := range listed {
			// On a cluster of several sites a job can run on a type only
			// where one site (or edge server) has room for it now.
			can := p.tput[m][k] > 0 && canTake(bins, p, m, k)
			if free[k] >= p.gpus[m] {
				roomy = append(roomy, i)
				if can {
					fit = append(fit, i)
				}
			}
			if can {
				last = i
			}
		}
		if len(roomy) == 0 {
			break
		}
		var drawn, k int
		if f.gavelPick {
			// Gavel's draw, among the types with room, decides only which
			// type is unlisted below; the job gets the last listed type it
			// can run on.
			drawn = roomy[f.py.randrange(len(roomy))]
			if last < 0 {
				continue // no listed type it can run on: later jobs may use them
			}
			k = listed[last]
		} else {
			if len(fit) == 0 {
				continue // no type with room it can run on: later jobs may use them
			}
			drawn = fit[f.rng.IntN(len(fit))]
			k = listed[drawn]
		}
		f.types[p.jobs[m].Job.ID] = k
		free[k] -= p.gpus[m]
		if canTake(bins, p, m, k) { // under pick=gavel the job may get a type with no room
			take(bins, p, m, k)
		}
		if free[k] == 0 {
			listed = slices.Delete(listed, drawn, drawn+1)
		}
	}
	x := make([][]float64, len(p.jobs))
	for m, st := range p.jobs {
		x[m] = make([]float64, len(p.types))
		if k, ok := f.types[st.Job.ID]; ok {
			x[m][k] = 1
		}
	}
	return x, nil
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// compareArrival orders jobs as Gavel numbers them: by submission time, then
// by ID, numerically where both IDs are whole numbers (a trace's line
// numbers), so job 10 comes after job 9.
func compareArrival(a, b *engine.Status) int {
	if c := cmp.Compare(a.Job.Submit, b.Job.Submit); c != 0 {
		return c
	}
	x, errX := strconv.ParseUint(a.Job.ID, 10, 64)
	y, errY := strconv.ParseUint(b.Job.ID, 10, 64)
	if errX == nil && errY == nil {
		return cmp.Compare(x, y)
	}
	return strings.Compare(a.Job.ID, b.Job.ID)
}

// compareIDs orders job IDs by arrival: present jobs by their index in the
// snapshot, departed ones (unknown order) by ID, before the present ones.
func compareIDs(p *gavelProblem, present map[string]int, a, b string) int {
	ma, okA := present[a]
	mb, okB := present[b]
	switch {
	case okA && okB:
		return ma - mb
	case okA:
		return 1
	case okB:
		return -1
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}
