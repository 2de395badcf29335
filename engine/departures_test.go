package engine_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// readsAll plans every round in full from Snapshot.Jobs (it is not an
// engine.IncrementalPolicy): it runs the first jobs of the list that fit,
// in order, and records the IDs and slots of the list each round read.
type readsAll struct {
	seen []string // "ID@slot" of the list the round read
}

func (*readsAll) Name() string { return "reads-all" }
func (p *readsAll) Schedule(s *engine.Snapshot) engine.Plan {
	p.seen = p.seen[:0]
	var plan engine.Plan
	free := s.Cluster.TotalGPUs()
	for _, st := range s.Jobs {
		p.seen = append(p.seen, fmt.Sprintf("%s@%d", st.Job.ID, st.Slot))
		if st.State.Terminal() {
			return engine.Plan{Err: fmt.Errorf("job %s in the snapshot has ended", st.Job.ID)}
		}
		if st.Job.GPUs <= free {
			free -= st.Job.GPUs
			plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
		}
	}
	return plan
}

// listModel is what the engine's active list must read as, kept the
// plain way: the jobs waiting or running sorted by (Submit, ID), and the
// slots as a stack from which a new job takes the last freed, the jobs
// that ended since the last round (or the last read of the list) freeing
// theirs together, in submission order.
type listModel struct {
	live  []*job.Job
	slot  map[*job.Job]int
	ended []*job.Job // since the last compact
	free  []int
	n     int
}

func bySubmit(a, b *job.Job) int {
	if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func (m *listModel) submit(j *job.Job) {
	s := m.n
	if k := len(m.free); k > 0 {
		s, m.free = m.free[k-1], m.free[:k-1]
	} else {
		m.n++
	}
	m.slot[j] = s
	i, _ := slices.BinarySearchFunc(m.live, j, bySubmit)
	m.live = slices.Insert(m.live, i, j)
}

func (m *listModel) end(j *job.Job) {
	m.live = slices.DeleteFunc(m.live, func(x *job.Job) bool { return x == j })
	m.ended = append(m.ended, j)
}

// compact frees the slots of the jobs that ended, in submission order.
func (m *listModel) compact() {
	slices.SortFunc(m.ended, bySubmit)
	for _, j := range m.ended {
		m.free = append(m.free, m.slot[j])
	}
	m.ended = m.ended[:0]
}

func (m *listModel) read() []string {
	m.compact()
	out := make([]string, len(m.live))
	for i, j := range m.live {
		out[i] = fmt.Sprintf("%s@%d", j.ID, m.slot[j])
	}
	return out
}

func ids(sts []*engine.Status) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = fmt.Sprintf("%s@%d", st.Job.ID, st.Slot)
	}
	return out
}

// TestDeparturesLeaveTombstones runs random arrivals (some earlier than
// the last, some at the same instant with IDs out of order), ends
// (finished and failed) and forgotten jobs submitted again under the same
// ID through an engine whose policy reads Snapshot.Jobs every round, and
// checks every list read (the policy's snapshot, Active, Snapshot)
// against a plain model of the list: the same jobs in submission order
// with the same slots. The jobs that end between rounds become tombstones
// (Tombs), which the next round sweeps: none is left after a round.
func TestDeparturesLeaveTombstones(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 13))
	clk := &fixedClock{}
	p := &readsAll{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("8x4:t4"), Model: perf.Duration{},
		Policy: p, Placer: place.Pack{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m := &listModel{slot: map[*job.Job]int{}}
	var forgotten []*job.Job
	n, tombs, reads := 0, 0, 0
	submit := func(j *job.Job) {
		if _, err := e.Submit(j); err != nil {
			t.Fatal(err)
		}
		m.submit(j)
	}
	for step := 0; step < 600; step++ {
		clk.t++
		for range rng.IntN(5) {
			// Arrivals mostly in order, some earlier than the last; IDs
			// counting down within a step, so that jobs of the same
			// instant arrive out of (Submit, ID) order.
			at := clk.t - float64(rng.IntN(3))
			id := fmt.Sprintf("j%05d", 90000-n)
			n++
			submit(enginetest.Job(id).At(at).GPUs(1 + rng.IntN(3)).Seconds(1e6).Obj())
		}
		if len(forgotten) > 0 && rng.IntN(4) == 0 {
			// A forgotten job again, under its ID and submission time:
			// its tombstone, if still in the list, has the same key.
			k := rng.IntN(len(forgotten))
			j := *forgotten[k]
			forgotten = slices.Delete(forgotten, k, k+1)
			submit(&j)
		}
		// Ends in a random order, not the list's.
		var ends []*job.Job
		for _, j := range m.live {
			if rng.IntN(5) == 0 {
				ends = append(ends, j)
			}
		}
		rng.Shuffle(len(ends), func(a, b int) { ends[a], ends[b] = ends[b], ends[a] })
		for _, j := range ends {
			end := e.Finish
			if rng.IntN(3) == 0 {
				end = e.Fail
			}
			if err := end(j.ID); err != nil {
				t.Fatal(err)
			}
			m.end(j)
			if rng.IntN(8) == 0 {
				if err := e.Forget(j.ID); err != nil {
					t.Fatal(err)
				}
				m.compact() // Forget drops the ended jobs from the list
				forgotten = append(forgotten, j)
			}
		}
		if rng.IntN(3) == 0 {
			e.Compact()
			m.compact()
			tombs = max(tombs, e.Tombs())
		}
		switch rng.IntN(6) {
		case 0:
			reads++
			if got, want := ids(e.Active()), m.read(); !slices.Equal(got, want) {
				t.Fatalf("step %d: Active reads %v, want %v", step, got, want)
			}
		case 1:
			reads++
			if got, want := ids(e.Snapshot().Jobs), m.read(); !slices.Equal(got, want) {
				t.Fatalf("step %d: Snapshot reads %v, want %v", step, got, want)
			}
		}
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		if want := m.read(); !slices.Equal(p.seen, want) {
			t.Fatalf("step %d: the round read %v, want %v", step, p.seen, want)
		}
		if e.Tombs() != 0 {
			t.Fatalf("step %d: the round left %d tombstones", step, e.Tombs())
		}
	}
	if tombs == 0 || reads == 0 {
		t.Errorf("at most %d tombstones between rounds, %d reads between rounds: the lazy path was not run", tombs, reads)
	}
}
