package engine_test

import (
	"fmt"
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

// manual is a clock the test moves by hand.
type manual struct{ t float64 }

func (c *manual) Now() float64 { return c.t }

// planFunc adapts a function to engine.Policy.
type planFunc func(s *engine.Snapshot) engine.Plan

func (planFunc) Name() string                              { return "test" }
func (f planFunc) Schedule(s *engine.Snapshot) engine.Plan { return f(s) }

// fixedPlacer returns a canned placement, to feed the engine placers that
// break the rules.
type fixedPlacer map[string][]cluster.GPUID

func (fixedPlacer) Name() string { return "fixed" }
func (f fixedPlacer) Place(*cluster.Cluster, map[string][]cluster.GPUID, []engine.Assignment) map[string][]cluster.GPUID {
	return f
}

func newEngine(t *testing.T, shorthand string, p engine.Policy, pl engine.Placer) (*engine.Engine, *manual) {
	t.Helper()
	clk := &manual{}
	if pl == nil {
		pl = place.Pack{}
	}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster(shorthand), Model: perf.Duration{},
		Policy: p, Placer: pl, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return e, clk
}

// TestRejectsBadPlans feeds the engine plans and placements that break its
// invariants; each must be refused with an error that says why, and leave
// no job holding GPUs.
func TestRejectsBadPlans(t *testing.T) {
	run := func(id string, n int) engine.Assignment { return engine.Assignment{Job: id, GPUs: n} }
	tests := []struct {
		name   string
		plan   []engine.Assignment
		placer engine.Placer
		want   string
	}{
		{"unknown job", []engine.Assignment{run("zz", 1)}, nil, `"zz"`},
		{"job twice", []engine.Assignment{run("a", 1), run("a", 1)}, nil, "twice"},
		{"below its minimum", []engine.Assignment{run("e", 1)}, nil, "outside its [2, 4]"},
		{"above its maximum", []engine.Assignment{run("e", 5)}, nil, "outside its [2, 4]"},
		{"more than the cluster", []engine.Assignment{run("a", 1), run("b", 4), run("e", 4)}, nil, "the cluster has 8"},
		{"wrong type", []engine.Assignment{{Job: "a", GPUs: 1, GPUType: "v100"}}, nil, "asks for t4"},
		{"GPU given twice", []engine.Assignment{run("a", 1), run("b", 4)},
			fixedPlacer{"a": {0}, "b": {0, 1, 2, 3}}, "GPU 0 given to both"},
		{"wrong count placed", []engine.Assignment{run("b", 4)}, fixedPlacer{"b": {0, 1}}, "placed on 2"},
		{"GPU that does not exist", []engine.Assignment{run("a", 1)}, fixedPlacer{"a": {99}}, "does not exist"},
		{"placed a job not planned", []engine.Assignment{run("a", 1)}, fixedPlacer{"a": {0}, "b": {1, 2, 3, 4}}, "only 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, "2x4:t4", planFunc(func(*engine.Snapshot) engine.Plan { return engine.Plan{Run: tc.plan} }), tc.placer)
			for _, j := range []*job.Job{
				enginetest.Job("a").Type("t4").Obj(),
				enginetest.Job("b").GPUs(4).Obj(),
				enginetest.Job("e").Elastic(2, 3, 4).Obj(),
			} {
				if _, err := e.Submit(j); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.Schedule()
			if err == nil {
				t.Fatalf("plan accepted, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if n := e.Allocated(); n != 0 {
				t.Errorf("%d GPUs allocated after a refused plan", n)
			}
		})
	}
}

// TestSubmitErrors checks that jobs the engine cannot run are refused at the
// door, by name, and that nothing already accepted is lost.
func TestSubmitErrors(t *testing.T) {
	e, _ := newEngine(t, "2x4:t4", planFunc(func(*engine.Snapshot) engine.Plan { return engine.Plan{} }), nil)
	if _, err := e.Submit(enginetest.Job("ok").Obj()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		j    *job.Job
		want string
	}{
		{enginetest.Job("ok").Obj(), "already submitted"},
		{enginetest.Job("big").GPUs(9).Obj(), "the most the cluster has is 8"},
		{enginetest.Job("typed").Type("a100").Obj(), "a100"},
		{enginetest.Job("epochs").Epochs("bert", 2, 32).Obj(), "duration model"},
	} {
		_, err := e.Submit(tc.j)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.j.ID) {
			t.Errorf("submit %s: error %v, want one naming the job and containing %q", tc.j.ID, err, tc.want)
		}
	}
	if len(e.Active()) != 1 || e.Job("ok") == nil {
		t.Errorf("accepted job lost: %d active", len(e.Active()))
	}
}

// TestAccounting checks attained service (GPU-seconds), executed and waited
// time, driven only by the clock the engine was handed. Job a (2 GPUs) runs
// 0-100, is preempted for b at 100 and waits 100-160: attained 2x100 = 200,
// executed 100, waited 60.
func TestAccounting(t *testing.T) {
	order := []string{"a"}
	e, clk := newEngine(t, "1x2:t4", planFunc(func(s *engine.Snapshot) engine.Plan {
		var p engine.Plan
		for _, id := range order {
			p.Run = append(p.Run, engine.Assignment{Job: id, GPUs: 2})
		}
		return p
	}), nil)
	if _, err := e.Submit(enginetest.Job("a").GPUs(2).Seconds(1000).Obj()); err != nil {
		t.Fatal(err)
	}
	ch, err := e.Schedule()
	if err != nil || len(ch) != 1 || ch[0].Kind != engine.Start {
		t.Fatalf("changes %v, err %v; want one start", ch, err)
	}
	clk.t = 100
	if _, err := e.Submit(enginetest.Job("b").At(100).GPUs(2).Seconds(10).Obj()); err != nil {
		t.Fatal(err)
	}
	order = []string{"b"}
	ch, err = e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	kinds := fmt.Sprint(kindsOf(ch))
	if kinds != "[preempt:a start:b]" {
		t.Fatalf("changes %s, want [preempt:a start:b]", kinds)
	}
	clk.t = 160
	e.Snapshot()
	a := e.Job("a")
	if a.Attained != 200 || a.Executed != 100 || a.Waited != 60 || a.Preemptions != 1 || a.State != job.Preempted {
		t.Errorf("a: attained %v executed %v waited %v preemptions %d state %s; want 200, 100, 60, 1, preempted",
			a.Attained, a.Executed, a.Waited, a.Preemptions, a.State)
	}
	if err := e.Finish("b"); err != nil {
		t.Fatal(err)
	}
	order = []string{"a"}
	ch, err = e.Schedule()
	if err != nil || fmt.Sprint(kindsOf(ch)) != "[restart:a]" {
		t.Fatalf("changes %v, err %v; want [restart:a]", kindsOf(ch), err)
	}
	if err := e.Finish("b"); err == nil {
		t.Error("finishing b twice was accepted")
	}
}

func kindsOf(ch []engine.Change) []string {
	var out []string
	for _, c := range ch {
		out = append(out, string(c.Kind)+":"+c.Status.Job.ID)
	}
	return out
}

// chaos is a policy that returns a random valid plan: random jobs, random
// counts within their limits, no more GPUs than exist. It exercises the
// engine and placers far beyond what a sensible policy would ask.
type chaos struct{ rng *rand.Rand }

func (chaos) Name() string { return "chaos" }
func (c chaos) Schedule(s *engine.Snapshot) engine.Plan {
	free := s.Cluster.TotalGPUs()
	var p engine.Plan
	for _, i := range c.rng.Perm(len(s.Jobs)) {
		j := s.Jobs[i].Job
		if c.rng.IntN(3) == 0 {
			continue
		}
		n := j.MinGPUs + c.rng.IntN(j.MaxGPUs-j.MinGPUs+1)
		if n > free {
			continue
		}
		free -= n
		p.Run = append(p.Run, engine.Assignment{Job: j.ID, GPUs: n})
	}
	return p
}

// TestInvariantsUnderChaos drives the engine with random plans, arrivals and
// completions on random clusters, with both placers, and checks after every
// round that no GPU is held twice, capacity is never exceeded, every running
// job holds a count within its limits on GPUs of one type, and the changes
// describe exactly what moved.
func TestInvariantsUnderChaos(t *testing.T) {
	clusters := []string{"1x4:t4", "2x4:t4,2x2:v100", "4x8:a100", "3x1:t4,1x8:t4"}
	chaosTrials(t, 40, 99, clusters, []string{"pack", "most-free"}, func(t *testing.T, shorthand string, placer engine.Placer, rng *rand.Rand) {
		e, clk := newEngine(t, shorthand, chaos{rng}, placer)
		c := enginetest.Cluster(shorthand)
		biggest := 0
		for _, typ := range c.GPUTypes() {
			biggest = max(biggest, c.GPUsOfType(typ))
		}
		held := map[string][]cluster.GPUID{}
		for step := range 60 {
			chaosRound(t, e, clk, rng, held, func(id string) *job.Job {
				lo := 1 + rng.IntN(min(4, biggest))
				hi := lo + rng.IntN(biggest-lo+1)
				return enginetest.Job(id).At(clk.t).Elastic(lo, lo, hi).Obj()
			}, step)
			owner := map[cluster.GPUID]string{}
			total := 0
			for _, st := range e.Active() {
				if fmt.Sprint(st.GPUs) != fmt.Sprint(held[st.Job.ID]) {
					t.Fatalf("job %s holds %v, the changes said %v", st.Job.ID, st.GPUs, held[st.Job.ID])
				}
				if len(st.GPUs) == 0 {
					if st.State == job.Running {
						t.Fatalf("job %s running without GPUs", st.Job.ID)
					}
					continue
				}
				if st.State != job.Running {
					t.Fatalf("job %s holds GPUs in state %s", st.Job.ID, st.State)
				}
				if n := len(st.GPUs); n < st.Job.MinGPUs || n > st.Job.MaxGPUs {
					t.Fatalf("job %s holds %d GPUs, outside [%d, %d]", st.Job.ID, n, st.Job.MinGPUs, st.Job.MaxGPUs)
				}
				typ := c.NodeOf(st.GPUs[0]).GPUType
				for _, g := range st.GPUs {
					if o, dup := owner[g]; dup {
						t.Fatalf("GPU %d held by %s and %s", g, o, st.Job.ID)
					}
					owner[g] = st.Job.ID
					if c.NodeOf(g).GPUType != typ {
						t.Fatalf("job %s spans GPU types", st.Job.ID)
					}
				}
				if st.Alloc.GPUs() != len(st.GPUs) || st.Alloc.GPUType != typ {
					t.Fatalf("job %s: shape %+v does not describe %v", st.Job.ID, st.Alloc, st.GPUs)
				}
				total += len(st.GPUs)
			}
			if total > c.TotalGPUs() || total != e.Allocated() {
				t.Fatalf("%d GPUs held, Allocated says %d, cluster has %d", total, e.Allocated(), c.TotalGPUs())
			}
		}
	})
}

// chaosRound moves the clock, submits up to two new jobs, finishes a random
// active one now and then, runs a round and checks that each change starts
// from what the job held, updating held (job -> GPUs).
func chaosRound(t *testing.T, e *engine.Engine, clk *manual, rng *rand.Rand, held map[string][]cluster.GPUID,
	newJob func(id string) *job.Job, step int) {
	t.Helper()
	clk.t += float64(1 + rng.IntN(100))
	for k := rng.IntN(3); k > 0; k-- {
		if _, err := e.Submit(newJob(fmt.Sprintf("j%d-%d", step, k))); err != nil {
			t.Fatal(err)
		}
	}
	if act := e.Active(); len(act) > 0 && rng.IntN(4) == 0 {
		id := act[rng.IntN(len(act))].Job.ID
		if err := e.Finish(id); err != nil {
			t.Fatal(err)
		}
		delete(held, id)
	}
	changes, err := e.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		id := ch.Status.Job.ID
		if len(held[id]) > 0 && fmt.Sprint(held[id]) != fmt.Sprint(ch.From) {
			t.Fatalf("%s %s: From %v, but it held %v", ch.Kind, id, ch.From, held[id])
		}
		if ch.Kind == engine.Preempt {
			delete(held, id)
		} else {
			held[id] = ch.To
		}
	}
}

