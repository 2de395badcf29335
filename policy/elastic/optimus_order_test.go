package elastic

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// koWorld is a stand-in for an engine's active jobs over many rounds, for
// TestOptimusByMin and BenchmarkOptimusOrder: jobs sorted by submission
// then ID, each with a slot reused after its job left, each bound to a
// pool, their minimums drawn from mins.
type koWorld struct {
	rng    *rand.Rand
	mins   []int
	now    float64
	active []*engine.Status
	pool   map[*engine.Status]int
	free   []int // slots free for new jobs
	slots  int
	ids    int
}

// arrive submits a job: mostly now, sometimes out of submission order or
// at the very time of an earlier job (then its ID decides, and IDs are not
// in arrival order).
func (w *koWorld) arrive(pools int) {
	submit := w.now
	switch r := w.rng.IntN(10); {
	case r == 0 && len(w.active) > 0:
		submit = w.active[w.rng.IntN(len(w.active))].Job.Submit // a tie
	case r == 1:
		submit = w.now - float64(w.rng.IntN(500)) // out of order
	}
	w.ids++
	id := fmt.Sprintf("%c%05d", 'a'+rune(w.rng.IntN(26)), w.ids)
	slot := w.slots
	if n := len(w.free); n > 0 {
		slot, w.free = w.free[n-1], w.free[:n-1]
	} else {
		w.slots++
	}
	st := &engine.Status{Job: &job.Job{ID: id, Submit: submit, MinGPUs: w.mins[w.rng.IntN(len(w.mins))]}, Slot: slot}
	i, _ := slices.BinarySearchFunc(w.active, st, elasticLess)
	w.active = slices.Insert(w.active, i, st)
	w.pool[st] = w.rng.IntN(pools)
}

// koMins are minimum draws: many ties; a range wider than the counting
// sort takes for a small pool; the extremes of int (hand-built snapshots:
// an engine's jobs have 1 to the pool's GPU count).
var koMins = [][]int{
	{1, 1, 1, 2, 2, 3, 4, 8},
	{1},
	{4, 4, 4, 4, 2},
	{1, 2, 4, 8, 16, 32, 64, 128, 1000, 5000},
	{0, -3, 1, 2, math.MaxInt, math.MinInt, 7},
}

// TestOptimusByMin drives the order of Optimus' minimums (optimusByMin,
// one elasticRound's memory reused from round to round) through random
// rounds and compares each pool's order with the stable sort by minimum
// of the pool as given, job for job: jobs arrive (in bursts too, out of
// submission order, at an earlier job's time) and leave, move between
// pools, have their minimum changed, and some pools are shuffled out of
// submission order or hold a job twice (ties still go in the pool's
// order).
func TestOptimusByMin(t *testing.T) {
	var counted, one, compared int
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 19))
		pools := 1 + rng.IntN(3)
		mins := koMins[int(seed)%len(koMins)]
		w := &koWorld{rng: rng, mins: mins, pool: map[*engine.Status]int{}}
		var r elasticRound
		for round := range 60 {
			w.now += 60
			leave := rng.Float64() * 0.3
			w.active = slices.DeleteFunc(w.active, func(st *engine.Status) bool {
				if rng.Float64() >= leave {
					return false
				}
				w.free = append(w.free, st.Slot)
				delete(w.pool, st)
				return true
			})
			n := rng.IntN(6)
			if rng.IntN(8) == 0 {
				n = 40 + rng.IntN(100)
			}
			for range n {
				w.arrive(pools)
			}
			for _, st := range w.active {
				if rng.IntN(15) == 0 {
					w.pool[st] = rng.IntN(pools)
				}
				if rng.IntN(40) == 0 {
					j := *st.Job
					j.MinGPUs = mins[rng.IntN(len(mins))]
					st.Job = &j
				}
			}
			ejs := make([]elasticJob, len(w.active))
			byPool := make([][]*elasticJob, pools)
			for i, st := range w.active {
				ejs[i] = elasticJob{st: st, min: st.Job.MinGPUs}
				p := w.pool[st]
				byPool[p] = append(byPool[p], &ejs[i])
			}
			switch odd := rng.IntN(10); {
			case odd == 0 && len(byPool[0]) >= 2:
				rng.Shuffle(len(byPool[0]), func(i, j int) { byPool[0][i], byPool[0][j] = byPool[0][j], byPool[0][i] })
			case odd == 1 && len(byPool[0]) >= 1:
				d := *byPool[0][rng.IntN(len(byPool[0]))]
				byPool[0] = slices.Insert(byPool[0], rng.IntN(len(byPool[0])+1), &d)
			}
			for p, jobs := range byPool {
				want := slices.Clone(jobs)
				slices.SortStableFunc(want, func(a, b *elasticJob) int { return cmp.Compare(a.min, b.min) })
				got := r.optimusByMin(jobs)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d round %d pool %d (%d jobs): %v, the stable sort %v", seed, round, p, len(jobs), koIDs(got), koIDs(want))
				}
				// Which way it went, told from the minimums here.
				lo, hi := math.MaxInt, math.MinInt
				for _, e := range jobs {
					lo, hi = min(lo, e.min), max(hi, e.min)
				}
				switch {
				case len(jobs) < 2:
				case lo == hi:
					one++
				case hi-lo > 0 && hi-lo <= optimusSpan(len(jobs)):
					counted++
				default:
					compared++
				}
			}
		}
	}
	t.Logf("pools: %d counted, %d of one minimum, %d by comparisons", counted, one, compared)
	if counted < 500 || one < 50 || compared < 50 {
		t.Errorf("pools: %d counted, %d of one minimum, %d by comparisons; want each way taken", counted, one, compared)
	}
}

func koIDs(es []*elasticJob) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = fmt.Sprintf("%s/%d", e.st.Job.ID, e.min)
	}
	return ids
}
