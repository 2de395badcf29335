package classic

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestTiresiasFastMatchesFull drives two engines in lockstep through
// random arrivals (bursts at one instant among them), completions, demotions
// while running and overfull stretches: one with Tiresias as is (planning
// from what changed, Plan.Keep, both when everything fits and, from its kept
// order, when some job does not, Plan.Stop) and one with the same policy
// made to plan every round in full. Every round's changes (kind, job, the
// GPUs themselves), every job's memo, reason, counters and state must be
// the same. Half the runs keep the counters lazily, as the simulator does.
func TestTiresiasFastMatchesFull(t *testing.T) {
	kept, queued, rounds := 0, 0, 0
	for _, spec := range []string{"tiresias:limits=100/300", "tiresias", "tiresias:preset=pollux", "tiresias:limits=20/60/200"} {
		for seed := range 6 {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(len(spec))))
			nodes := 3 + rng.IntN(4)
			c := enginetest.Cluster(fmt.Sprintf("%dx4:v100", nodes))
			fast := fam.Parse(t, spec, contract.Context{}).(*Tiresias)
			slow := fam.Parse(t, spec, contract.Context{}).(*Tiresias)
			clk := &policytest.Clock{}
			mk := func(p engine.Policy) *engine.Engine {
				e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Clock: clk,
					LazyCounters: seed%2 == 1})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			a, b := mk(fast), mk(policytest.FullOnly{Policy: slow})
			dur := map[string]float64{}
			n := 0
			for step := range 600 {
				clk.T += float64(rng.IntN(90))
				// Quiet stretches (everything fits) and bursts (it does not).
				burst := step%150 > 110
				arrive := btoi(rng.IntN(3) == 0)
				if burst {
					arrive = rng.IntN(5)
				}
				for range arrive {
					g := 1 << rng.IntN(3)
					if rng.IntN(8) == 0 {
						g = 8
					}
					g = min(g, 4*nodes)
					j := enginetest.Job(fmt.Sprintf("j%04d", n)).At(clk.T).GPUs(g).Seconds(1e6).Obj()
					n++
					dur[j.ID] = float64(20 + rng.IntN(200))
					if rng.IntN(6) == 0 {
						dur[j.ID] *= 10
					}
					for _, e := range []*engine.Engine{a, b} {
						if _, err := e.Submit(j); err != nil {
							t.Fatal(err)
						}
					}
				}
				// Jobs that have run their time finish; now and then a
				// waiting one fails.
				var end []string
				for _, st := range a.Active() {
					if st.Executed >= dur[st.Job.ID] || (len(st.GPUs) == 0 && rng.IntN(200) == 0) {
						end = append(end, st.Job.ID)
					}
				}
				for _, id := range end {
					for _, e := range []*engine.Engine{a, b} {
						if err := e.Finish(id); err != nil {
							t.Fatal(err)
						}
					}
					if d := policytest.ReasonsDiffer(a.Job(id), b.Job(id)); d != "" {
						t.Fatalf("%s seed %d round %d: ended job %s: %s", spec, seed, step, id, d)
					}
				}
				ca, err := a.Schedule()
				if err != nil {
					t.Fatal(err)
				}
				cb, err := b.Schedule()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := policytest.Changes(ca), policytest.Changes(cb); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s seed %d round %d at %v: changes\n fast %v\n full %v", spec, seed, step, clk.T, got, want)
				}
				aa, ba := a.Active(), b.Active()
				if len(aa) != len(ba) {
					t.Fatalf("%s seed %d round %d: %d active, full %d", spec, seed, step, len(aa), len(ba))
				}
				for i, st := range aa {
					o := ba[i]
					a.Sync(st)
					if st.Job.ID != o.Job.ID || st.Memo != o.Memo || st.Reason() != o.Reason() || !slices.Equal(st.GPUs, o.GPUs) ||
						st.State != o.State || st.Attained != o.Attained || st.Waited != o.Waited || st.Preemptions != o.Preemptions ||
						st.Starts != o.Starts || st.LastStop != o.LastStop {
						t.Fatalf("%s seed %d round %d: job %s memo %v reason %v GPUs %v; full: %s %v %v %v",
							spec, seed, step, st.Job.ID, st.Memo, st.Reason(), st.GPUs, o.Job.ID, o.Memo, o.Reason(), o.GPUs)
					}
					if d := policytest.ReasonsDiffer(st, o); d != "" {
						t.Fatalf("%s seed %d round %d: job %s: %s", spec, seed, step, st.Job.ID, d)
					}
				}
				rounds++
			}
			kept += fast.KeptRounds()
			queued += fast.fast.queued
			if slow.KeptRounds() != 0 {
				t.Fatalf("the wrapped policy planned %d rounds from what changed", slow.KeptRounds())
			}
		}
	}
	t.Logf("%d of %d rounds planned from what changed, %d of them with jobs that do not fit", kept, rounds, queued)
	if queued < rounds/10 || kept-queued < rounds/4 || kept == rounds {
		t.Fatalf("%d of %d rounds planned from what changed, %d of them with jobs that do not fit: the runs do not exercise every kind of round",
			kept, rounds, queued)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTiresiasKeptLockstep runs Tiresias through the shared lockstep
// harness (policytest.Lockstep) too: elastic jobs (which the kept rounds
// leave to the full pass while one runs on a count it did not ask for),
// nodes that go down and come back (rounds that are not AddOnly) and
// adopted jobs, against the same policy planning every round in full.
func TestTiresiasKeptLockstep(t *testing.T) {
	fam.KeptMatchesFull(t, load, "tiresias:limits=100/300", "tiresias:preset=pollux")
}