// TestPolicyErrorsAndWarnings: a plan's warnings are recorded with their
// round; a plan with Err fails the round, names the policy, changes no job
// and still records its warnings; reasons reach Status.Reason.
func TestPolicyErrorsAndWarnings(t *testing.T) {
	fail := false
	p := planFunc(func(s *engine.Snapshot) engine.Plan {
		w := []engine.Warning{{Kind: engine.WarnFallback, Reason: fmt.Sprintf("round %d", s.Round)}}
		if fail {
			return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 1}}, Warnings: w, Err: fmt.Errorf("no plan")}
		}
		return engine.Plan{Warnings: w, Reasons: map[string]engine.Reason{"a": {Text: "waits", Position: 1, PredictedStart: 60}}}
	})
	e, _ := newEngine(t, "1x1:t4", p, nil)
	if _, err := e.Submit(enginetest.Job("a").GPUs(1).Seconds(10).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Schedule(); err != nil {
		t.Fatal(err)
	}
	if r := e.Job("a").Reason(); r != (engine.Reason{Text: "waits", Position: 1, PredictedStart: 60}) {
		t.Errorf("reason %+v", r)
	}
	fail = true
	ch, err := e.Schedule()
	if err == nil || !strings.Contains(err.Error(), "policy test") || !strings.Contains(err.Error(), "no plan") || len(ch) != 0 {
		t.Errorf("a plan with Err: changes %v, err %v", ch, err)
	}
	if st := e.Job("a"); len(st.GPUs) != 0 || st.State != job.Pending {
		t.Errorf("a failed round changed job a: %s on %v", st.State, st.GPUs)
	}
	ws := e.Warnings()
	if len(ws) != 2 || ws[0].Reason != "round 0" || ws[1].Reason != "round 1" || ws[1].Round != 2 || ws[0].Policy != "test" {
		t.Errorf("warnings %+v", ws)
	}
}

