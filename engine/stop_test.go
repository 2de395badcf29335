package engine_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// TestKeepStopMatchesFull drives two engines in lockstep through random
// arrivals, completions and decisions that stop some running jobs and
// start some waiting ones: one gets each decision as a Keep plan with Stop
// (the jobs it stops and those it starts), the other as the full plan that
// lists every running job it keeps, unchanged and interleaved at random
// with the jobs it starts. Every round's changes (kind, job, GPUs), and
// every job's state, GPUs and counters after it, must be the same.
func TestKeepStopMatchesFull(t *testing.T) {
	stops := 0
	for seed := range 12 {
		rng := rand.New(rand.NewPCG(uint64(seed), 19))
		var keep, full engine.Plan
		a, clk := newEngine(t, "4x4:t4", incrementalFunc(func(*engine.Snapshot) engine.Plan { return keep }), nil)
		// The other engine reads the same clock.
		b, err := engine.New(engine.Config{Cluster: enginetest.Cluster("4x4:t4"), Model: perf.Duration{},
			Policy: planFunc(func(*engine.Snapshot) engine.Plan { return full }), Placer: place.Pack{}, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for step := range 150 {
			clk.t += float64(1 + rng.IntN(60))
			arriveAndEnd(t, []*engine.Engine{a, b}, rng, func() *job.Job {
				n++
				return enginetest.Job(fmt.Sprintf("j%03d", n-1)).At(clk.t).GPUs(1 + rng.IntN(4)).Obj()
			})
			// The decision: stop some running jobs, start waiting ones
			// that fit the GPUs then free, in a random order.
			free := 16
			var kept []engine.Assignment
			keep, full = engine.Plan{Keep: true}, engine.Plan{}
			for _, st := range a.Active() {
				if len(st.GPUs) == 0 {
					continue
				}
				if rng.IntN(5) == 0 {
					keep.Stop = append(keep.Stop, st.Job.ID)
					continue
				}
				free -= len(st.GPUs)
				kept = append(kept, engine.Assignment{Job: st.Job.ID, GPUs: len(st.GPUs)})
			}
			stops += len(keep.Stop)
			rng.Shuffle(len(keep.Stop), func(i, j int) { keep.Stop[i], keep.Stop[j] = keep.Stop[j], keep.Stop[i] })
			for _, i := range rng.Perm(len(a.Active())) {
				st := a.Active()[i]
				if len(st.GPUs) == 0 && st.Job.GPUs <= free && rng.IntN(3) > 0 {
					free -= st.Job.GPUs
					keep.Run = append(keep.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
				}
			}
			// The full plan: the kept jobs and the starts, each in its
			// order, merged at random.
			i, k := 0, 0
			for i < len(kept) || k < len(keep.Run) {
				if k == len(keep.Run) || (i < len(kept) && rng.IntN(2) == 0) {
					full.Run = append(full.Run, kept[i])
					i++
				} else {
					full.Run = append(full.Run, keep.Run[k])
					k++
				}
			}
			ca, err := a.Schedule()
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			cb, err := b.Schedule()
			if err != nil {
				t.Fatalf("seed %d step %d: full plan: %v", seed, step, err)
			}
			if got, want := stopChanges(ca), stopChanges(cb); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: changes\n keep %v\n full %v", seed, step, got, want)
			}
			for i, st := range a.Active() {
				o := b.Active()[i]
				if st.Job.ID != o.Job.ID || st.State != o.State || fmt.Sprint(st.GPUs) != fmt.Sprint(o.GPUs) ||
					st.Attained != o.Attained || st.Waited != o.Waited || st.Preemptions != o.Preemptions || st.LastStop != o.LastStop {
					t.Fatalf("seed %d step %d: job %s %s %v; full: %s %s %v", seed, step, st.Job.ID, st.State, st.GPUs, o.Job.ID, o.State, o.GPUs)
				}
			}
		}
	}
	if stops < 100 {
		t.Fatalf("only %d jobs stopped: the runs do not exercise Plan.Stop", stops)
	}
}

// arriveAndEnd submits zero to two jobs mk makes to every engine of es
// and, one time in three, finishes one of their active jobs at random in
// all of them; it returns the job ended, "" when none.
func arriveAndEnd(t *testing.T, es []*engine.Engine, rng *rand.Rand, mk func() *job.Job) string {
	t.Helper()
	for k := rng.IntN(3); k > 0; k-- {
		j := mk()
		for _, e := range es {
			if _, err := e.Submit(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	act := es[0].Active()
	if len(act) == 0 || rng.IntN(3) != 0 {
		return ""
	}
	id := act[rng.IntN(len(act))].Job.ID
	for _, e := range es {
		if err := e.Finish(id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func stopChanges(cs []engine.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, fmt.Sprint(c.Kind, " ", c.Status.Job.ID, " ", c.To))
	}
	return out
}
