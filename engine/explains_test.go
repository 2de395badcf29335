package engine_test

import (
	"strconv"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
)

// explaining is a policy that plans every round in full, runs job "a"
// and leaves the others waiting; with lazy it says it takes Plan.Explain
// in every round (engine.ExplainsWhenRead) and leaves their reasons to an
// Explainer when the snapshot says it may.
type explaining struct {
	lazy  bool
	saw   []bool // Snapshot.Explains, by round
	asked int    // calls to Reason
}

func (p *explaining) Name() string           { return "explaining" }
func (p *explaining) ExplainsWhenRead() bool { return p.lazy }
func (p *explaining) Schedule(s *engine.Snapshot) engine.Plan {
	p.saw = append(p.saw, s.Explains)
	plan := engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 1}}}
	if s.Explains {
		plan.Explain = p
		return plan
	}
	plan.Reasons = map[string]engine.Reason{}
	for _, st := range s.Jobs {
		if st.Job.ID != "a" {
			plan.Reasons[st.Job.ID] = engine.Reason{Text: "written in round " + strconv.Itoa(s.Round)}
		}
	}
	return plan
}

func (p *explaining) Reason(st *engine.Status, round int) engine.Reason {
	p.asked++
	return engine.Reason{Text: "worked out for round " + strconv.Itoa(round)}
}

// hides is a wrapper that rebuilds nothing but does not say
// ExplainsWhenRead: the policy inside must get Explains false.
type hides struct{ p engine.Policy }

func (h hides) Name() string                            { return h.p.Name() }
func (h hides) Schedule(s *engine.Snapshot) engine.Plan { return h.p.Schedule(s) }

// TestExplainsWhenRead checks that the engine tells a policy that
// implements ExplainsWhenRead, in every round from the first, that it
// takes Plan.Explain (Snapshot.Explains), and that a waiting job's reason
// is then the Explainer's, asked only when read; a policy that does not
// say so, or says false, or sits behind a wrapper that does not forward
// it, gets false and its written reasons.
func TestExplainsWhenRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		lazy bool
		wrap bool
		want bool
	}{
		{"says true", true, false, true},
		{"says false", false, false, false},
		{"behind a wrapper", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &explaining{lazy: tc.lazy}
			var held engine.Policy = p
			if tc.wrap {
				held = hides{p}
			}
			e, clk := newEngine(t, "1x1:t4", held, nil)
			for _, id := range []string{"a", "b", "c"} {
				if _, err := e.Submit(enginetest.Job(id).Seconds(1000).Obj()); err != nil {
					t.Fatal(err)
				}
			}
			for r := 0; r < 3; r++ {
				clk.t += 10
				if _, err := e.Schedule(); err != nil {
					t.Fatal(err)
				}
			}
			for r, got := range p.saw {
				if got != tc.want {
					t.Fatalf("round %d: Snapshot.Explains = %v, want %v", r, got, tc.want)
				}
			}
			if tc.want && p.asked != 0 {
				t.Fatalf("the Explainer was asked %d times before any reason was read", p.asked)
			}
			st := e.Job("b")
			if st == nil {
				t.Fatal("job b unknown")
			}
			want := "written in round 2"
			if tc.want {
				want = "worked out for round 2"
			}
			if got := st.Reason().Text; got != want {
				t.Fatalf("job b's reason = %q, want %q", got, want)
			}
		})
	}
}