// TestWarningsBounded: an engine that is never drained keeps the newest
// MaxWarnings warnings and counts the rest; a drain empties it.
func TestWarningsBounded(t *testing.T) {
	p := planFunc(func(s *engine.Snapshot) engine.Plan {
		return engine.Plan{Warnings: []engine.Warning{{Kind: engine.WarnFallback, Reason: fmt.Sprintf("round %d", s.Round)}}}
	})
	e, _ := newEngine(t, "1x1:t4", p, nil)
	if _, err := e.Submit(enginetest.Job("a").GPUs(2).Seconds(10).Obj()); err == nil {
		t.Fatal("a 2-GPU job on 1 GPU was accepted")
	}
	if _, err := e.Submit(enginetest.Job("a").GPUs(1).Seconds(10).Obj()); err != nil {
		t.Fatal(err)
	}
	const extra = 10
	for range engine.MaxWarnings + extra {
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
	}
	ws := e.Warnings()
	if len(ws) != engine.MaxWarnings || e.WarningsDropped() != extra || ws[0].Reason != fmt.Sprintf("round %d", extra) {
		t.Fatalf("kept %d warnings (first %q), dropped %d", len(ws), ws[0].Reason, e.WarningsDropped())
	}
	if got := e.DrainWarnings(); len(got) != engine.MaxWarnings || len(e.Warnings()) != 0 {
		t.Errorf("drain returned %d, left %d", len(got), len(e.Warnings()))
	}
}

