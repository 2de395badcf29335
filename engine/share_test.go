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

// pairModel rates every pair except those with a job whose ID starts with
// "x": each runs at 60% of its speed alone.
type pairModel struct{ perf.Duration }

func (pairModel) Shared(j1, j2 *job.Job, a perf.Alloc) (float64, float64, bool) {
	if strings.HasPrefix(j1.ID, "x") || strings.HasPrefix(j2.ID, "x") {
		return 0, 0, false
	}
	return 0.6, 0.6, true
}

func newSharing(t *testing.T, shorthand string, p engine.Policy, pl engine.Placer, m perf.Model, sharing bool) (*engine.Engine, *manual) {
	t.Helper()
	clk := &manual{}
	if pl == nil {
		pl = place.Pack{}
	}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster(shorthand), Model: m,
		Policy: p, Placer: pl, Clock: clk, Sharing: sharing})
	if err != nil {
		t.Fatal(err)
	}
	return e, clk
}

func packed(id, with string, n int) engine.Assignment {
	return engine.Assignment{Job: id, GPUs: n, PackWith: with}
}

func TestRejectsBadPairs(t *testing.T) {
	tests := []struct {
		name    string
		plan    []engine.Assignment
		model   perf.Model
		sharing bool
		placer  engine.Placer
		want    string
	}{
		{"executor without sharing", []engine.Assignment{packed("a", "b", 1), packed("b", "a", 1)}, pairModel{}, false, nil, "one job per GPU"},
		{"model without pairs", []engine.Assignment{packed("a", "b", 1), packed("b", "a", 1)}, perf.Duration{}, true, nil, "no throughputs for shared GPUs"},
		{"with itself", []engine.Assignment{packed("a", "a", 1)}, pairModel{}, true, nil, "with itself"},
		{"partner not planned", []engine.Assignment{packed("a", "b", 1)}, pairModel{}, true, nil, "does not run"},
		{"not mutual", []engine.Assignment{packed("a", "b", 1), {Job: "b", GPUs: 1}}, pairModel{}, true, nil, "mutual"},
		{"third job", []engine.Assignment{packed("a", "b", 1), packed("b", "a", 1), packed("c", "a", 1)}, pairModel{}, true, nil, "mutual"},
		{"different counts", []engine.Assignment{packed("a", "e", 1), packed("e", "a", 2)}, pairModel{}, true, nil, "different GPUs"},
		{"different types", []engine.Assignment{{Job: "a", GPUs: 1, PackWith: "b", GPUType: "t4"}, packed("b", "a", 1)}, pairModel{}, true, nil, "different GPUs"},
		{"pair not rated", []engine.Assignment{packed("a", "x", 1), packed("x", "a", 1)}, pairModel{}, true, nil, "no throughput for job a packed with x"},
		{"a pair counts once, but not a third job", []engine.Assignment{packed("a", "b", 1), packed("b", "a", 1), {Job: "c", GPUs: 1}},
			pairModel{}, true, fixedPlacer{"a": {0}, "b": {0}, "c": {0}}, "GPU 0 given to both"},
		{"pairs still fill the cluster", []engine.Assignment{packed("a", "b", 1), packed("b", "a", 1), {Job: "e", GPUs: 2}, {Job: "c", GPUs: 1}},
			pairModel{}, true, nil, "the cluster has 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newSharing(t, "1x2:t4", planFunc(func(*engine.Snapshot) engine.Plan { return engine.Plan{Run: tc.plan} }), tc.placer, tc.model, tc.sharing)
			for _, j := range []*job.Job{
				enginetest.Job("a").Obj(), enginetest.Job("b").Obj(), enginetest.Job("c").Obj(),
				enginetest.Job("x").Obj(), enginetest.Job("e").Elastic(1, 1, 2).Obj(),
			} {
				if _, err := e.Submit(j); err != nil {
					t.Fatal(err)
				}
			}
			_, err := e.Schedule()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if e.Allocated() != 0 {
				t.Fatalf("a refused plan left %d GPUs held", e.Allocated())
			}
		})
	}
}

