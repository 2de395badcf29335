package engine_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// keepOrAll is an IncrementalPolicy that, two rounds in three when it
// may, keeps every running job and starts none (reading no job), and
// otherwise runs the first jobs of the active list that fit, in order;
// onDemand says whether it reads them through Snapshot.ActiveJobs only
// (engine.JobsOnDemand) or through Jobs.
type keepOrAll struct {
	onDemand bool
	seen     [][]string // the IDs of the list each full round read
}

func (*keepOrAll) Name() string         { return "keep-or-all" }
func (*keepOrAll) Incremental() bool    { return true }
func (p *keepOrAll) JobsOnDemand() bool { return p.onDemand }
func (p *keepOrAll) Schedule(s *engine.Snapshot) engine.Plan {
	if s.Incremental && s.AddOnly && s.Round%3 != 0 {
		return engine.Plan{Keep: true}
	}
	jobs := s.Jobs
	if p.onDemand {
		if s.Jobs != nil {
			panic("a JobsOnDemand policy's snapshot has Jobs before ActiveJobs")
		}
		jobs = s.ActiveJobs()
		if len(s.Jobs) != len(jobs) {
			panic("ActiveJobs left Jobs unfilled")
		}
	}
	var plan engine.Plan
	var ids []string
	free := s.Cluster.TotalGPUs()
	for _, st := range jobs {
		ids = append(ids, st.Job.ID)
		if st.State.Terminal() {
			panic(fmt.Sprintf("job %s in the snapshot has ended", st.Job.ID))
		}
		if st.Job.GPUs <= free {
			free -= st.Job.GPUs
			plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
		}
	}
	p.seen = append(p.seen, ids)
	return plan
}

// TestJobsOnDemand runs the same random arrivals and ends through two
// engines, one whose policy reads the active jobs on demand (jobs that
// end become tombstones, swept lazily) and one whose policy reads
// Snapshot.Jobs: every full round reads the same list, in submission
// order, the same jobs hold the same GPUs and slots, and ended jobs are
// forgotten alike. Tombstones do build up between sweeps.
func TestJobsOnDemand(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	clk := &fixedClock{}
	mk := func(p *keepOrAll) *engine.Engine {
		e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("8x4:t4"), Model: perf.Duration{},
			Policy: p, Placer: place.Pack{}, Clock: clk, ForgetEnded: true, LazyCounters: true})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	lazy, plain := &keepOrAll{onDemand: true}, &keepOrAll{}
	a, b := mk(lazy), mk(plain)
	var live []string
	n, tombs := 0, 0
	for step := 0; step < 400; step++ {
		clk.t++
		for range rng.IntN(4) {
			// Arrivals mostly in order, some earlier than the last.
			at := clk.t - float64(rng.IntN(3))
			id, gpus := fmt.Sprintf("j%04d", n), 1+rng.IntN(2)
			n++
			for _, e := range []*engine.Engine{a, b} {
				if _, err := e.Submit(enginetest.Job(id).At(at).GPUs(gpus).Seconds(1e6).Obj()); err != nil {
					t.Fatal(err)
				}
			}
			live = append(live, id)
		}
		for i := 0; i < len(live); i++ {
			if rng.IntN(6) == 0 {
				for _, e := range []*engine.Engine{a, b} {
					if err := e.Finish(live[i]); err != nil {
						t.Fatal(err)
					}
				}
				live = slices.Delete(live, i, i+1)
				i--
			}
		}
		for _, e := range []*engine.Engine{a, b} {
			if _, err := e.Schedule(); err != nil {
				t.Fatal(err)
			}
		}
		tombs = max(tombs, a.Tombs())
		if b.Tombs() != 0 {
			t.Fatalf("step %d: %d tombstones under a policy that reads Jobs", step, b.Tombs())
		}
		if step%7 != 0 {
			continue // compare now and then: Active sweeps the tombstones
		}
		aa, ba := a.Active(), b.Active()
		if len(aa) != len(ba) || len(aa) != len(live) {
			t.Fatalf("step %d: %d and %d jobs active, want %d", step, len(aa), len(ba), len(live))
		}
		for i := range aa {
			x, y := aa[i], ba[i]
			if x.Job.ID != y.Job.ID || x.Slot != y.Slot || !slices.Equal(x.GPUs, y.GPUs) || x.State != y.State {
				t.Fatalf("step %d, entry %d: %s slot %d on %v (%s) against %s slot %d on %v (%s)", step, i,
					x.Job.ID, x.Slot, x.GPUs, x.State, y.Job.ID, y.Slot, y.GPUs, y.State)
			}
		}
		if a.Tombs() != 0 {
			t.Fatalf("step %d: Active left %d tombstones", step, a.Tombs())
		}
		if !slices.IsSortedFunc(aa, func(x, y *engine.Status) int {
			if x.Job.Submit != y.Job.Submit {
				return cmp.Compare(x.Job.Submit, y.Job.Submit)
			}
			return cmp.Compare(x.Job.ID, y.Job.ID)
		}) {
			t.Fatalf("step %d: the active list is out of submission order", step)
		}
	}
	if tombs == 0 {
		t.Error("no tombstone ever stayed between rounds: the lazy path was not run")
	}
	if len(lazy.seen) != len(plain.seen) || len(lazy.seen) < 100 {
		t.Fatalf("%d and %d full rounds", len(lazy.seen), len(plain.seen))
	}
	for i := range lazy.seen {
		if !slices.Equal(lazy.seen[i], plain.seen[i]) {
			t.Fatalf("full round %d read %v, the plain engine's %v", i, lazy.seen[i], plain.seen[i])
		}
	}
	for _, id := range []string{"j0000", "j0001"} {
		if slices.Contains(live, id) {
			continue
		}
		if a.Job(id) != nil || b.Job(id) != nil {
			t.Errorf("ended job %s still known", id)
		}
	}
}
