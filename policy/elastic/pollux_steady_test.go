package elastic

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/internal/race"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/contract"
)

// TestPolluxSteadyRoundsAllocateNothing: with jobs that report fitted
// hints (pxRandomSnap: unfitted, near-linear and poorly scaling jobs, about
// half holding GPUs), the fast search's rounds on an unchanged snapshot
// allocate nothing once the policy's memory has grown: its kept problem,
// the cell arena, and the speedup curves of hints it has seen (their rows
// fill as the searches ask for new shapes, so a few rounds warm them). The
// round number changes every round, so each round's large-neighbourhood
// search draws other random tries, as in a simulation. Each plan's reasons
// are fed back as an engine does (Status.SetReason): a reason whose text is
// unchanged costs nothing, a changed one a string.
func TestPolluxSteadyRoundsAllocateNothing(t *testing.T) {
	race.SkipAllocs(t)
	for _, sz := range []struct{ nodes, gpn, jobs int }{{4, 4, 12}, {16, 4, 40}, {16, 4, 160}, {64, 4, 200}} {
		for _, spec := range []string{"pollux", "pollux:restart_cost=job"} {
			t.Run(fmt.Sprintf("%dx%d-%djobs/%s", sz.nodes, sz.gpn, sz.jobs, spec), func(t *testing.T) {
				s := pxRandomSnap(3, sz.nodes, sz.gpn, sz.jobs)
				p := fam.Parse(t, spec, contract.Context{})
				round := 0
				next := func() {
					round++
					s.Round = round
					plan := p.Schedule(s)
					for _, st := range s.Jobs {
						if r, ok := plan.Reasons[st.Job.ID]; ok {
							st.SetReason(r)
						}
					}
				}
				for range 10 {
					next()
				}
				if got := testing.AllocsPerRun(5, next); got != 0 {
					t.Errorf("a steady round allocates %v times", got)
				}
			})
		}
	}
}

// TestPolluxGAReusesItsMemory: the GA (search=ga) keeps its population's
// memory from round to round (individuals freed to a list, rows in two
// arenas compacted each generation, its scratch), so that once grown its
// search allocates next to nothing: at most a buffer that meets a larger
// need than before (a larger population of free individuals, a node with
// more jobs on it). Over rounds 12 to 21 on an unchanged problem, a
// different random search each round, it allocates fewer than 5 times a
// round on average (testing.AllocsPerRun; 56,578 and 68,820 a round at these sizes
// before it kept its memory).
func TestPolluxGAReusesItsMemory(t *testing.T) {
	for _, sz := range []struct{ nodes, gpn, jobs int }{{4, 4, 12}, {16, 4, 40}} {
		t.Run(fmt.Sprintf("%dx%d-%djobs", sz.nodes, sz.gpn, sz.jobs), func(t *testing.T) {
			s := pxRandomSnap(3, sz.nodes, sz.gpn, sz.jobs)
			p := NewPollux("ga")
			p.Gens = 20
			pr := new(pxProblem)
			round := 0
			next := func() {
				round++
				if !pr.reset(s, p) {
					t.Fatal("no problem")
				}
				pr.plan(pr.solve(round))
			}
			for range 10 {
				next()
			}
			if got := testing.AllocsPerRun(10, next); got >= 5 {
				t.Errorf("a round allocates %v times on average", got)
			}
		})
	}
}

// TestPolluxCurvesFollowTheHints: the curves a policy keeps from round to
// round are those of the hints its jobs report now; a round on jobs with
// other hints keeps none of the last round's.
func TestPolluxCurvesFollowTheHints(t *testing.T) {
	p := NewPollux("fast")
	fitted := func(s *engine.Snapshot) int {
		n := map[*goodput.Hints]bool{}
		for _, st := range s.Jobs {
			if h := st.Hints; h != nil && h.Fitted && h.Limits.InitBatch > 0 {
				n[h] = true
			}
		}
		return len(n)
	}
	for i, s := range []*engine.Snapshot{pxRandomSnap(1, 8, 4, 30), pxRandomSnap(1, 8, 4, 30), pxRandomSnap(2, 4, 4, 12)} {
		s.Round = i + 1
		p.Schedule(s)
		if got, want := len(p.kept.curves), fitted(s); got != want || want == 0 {
			t.Errorf("round %d: %d curves kept, the jobs report %d fitted hints", i+1, got, want)
		}
	}
}
