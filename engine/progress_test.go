package engine_test

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
)

// onDemand is a test policy that reads progress on demand when od is set.
type onDemand struct {
	planFunc
	od bool
}

func (p onDemand) ProgressOnDemand() bool { return p.od }

// progressFree is a test policy that never reads progress.
type progressFree struct{ planFunc }

func (progressFree) ProgressFree() bool { return true }

// pullSource is an executor's progress hook that hands out canned
// progress and logs every pull.
type pullSource struct {
	eng    *engine.Engine
	at     map[string]float64
	pulled []string
}

func (p *pullSource) PullProgress(st *engine.Status) {
	p.pulled = append(p.pulled, st.Job.ID)
	p.eng.ReportStatus(st, p.at[st.Job.ID])
}

// TestProgressOnDemand: Snapshot.Progress and Snapshot.Remaining pull a
// running job's progress from the executor's hook, never a waiting job's;
// without a hook they read what was reported; NeedsProgress is false only
// for a policy that never reads progress, or reads it on demand from an
// engine with a hook.
func TestProgressOnDemand(t *testing.T) {
	mk := func(id string, submit float64) *job.Job {
		return &job.Job{ID: id, Submit: submit, GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Work: 100, Unit: job.Seconds, Duration: 100}
	}
	for _, hook := range []bool{true, false} {
		clk := &manual{}
		src := &pullSource{at: map[string]float64{"a": 30, "b": 55, "c": 99}}
		var progress, remaining []float64
		pol := onDemand{od: true, planFunc: func(s *engine.Snapshot) engine.Plan {
			if s.Round == 0 {
				return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 2}, {Job: "b", GPUs: 2}}}
			}
			for _, st := range s.Jobs {
				progress = append(progress, s.Progress(st))
			}
			remaining = append(remaining, s.Remaining(s.Jobs[0], 2, ""), s.Remaining(s.Jobs[2], 4, ""))
			return engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 2}, {Job: "b", GPUs: 2}}}
		}}
		cfg := engine.Config{Cluster: enginetest.Cluster("1x4:v100"), Model: perf.Duration{}, Policy: pol, Placer: place.Pack{}, Clock: clk}
		if hook {
			cfg.Progress = src
		}
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		src.eng = e
		if got := e.NeedsProgress(); got == hook {
			t.Fatalf("hook %v: NeedsProgress %v", hook, got)
		}
		for i, id := range []string{"a", "b", "c"} {
			if _, err := e.Submit(mk(id, float64(i))); err != nil {
				t.Fatal(err)
			}
		}
		clk.t = 10
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		if err := e.Report("b", 20); err != nil { // what a live job reports
			t.Fatal(err)
		}
		clk.t = 70
		if _, err := e.Schedule(); err != nil {
			t.Fatal(err)
		}
		// a and b run (pulled when the hook is there); c waits.
		want, wantRem, wantPulled := []float64{0, 20, 0}, []float64{100, 50}, []string(nil)
		if hook {
			want, wantRem, wantPulled = []float64{30, 55, 0}, []float64{70, 50}, []string{"a", "b", "a"}
		}
		if !slices.Equal(progress, want) || !slices.Equal(remaining, wantRem) || !slices.Equal(src.pulled, wantPulled) {
			t.Fatalf("hook %v: progress %v, remaining %v, pulled %v; want %v, %v, %v", hook, progress, remaining, src.pulled, want, wantRem, wantPulled)
		}
	}
	needs := func(p engine.Policy, hook bool) bool {
		cfg := engine.Config{Cluster: enginetest.Cluster("1x4:v100"), Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Clock: &manual{}}
		if hook {
			cfg.Progress = &pullSource{}
		}
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e.NeedsProgress()
	}
	plain := planFunc(func(*engine.Snapshot) engine.Plan { return engine.Plan{} })
	for _, c := range []struct {
		name string
		p    engine.Policy
		hook bool
		want bool
	}{
		{"plain policy, hook", plain, true, true},
		{"on demand off, hook", onDemand{planFunc: plain}, true, true},
		{"on demand, no hook", onDemand{planFunc: plain, od: true}, false, true},
		{"on demand, hook", onDemand{planFunc: plain, od: true}, true, false},
		{"progress free, no hook", progressFree{plain}, false, false},
	} {
		if got := needs(c.p, c.hook); got != c.want {
			t.Errorf("%s: NeedsProgress %v, want %v", c.name, got, c.want)
		}
	}
}