// TestPairLifecycle walks one pair through forming, running, unpacking and
// a completion, checking the changes each step emits.
func TestPairLifecycle(t *testing.T) {
	var plan []engine.Assignment
	var sharing bool
	e, clk := newSharing(t, "1x2:t4", planFunc(func(s *engine.Snapshot) engine.Plan {
		sharing = s.Sharing
		return engine.Plan{Run: plan}
	}), nil, pairModel{}, true)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := e.Submit(enginetest.Job(id).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	step := func(want string, p ...engine.Assignment) {
		t.Helper()
		plan = p
		clk.t += 10
		ch, err := e.Schedule()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range ch {
			got = append(got, fmt.Sprintf("%s %s %v->%v", c.Kind, c.Status.Job.ID, c.From, c.To))
		}
		if strings.Join(got, "; ") != want {
			t.Fatalf("changes %q, want %q", strings.Join(got, "; "), want)
		}
	}
	partners := func(want string) {
		t.Helper()
		var got []string
		for _, st := range e.Active() {
			got = append(got, st.Job.ID+":"+st.PackedWith)
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("partners %q, want %q", strings.Join(got, " "), want)
		}
	}
	step("start a []->[0]", engine.Assignment{Job: "a", GPUs: 1})
	if !sharing {
		t.Fatal("Snapshot.Sharing is false on an engine built with Sharing")
	}
	// b joins a on GPU 0: a keeps running untouched.
	step("start b []->[0]", packed("a", "b", 1), packed("b", "a", 1))
	partners("a:b b:a c:")
	if f, s := e.Holders(0); f == nil || s == nil || f.Job.ID != "a" || s.Job.ID != "b" || e.Allocated() != 1 {
		t.Fatalf("GPU 0 held by %v and %v, %d allocated; want a and b, 1", f, s, e.Allocated())
	}
	// The same pair listed the other way round changes nothing.
	step("", packed("b", "a", 1), packed("a", "b", 1))
	// Unpacking is a move of one member: b, listed second, resizes to GPU 1.
	step("resize b [0]->[1]", engine.Assignment{Job: "a", GPUs: 1}, engine.Assignment{Job: "b", GPUs: 1})
	partners("a: b: c:")
	if f, s := e.Holders(0); f == nil || f.Job.ID != "a" || s != nil || e.Allocated() != 2 {
		t.Fatalf("after unpacking GPU 0 held by %v and %v, %d allocated", f, s, e.Allocated())
	}
	// c packs with b (on b's GPU); a is preempted.
	step("preempt a [0]->[]; start c []->[1]", packed("c", "b", 1), packed("b", "c", 1))
	partners("a: b:c c:b")
	// b finishes: c runs alone on GPU 1.
	if err := e.Finish("b"); err != nil {
		t.Fatal(err)
	}
	partners("a: c:")
	if f, s := e.Holders(1); f == nil || f.Job.ID != "c" || s != nil {
		t.Fatalf("after b finished GPU 1 held by %v and %v", f, s)
	}
	// a pair whose members both ran elsewhere: the first keeps its GPUs.
	step("restart a []->[0]", engine.Assignment{Job: "c", GPUs: 1}, engine.Assignment{Job: "a", GPUs: 1})
	step("resize a [0]->[1]", packed("c", "a", 1), packed("a", "c", 1))
	partners("a:c c:a")
}

// packChaos returns random valid plans that pack random pairs of jobs of
// equal counts, and records every snapshot's sharing flag.
type packChaos struct{ rng *rand.Rand }

func (packChaos) Name() string { return "pack-chaos" }
func (c packChaos) Schedule(s *engine.Snapshot) engine.Plan {
	free := map[string]int{}
	for _, t := range s.Cluster.GPUTypes() {
		free[t] = s.Cluster.GPUsOfType(t)
	}
	var p engine.Plan
	var single []int // indexes in p.Run of jobs alone, by which a partner may join
	for _, i := range c.rng.Perm(len(s.Jobs)) {
		j := s.Jobs[i].Job
		if c.rng.IntN(4) == 0 {
			continue
		}
		n := j.MinGPUs + c.rng.IntN(j.MaxGPUs-j.MinGPUs+1)
		if c.rng.IntN(2) == 0 {
			for k, at := range single {
				if a := &p.Run[at]; a.GPUs == n && !strings.HasPrefix(j.ID, "x") {
					a.PackWith = j.ID
					p.Run = append(p.Run, engine.Assignment{Job: j.ID, GPUs: n, GPUType: a.GPUType, PackWith: a.Job})
					single = slices.Delete(single, k, k+1)
					n = 0
					break
				}
			}
			if n == 0 {
				continue
			}
		}
		for _, t := range s.Cluster.GPUTypes() {
			if free[t] >= n {
				free[t] -= n
				single = append(single, len(p.Run))
				p.Run = append(p.Run, engine.Assignment{Job: j.ID, GPUs: n, GPUType: t})
				break
			}
		}
	}
	return p
}

// TestPairsUnderChaos drives a sharing engine with random plans that pack
// random pairs and checks after every round: no GPU holds more than two
// jobs, two jobs on one GPU are each other's partners and hold exactly the
// same GPUs, capacity is never exceeded, Allocated counts a shared GPU once,
// and the changes describe exactly what moved; with each placer (pairs
// reach placers as one assignment).
func TestPairsUnderChaos(t *testing.T) {
	clusters := []string{"1x4:t4", "2x4:t4,2x2:v100", "3x1:t4,1x8:t4", "2x2:t4"}
	chaosTrials(t, 36, 7, clusters, []string{"pack", "most-free", "hived"}, func(t *testing.T, shorthand string, placer engine.Placer, rng *rand.Rand) {
		e, clk := newSharing(t, shorthand, packChaos{rng}, placer, pairModel{}, true)
		c := enginetest.Cluster(shorthand)
		held := map[string][]cluster.GPUID{}
		pairs := 0
		for step := range 60 {
			chaosRound(t, e, clk, rng, held, func(id string) *job.Job {
				lo := 1 + rng.IntN(2)
				return enginetest.Job(id).At(clk.t).Elastic(lo, lo, lo+rng.IntN(2)).Obj()
			}, step)
			holders := map[cluster.GPUID][]*engine.Status{}
			for _, st := range e.Active() {
				if fmt.Sprint(st.GPUs) != fmt.Sprint(held[st.Job.ID]) {
					t.Fatalf("job %s holds %v, the changes said %v", st.Job.ID, st.GPUs, held[st.Job.ID])
				}
				if st.PackedWith != "" {
					p := e.Job(st.PackedWith)
					if p.PackedWith != st.Job.ID || !slices.Equal(p.GPUs, st.GPUs) || len(st.GPUs) == 0 {
						t.Fatalf("job %s packed with %s, which is packed with %q on %v (it holds %v)", st.Job.ID, p.Job.ID, p.PackedWith, p.GPUs, st.GPUs)
					}
					pairs++
				}
				for _, g := range st.GPUs {
					holders[g] = append(holders[g], st)
				}
			}
			for g, hs := range holders {
				switch {
				case len(hs) > 2:
					t.Fatalf("GPU %d holds %d jobs", g, len(hs))
				case len(hs) == 2 && (hs[0].PackedWith != hs[1].Job.ID || hs[1].PackedWith != hs[0].Job.ID):
					t.Fatalf("GPU %d holds %s and %s, which are not partners", g, hs[0].Job.ID, hs[1].Job.ID)
				}
				f, s := e.Holders(g)
				if f != hs[0] && f != hs[len(hs)-1] || (len(hs) == 2) != (s != nil) {
					t.Fatalf("Holders(%d) = %v, %v; jobs say %d holders", g, f, s, len(hs))
				}
			}
			if len(holders) > c.TotalGPUs() || len(holders) != e.Allocated() {
				t.Fatalf("%d GPUs held, Allocated says %d, cluster has %d", len(holders), e.Allocated(), c.TotalGPUs())
			}
		}
		if pairs == 0 {
			t.Fatal("no pair ever ran: the test exercised nothing")
		}
	})
}