// TestDropInvalid: with Config.DropInvalid (the live executors), an
// assignment that could not be honoured for its job alone is dropped with
// a warning naming the job and the mistake, and the round goes on for the
// others; a plan that breaks a rule across jobs is still refused. Without
// it, TestRejectsBadPlans holds.
func TestDropInvalid(t *testing.T) {
	run := func(id string, n int) engine.Assignment { return engine.Assignment{Job: id, GPUs: n} }
	for _, tc := range []struct {
		name   string
		plan   engine.Plan
		runs   []string // jobs holding GPUs after the round
		warned []string // substrings of the warnings, in order
		err    string   // the round's error, "" for none
	}{
		{"wrong type", engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 1, GPUType: "v100"}, run("b", 4)},
			Reasons: map[string]engine.Reason{"a": {Text: "runs on v100"}}},
			[]string{"b"}, []string{"plan gives job a v100 GPUs, it asks for t4: the engine dropped it"}, ""},
		{"outside its limits and unknown", engine.Plan{Run: []engine.Assignment{run("e", 5), run("zz", 1), run("a", 1)}},
			[]string{"a"}, []string{"outside its [2, 4]", `"zz", which is not active`}, ""},
		{"its pair goes with it", engine.Plan{Run: []engine.Assignment{{Job: "e", GPUs: 9, PackWith: "b"}, {Job: "b", GPUs: 4, PackWith: "e"}, run("a", 1)}},
			[]string{"a"}, []string{"outside its [2, 4]", "job b was packed with job e"}, ""},
		{"nothing wrong", engine.Plan{Run: []engine.Assignment{run("a", 1), run("b", 4)}}, []string{"a", "b"}, nil, ""},
		{"too many GPUs in all", engine.Plan{Run: []engine.Assignment{run("a", 1), run("b", 4), run("e", 4)}}, nil, nil, "the cluster has 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := engine.New(engine.Config{Cluster: enginetest.Cluster("2x4:t4"), Model: perf.Duration{}, Placer: place.Pack{},
				Policy: planFunc(func(*engine.Snapshot) engine.Plan { return tc.plan }), Clock: &manual{}, DropInvalid: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range []*job.Job{enginetest.Job("a").Type("t4").Obj(), enginetest.Job("b").GPUs(4).Obj(), enginetest.Job("e").Elastic(2, 3, 4).Obj()} {
				if _, err := e.Submit(j); err != nil {
					t.Fatal(err)
				}
			}
			_, err = e.Schedule()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var holding []string
			for _, st := range e.Active() {
				if len(st.GPUs) > 0 {
					holding = append(holding, st.Job.ID)
				}
			}
			if !slices.Equal(holding, tc.runs) {
				t.Errorf("jobs holding GPUs %v, want %v", holding, tc.runs)
			}
			ws := e.DrainWarnings()
			if len(ws) != len(tc.warned) {
				t.Fatalf("warnings %+v, want %d", ws, len(tc.warned))
			}
			for i, w := range ws {
				if w.Kind != engine.WarnDropped || !strings.Contains(w.Reason, tc.warned[i]) {
					t.Errorf("warning %d: %+v, want kind %s and a reason containing %q", i, w, engine.WarnDropped, tc.warned[i])
				}
				// The job's own reason says it was dropped, not what the
				// policy said of it; the policy's map is left as it was.
				if st := e.Job(w.Job); st != nil && st.Reason().Text != w.Reason {
					t.Errorf("job %s: reason %q, want the warning's %q", w.Job, st.Reason().Text, w.Reason)
				}
				if r, ok := tc.plan.Reasons[w.Job]; ok && r.Text == w.Reason {
					t.Errorf("job %s: the policy's own Reasons map was written", w.Job)
				}
			}
		})
	}
}

