package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// watcher is an incremental policy that plans at random (a Keep plan
// whenever the round allows one and a coin says so) and checks every
// round's Snapshot.Changed against what it saw in the round before: every
// job that arrived, left, or whose state or GPUs differ must be listed,
// once.
type watcher struct {
	t      *testing.T
	rng    *rand.Rand
	seen   map[string]string // job -> state and GPUs at the last snapshot
	rounds int
	keeps  int
}

func (*watcher) Name() string      { return "watcher" }
func (*watcher) Incremental() bool { return true }

func view(st *engine.Status) string { return fmt.Sprint(st.State, st.GPUs, st.PackedWith) }

func (w *watcher) Schedule(s *engine.Snapshot) engine.Plan {
	if s.From() == nil {
		w.t.Fatal("a round's snapshot does not name its engine")
	}
	listed := map[string]bool{}
	for _, st := range s.Changed {
		if listed[st.Job.ID] {
			w.t.Fatalf("round %d: job %s listed twice in Changed", s.Round, st.Job.ID)
		}
		listed[st.Job.ID] = true
	}
	if w.rounds > 0 && !s.Incremental {
		w.t.Fatalf("round %d: not incremental after a round that ran to its end", s.Round)
	}
	now := map[string]string{}
	for _, st := range s.Jobs {
		now[st.Job.ID] = view(st)
		if was, ok := w.seen[st.Job.ID]; (!ok || was != now[st.Job.ID]) && w.rounds > 0 && !listed[st.Job.ID] {
			w.t.Fatalf("round %d: job %s went from %q to %q and is not in Changed", s.Round, st.Job.ID, was, now[st.Job.ID])
		}
	}
	for id := range w.seen {
		if _, ok := now[id]; !ok && !listed[id] && w.rounds > 0 {
			w.t.Fatalf("round %d: job %s left and is not in Changed", s.Round, id)
		}
	}
	w.seen = now
	w.rounds++
	free := s.Cluster.TotalGPUs()
	var p engine.Plan
	if s.AddOnly && w.rng.IntN(2) == 0 {
		// Keep: only waiting jobs, within the GPUs nobody holds.
		for _, st := range s.Jobs {
			free -= len(st.GPUs)
		}
		p.Keep = true
		w.keeps++
		for _, st := range s.Jobs {
			if n := st.Job.MinGPUs; len(st.GPUs) == 0 && n <= free && w.rng.IntN(2) == 0 {
				free -= n
				p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: n})
			}
		}
		return p
	}
	return chaos{w.rng}.Schedule(s)
}

// TestChangedAndKeep drives an incremental policy with random full and
// Keep plans, arrivals and completions: Changed lists every job that moved,
// once, and Keep plans leave every running job where it is (chaosRound
// checks each change starts from what the job held).
func TestChangedAndKeep(t *testing.T) {
	for seed := range 20 {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		w := &watcher{t: t, rng: rng}
		e, clk := newEngine(t, "3x4:t4", w, nil)
		held := map[string][]cluster.GPUID{}
		for step := range 80 {
			before := map[string]string{}
			for _, st := range e.Active() {
				if len(st.GPUs) > 0 {
					before[st.Job.ID] = fmt.Sprint(st.GPUs)
				}
			}
			keeps := w.keeps
			chaosRound(t, e, clk, rng, held, func(id string) *job.Job {
				lo := 1 + rng.IntN(3)
				return enginetest.Job(id).At(clk.t).Elastic(lo, lo, lo+rng.IntN(3)).Obj()
			}, step)
			if w.keeps > keeps { // a Keep round: the jobs that ran still hold what they held
				for _, st := range e.Active() {
					if b, ok := before[st.Job.ID]; ok && b != fmt.Sprint(st.GPUs) {
						t.Fatalf("seed %d step %d: a Keep plan moved job %s from %s to %v", seed, step, st.Job.ID, b, st.GPUs)
					}
				}
			}
		}
		if w.keeps == 0 || w.keeps == w.rounds {
			t.Fatalf("seed %d: %d of %d rounds kept: both kinds must run", seed, w.keeps, w.rounds)
		}
	}
}

