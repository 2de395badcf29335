package engine_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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
			for k := rng.IntN(3); k > 0; k-- {
				j := enginetest.Job(fmt.Sprintf("j%03d", n)).At(clk.t).GPUs(1 + rng.IntN(4)).Obj()
				n++
				for _, e := range []*engine.Engine{a, b} {
					if _, err := e.Submit(j); err != nil {
						t.Fatal(err)
					}
				}
			}
			if act := a.Active(); len(act) > 0 && rng.IntN(3) == 0 {
				id := act[rng.IntN(len(act))].Job.ID
				for _, e := range []*engine.Engine{a, b} {
					if err := e.Finish(id); err != nil {
						t.Fatal(err)
					}
				}
			}
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

func stopChanges(cs []engine.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, fmt.Sprint(c.Kind, " ", c.Status.Job.ID, " ", c.To))
	}
	return out
}

// TestStopPlanRefused: a plan that stops a job that is not running, not
// active, twice, or also starts it, or that stops jobs without keeping
// the others, is refused, changing nothing.
func TestStopPlanRefused(t *testing.T) {
	plan := engine.Plan{}
	p := incrementalFunc(func(*engine.Snapshot) engine.Plan { return plan })
	e, clk := newEngine(t, "1x4:t4", p, nil)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := e.Submit(enginetest.Job(id).GPUs(2).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	plan = engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 2}}}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plan engine.Plan
		want string
	}{
		{engine.Plan{Keep: true, Stop: []string{"b"}}, "holds no GPUs"},
		{engine.Plan{Keep: true, Stop: []string{"zz"}}, "not active"},
		{engine.Plan{Keep: true, Stop: []string{"a", "a"}}, "twice"},
		{engine.Plan{Keep: true, Stop: []string{"a"}, Run: []engine.Assignment{{Job: "a", GPUs: 2}}}, "twice"},
		{engine.Plan{Stop: []string{"a"}, Run: []engine.Assignment{{Job: "b", GPUs: 2}}}, "without keeping"},
		{engine.Plan{Keep: true, Stop: []string{"a"}, Run: []engine.Assignment{{Job: "b", GPUs: 2}, {Job: "c", GPUs: 2}, {Job: "d", GPUs: 1}}}, "not active"},
	} {
		clk.t++
		plan = tc.plan
		if _, err := e.Schedule(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("plan %+v: error %v, want one saying %q", tc.plan, err, tc.want)
		}
		if got := e.Job("a"); len(got.GPUs) != 2 || got.State != job.Running {
			t.Fatalf("a refused plan moved job a: %s %v", got.State, got.GPUs)
		}
	}
	// Stopping a frees its GPUs for b and c in the same round.
	clk.t++
	plan = engine.Plan{Keep: true, Stop: []string{"a"}, Run: []engine.Assignment{{Job: "b", GPUs: 2}, {Job: "c", GPUs: 2}}}
	changes, err := e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	if got := stopChanges(changes); !reflect.DeepEqual(got, []string{"preempt a []", "start b [0 1]", "start c [2 3]"}) {
		t.Fatalf("changes %v", got)
	}
	if st := e.Job("a"); st.State != job.Preempted || st.Preemptions != 1 {
		t.Fatalf("job a: %s, %d preemptions", st.State, st.Preemptions)
	}
}