// TestNotPlacedReason: a job the plan runs but the placer does not place
// waits with a reason saying so, with what the plan asked and what the
// policy said of it; before, it had the policy's text for a job that runs,
// or no reason at all. Its wait reason (what the simulator records) is the
// same.
func TestNotPlacedReason(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reasons map[string]engine.Reason
		want    []string
	}{
		{"no reason from the policy", nil, []string{"planned on 2 GPUs, but the placer (fixed) found no room for it this round; it waits"}},
		{"the policy's reason kept", map[string]engine.Reason{"a": {Text: "runs first"}},
			[]string{"planned on 2 GPUs, but the placer (fixed) found no room", "(the policy: runs first)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := planFunc(func(*engine.Snapshot) engine.Plan {
				return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 2}}, Reasons: tc.reasons}
			})
			e, _ := newEngine(t, "1x4:t4", pol, fixedPlacer{})
			if _, err := e.Submit(enginetest.Job("a").GPUs(2).Obj()); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Schedule(); err != nil {
				t.Fatal(err)
			}
			st := e.Job("a")
			for _, r := range []engine.Reason{st.Reason(), st.WaitReason()} {
				for _, w := range tc.want {
					if !strings.Contains(r.Text, w) {
						t.Errorf("reason %q, want it to contain %q", r.Text, w)
					}
				}
			}
		})
	}
}