// TestKeepPlanRefused: a Keep plan is refused, changing nothing, when the
// round cannot take one (a placer that only places whole plans), when it
// lists a running job, when what it starts does not fit beside the GPUs
// held, and when it stops (Plan.Stop) a job that is not running, not
// active, twice or also runs it; and a plan may stop jobs only with Keep.
func TestKeepPlanRefused(t *testing.T) {
	plan := engine.Plan{}
	var snap *engine.Snapshot
	p := incrementalFunc(func(s *engine.Snapshot) engine.Plan { snap = s; return plan })
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
	if !snap.AddOnly || snap.Incremental {
		t.Fatalf("first round: AddOnly %v, Incremental %v; want true, false", snap.AddOnly, snap.Incremental)
	}
	b2, c2 := engine.Assignment{Job: "b", GPUs: 2}, engine.Assignment{Job: "c", GPUs: 2}
	for _, tc := range []struct {
		run    []engine.Assignment
		stop   []string
		noKeep bool
		want   string
	}{
		{[]engine.Assignment{{Job: "a", GPUs: 2}}, nil, false, "holds GPUs"},
		{[]engine.Assignment{b2, c2}, nil, false, "beside the 2 held"},
		{[]engine.Assignment{b2, b2}, nil, false, "twice"},
		// Plan.Stop: only running jobs, each once, not also run, and
		// only with Keep.
		{nil, []string{"b"}, false, "holds no GPUs"},
		{nil, []string{"zz"}, false, "not active"},
		{nil, []string{"a", "a"}, false, "twice"},
		{[]engine.Assignment{{Job: "a", GPUs: 2}}, []string{"a"}, false, "twice"},
		{[]engine.Assignment{b2}, []string{"a"}, true, "without keeping"},
		{[]engine.Assignment{b2, c2, {Job: "d", GPUs: 1}}, []string{"a"}, false, "not active"},
	} {
		clk.t++
		plan = engine.Plan{Run: tc.run, Stop: tc.stop, Keep: !tc.noKeep}
		if _, err := e.Schedule(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Keep plan %v stopping %v: error %v, want one saying %q", tc.run, tc.stop, err, tc.want)
		}
		if got := e.Job("a"); len(got.GPUs) != 2 || got.State != job.Running {
			t.Fatalf("a refused plan moved job a to %v (%s)", got.GPUs, got.State)
		}
		if e.Job("b").State != job.Pending {
			t.Fatalf("a refused plan started job b")
		}
	}
	// After a failed round Changed is not vouched for.
	clk.t++
	plan = engine.Plan{Run: []engine.Assignment{{Job: "b", GPUs: 2}}, Keep: true}
	changes, err := e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Incremental {
		t.Fatal("the round after a failed one says Incremental")
	}
	if len(changes) != 1 || changes[0].Kind != engine.Start || changes[0].Status.Job.ID != "b" || len(e.Job("a").GPUs) != 2 {
		t.Fatalf("Keep plan starting b: changes %v", changes)
	}
	clk.t++
	plan = engine.Plan{Keep: true}
	if changes, err := e.Schedule(); err != nil || len(changes) != 0 || !snap.Incremental {
		t.Fatalf("empty Keep plan: changes %v, error %v, Incremental %v", changes, err, snap.Incremental)
	}
	if !slices.ContainsFunc(snap.Changed, func(st *engine.Status) bool { return st.Job.ID == "b" }) {
		t.Fatal("job b started in the last round and is not in Changed")
	}

	// A placer that is not an Adder: no Keep plans.
	e2, _ := newEngine(t, "1x4:t4", p, fixedPlacer{"x": {0}})
	if _, err := e2.Submit(enginetest.Job("x").GPUs(1).Obj()); err != nil {
		t.Fatal(err)
	}
	plan = engine.Plan{Run: []engine.Assignment{{Job: "x", GPUs: 1}}, Keep: true}
	if _, err := e2.Schedule(); err == nil || !strings.Contains(err.Error(), "AddOnly") {
		t.Fatalf("Keep plan without AddOnly: error %v", err)
	}
	// A policy that is not incremental gets neither Changed nor AddOnly.
	e3, _ := newEngine(t, "1x4:t4", planFunc(func(s *engine.Snapshot) engine.Plan { snap = s; return engine.Plan{} }), nil)
	if _, err := e3.Submit(enginetest.Job("y").GPUs(1).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := e3.Schedule(); err != nil {
		t.Fatal(err)
	}
	if snap.Changed != nil || snap.AddOnly || snap.Incremental {
		t.Fatalf("a policy that is not incremental got Changed %v, AddOnly %v", snap.Changed, snap.AddOnly)
	}
}

// incrementalFunc is planFunc as an engine.IncrementalPolicy.
type incrementalFunc func(s *engine.Snapshot) engine.Plan

func (incrementalFunc) Name() string                              { return "test" }
func (f incrementalFunc) Schedule(s *engine.Snapshot) engine.Plan { return f(s) }
func (incrementalFunc) Incremental() bool                         { return true }

// TestLazyCountersMatch drives two engines in lockstep with the same
// random incremental plans, one keeping counters lazily
// (Config.LazyCounters) and one counting every round, with arrivals,
// completions and clock steps of every size: after every round, every
// job's Attained, Executed, Waited and seconds per GPU type must be the
// same to the bit once synced, in the round's snapshot and in
// Engine.Snapshot's copies, and for jobs that ended. Half the runs fill
// the log every few rounds.
func TestLazyCountersMatch(t *testing.T) {
	defer engine.SetMaxLog(1 << 16)()
	for seed := range 12 {
		if seed%2 == 1 { // the log full every few rounds: every job counted, the log afresh
			engine.SetMaxLog(1 + seed%5)
		} else {
			engine.SetMaxLog(1 << 16)
		}
		clk := &manual{}
		mk := func(lazy bool) *engine.Engine {
			w := &watcher{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 9))}
			e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("2x4:t4,1x4:v100"), Model: perf.Duration{}, Policy: w,
				Placer: place.Pack{}, Clock: clk, LazyCounters: lazy})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		lazy, eager := mk(true), mk(false)
		rng := rand.New(rand.NewPCG(uint64(seed), 10))
		var ended []string
		for step := range 120 {
			if seed%3 == 0 {
				// Whole seconds, now and then tenths back to the next
				// whole second: the lazy sums through whole times only
				// are added at once (syncWhole), the others step by step.
				switch k := rng.IntN(7); {
				case k < 5:
					clk.t += []float64{0, 1, 2, 33, 600}[k]
				case k == 5:
					clk.t += 0.1
				default:
					clk.t = math.Floor(clk.t) + 1
				}
			} else {
				clk.t += []float64{0, 0.1, 1.7, 33.3, 600}[rng.IntN(5)] + rng.Float64()
			}
			k := 0
			if id := arriveAndEnd(t, []*engine.Engine{lazy, eager}, rng, func() *job.Job {
				k++
				return enginetest.Job(fmt.Sprintf("j%d-%d", step, k)).At(clk.t).Elastic(1, 1, 1+rng.IntN(4)).Obj()
			}); id != "" {
				ended = append(ended, id)
			}
			for _, e := range []*engine.Engine{lazy, eager} {
				if _, err := e.Schedule(); err != nil {
					t.Fatal(err)
				}
			}
			if step%7 == 0 { // copies sync every job
				a, b := lazy.Snapshot(), eager.Snapshot()
				for i := range b.Jobs {
					sameCounters(t, seed, step, a.Jobs[i], b.Jobs[i])
				}
			}
			for i, st := range eager.Active() {
				if seed%3 == 0 && rng.IntN(4) != 0 {
					continue // left behind for a few rounds: syncs through several times
				}
				l := lazy.Active()[i]
				lazy.Sync(l)
				sameCounters(t, seed, step, l, st)
			}
			for _, id := range ended {
				sameCounters(t, seed, step, lazy.Job(id), eager.Job(id))
			}
		}
	}
}

