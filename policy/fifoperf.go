package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tide-sched/tide/engine"
)

func init() {
	register(Info{
		Name: "fifo-perf",
		Summary: "Gavel's heterogeneity-aware FIFO: in arrival order, each job gets the fastest GPU type with room " +
			"(jobs move to faster types as they free up), realised in Gavel's rounds",
		Knobs: "round=360, reset=1920 (see gavel-las)",
		build: func(_ Context, o Options) (engine.Policy, error) {
			g, err := newGavel("fifo-perf", fifoPerf{}, o, false)
			if g != nil {
				g.ZeroPriorityWaits = true
				if g.Agnostic {
					return nil, fmt.Errorf("policy fifo-perf: agnostic=true is gavel-fifo")
				}
			}
			return g, err
		},
	})
	register(Info{
		Name: "gavel-fifo",
		Summary: "Gavel's heterogeneity-agnostic FIFO: in arrival order, each job gets a GPU type with room and keeps it " +
			"until it finishes, realised in Gavel's rounds",
		Knobs: "round=360, reset=1920 (see gavel-las); pick=random: the type a job gets, random among those with room " +
			"(Gavel's intent), or pick=gavel: what Gavel's simulator does (its FIFO falls back on the last type in name " +
			"order still listed as free, v100 before p100 before k80, and may over-commit it; see docs/heterogeneity.md)",
		build: func(_ Context, o Options) (engine.Policy, error) {
			f := &gavelFIFO{types: map[string]int{}}
			switch pick := o.String("pick", "random"); pick {
			case "random":
			case "gavel":
				f.gavelPick = true
			default:
				return nil, fmt.Errorf("policy gavel-fifo: pick=%q: want random or gavel", pick)
			}
			g, err := newGavel("gavel-fifo", f, o, false)
			if g != nil {
				g.ZeroPriorityWaits = true
				f.pcg = rand.NewPCG(g.Seed, 0xf1f0)
				f.rng = rand.New(f.pcg)
				if f.gavelPick {
					g.name += ":pick=gavel"
				}
			}
			return g, err
		},
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
	for m := range p.jobs {
		best, fits := -1, false
		for k := range p.types {
			if free[k] < p.gpus[m] {
				continue
			}
			fits = true
			if best < 0 || p.tput[m][k] > p.tput[m][best] {
				best = k
			}
		}
		if !fits {
			break
		}
		if p.tput[m][best] > 0 {
			x[m][best] = 1
			free[best] -= p.gpus[m]
		}
	}
	return x, nil
}

// gavelFIFO is Gavel's FIFOPolicy (mode base): a job keeps the type it was
// given until it finishes; the GPUs a finished job frees go to the first
// waiting job if it fits there; then waiting jobs, in arrival order, get a
// type with room. The pass stops at the first job no type has room for.
type gavelFIFO struct {
	types     map[string]int // job ID -> type index it holds in the allocation
	rng       *rand.Rand
	pcg       *rand.PCG // rng's source, saved with the state
	gavelPick bool
}

func (f *gavelFIFO) allocate(p *gavelProblem) ([][]float64, error) {
	free := slices.Clone(p.cap)
	present := map[string]int{}
	for m, st := range p.jobs {
		present[st.Job.ID] = m
	}
	var queue []int
	for m, st := range p.jobs {
		if _, ok := f.types[st.Job.ID]; !ok {
			queue = append(queue, m)
		}
	}
	// Jobs that left hand their type to the head of the queue. Gavel walks
	// its allocation in job ID order; arrival order stands for it here.
	var held []string
	for id := range f.types {
		held = append(held, id)
	}
	slices.SortFunc(held, func(a, b string) int { return compareIDs(p, present, a, b) })
	for _, id := range held {
		k := f.types[id]
		if _, ok := present[id]; ok {
			free[k] -= p.gpus[present[id]]
			continue
		}
		delete(f.types, id)
		if len(queue) > 0 {
			m := queue[0]
			if p.gpus[m] <= free[k] && p.tput[m][k] > 0 {
				queue = queue[1:]
				f.types[p.jobs[m].Job.ID] = k
				free[k] -= p.gpus[m]
			}
		}
	}
	// Types still listed as free, in name order.
	var listed []int
	for k := range p.types {
		if free[k] > 0 {
			listed = append(listed, k)
		}
	}
	for len(queue) > 0 && len(listed) > 0 {
		m := queue[0]
		queue = queue[1:]
		var fit []int // positions in listed with room for the job
		for i, k := range listed {
			if free[k] >= p.gpus[m] {
				fit = append(fit, i)
			}
		}
		if len(fit) == 0 {
			break
		}
		i := fit[f.rng.IntN(len(fit))]
		k := listed[i]
		if f.gavelPick {
			// Gavel's FIFO draws i but then uses the type its loop over the
			// listed types ended on: the last one, whether or not it has
			// room; and it unlists the drawn one when the chosen one fills.
			k = listed[len(listed)-1]
		}
		if p.tput[m][k] <= 0 {
			continue
		}
		f.types[p.jobs[m].Job.ID] = k
		free[k] -= p.gpus[m]
		if free[k] == 0 {
			listed = slices.Delete(listed, i, i+1)
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