func sameCounters(t *testing.T, seed, step int, a, b *engine.Status) {
	t.Helper()
	if a.Job.ID != b.Job.ID || a.Attained != b.Attained || a.Executed != b.Executed || a.Waited != b.Waited ||
		a.TypeSeconds("t4") != b.TypeSeconds("t4") || a.TypeSeconds("v100") != b.TypeSeconds("v100") {
		t.Fatalf("seed %d step %d: job %s lazily %v/%v/%v/%v, counted every round %v/%v/%v/%v", seed, step, a.Job.ID,
			a.Attained, a.Executed, a.Waited, a.TypeSeconds("t4"), b.Attained, b.Executed, b.Waited, b.TypeSeconds("t4"))
	}
}

// TestLazyCountersThroughFractions: job a (15 GPUs) runs from 1,583 s and
// b waits, on rounds at whole seconds up to 1,831, then at 1,831.019,
// 1,831.524 and 1,831.53, and at 1,832: a's attained GPU-seconds counted
// round by round are then 3,734.999999999999, not 3,735 (the fractions'
// roundings do not cancel). The lazy counters, synced only at 1,832 and at
// 1,900, must be those, to the bit: syncWhole may not add the whole
// second at once through fractional times.
func TestLazyCountersThroughFractions(t *testing.T) {
	clk := &manual{}
	plan := func(s *engine.Snapshot) engine.Plan {
		if s.Now < 1583 {
			return engine.Plan{}
		}
		return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 15}}}
	}
	mk := func(lazy bool) *engine.Engine {
		e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("2x8:t4"), Model: perf.Duration{},
			Policy: incrementalFunc(plan), Placer: place.Pack{}, Clock: clk, LazyCounters: lazy})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range []*job.Job{enginetest.Job("a").GPUs(15).Obj(), enginetest.Job("b").GPUs(1).Obj()} {
			if _, err := e.Submit(j); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	lazy, eager := mk(true), mk(false)
	times := []float64{0, 1583}
	for s := 1600; s <= 1800; s += 50 {
		times = append(times, float64(s))
	}
	times = append(times, 1831, 1831.019, 1831.524, 1831.53, 1832, 1833, 1900)
	for i, at := range times {
		clk.t = at
		for _, e := range []*engine.Engine{lazy, eager} {
			if _, err := e.Schedule(); err != nil {
				t.Fatal(err)
			}
		}
		if at == 1832 && eager.Job("a").Attained == 3735 {
			t.Fatal("the fractions added up exactly: the test does not tell the two sums apart")
		}
		if at == 1832 || at == 1900 {
			for _, id := range []string{"a", "b"} {
				lazy.Sync(lazy.Job(id))
				sameCounters(t, 0, i, lazy.Job(id), eager.Job(id))
			}
		}
	}
}
