package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testClock is an engine clock the test moves, Unix seconds.
type testClock struct{ now float64 }

func (c *testClock) Now() float64 { return c.now }

// saveState takes the scheduler's policy state and its annotation value.
func (h *harness) saveState() (*SavedPolicyState, string) {
	h.t.Helper()
	saved, err := h.s.savePolicyState()
	if err != nil {
		h.t.Fatal(err)
	}
	v, err := encodePolicyState(saved)
	if err != nil {
		h.t.Fatal(err)
	}
	return saved, v
}

// TestPolicyStateRestoresTiresias: under Tiresias with one queue limit of
// 100 GPU-seconds, pod a holds all 8 GPUs of a node for 20 s (160
// GPU-seconds: the second queue). Its state, taken then, is given to a
// fresh scheduler 5 s later, where a is bound and b, as large, waits:
// restored, a is in the lower queue with 200 GPU-seconds and b, in the
// first, preempts it; a fresh scheduler without the state sees a at zero
// service, ahead of b, and evicts nothing.
func TestPolicyStateRestoresTiresias(t *testing.T) {
	const policy = "tiresias:limits=100"
	h := newHarness(t, policy)
	clock := &testClock{now: 2000}
	h.s.cfg.Clock = clock
	h.node("n", 8)
	h.pod("a", 8)
	h.round()
	if got := h.where()["a"]; got != "n" {
		t.Fatalf("a on %q, want n", got)
	}
	clock.now += 20
	h.round()
	saved, v := h.saveState()
	if len(saved.Jobs) != 1 || saved.Jobs[0].Attained != 160 || saved.Jobs[0].GPUs != 8 || saved.At != 2020 {
		t.Fatalf("saved %+v at %v, want a with 160 GPU-seconds on 8 GPUs at 2020", saved.Jobs, saved.At)
	}

	restart := func(withState bool) (*harness, []string) {
		h2 := newHarness(t, policy)
		h2.s.cfg.Clock = clock
		if withState {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "tide-system", Name: "tide-policy-state",
				Annotations: map[string]string{PolicyStateAnnotation: v}}}
			if _, err := h2.cs.CoordinationV1().Leases("tide-system").Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		h2.s.persistPolicyState(h2.cs, "tide-system", "tide-policy-state")
		h2.node("n", 8)
		h2.pod("a", 8)
		a := h2.get("a")
		a.Spec.NodeName = "n"
		if err := h2.pods.Update(a); err != nil {
			t.Fatal(err)
		}
		h2.pod("b", 8)
		return h2, h2.round()
	}
	clock.now += 5
	h2, evicted := restart(true)
	if fmt.Sprint(evicted) != "[a]" {
		t.Errorf("with the saved state: evicted %v, want [a] (b in the first queue ahead of a)", evicted)
	}
	if st := h2.s.eng.Job(h2.s.ids["pods/ns/a"]); st == nil || st.Attained != 200 {
		t.Errorf("with the saved state: a's status %+v, want 200 GPU-seconds (160 saved, 5 s on 8 GPUs since)", st)
	}
	if _, evicted := restart(false); len(evicted) != 0 {
		t.Errorf("without the saved state: evicted %v, want none (a at zero service, ahead of b)", evicted)
	}
}

// TestPolicyStateSize measures the annotation for Tiresias with
// thousands of jobs of 1-4 GPUs arriving in 40 waves at uneven times
// (a wall clock's fractions), so that their times and service differ as a
// live cluster's do (equal ones compress better), and checks that it
// decodes to what was saved.
func TestPolicyStateSize(t *testing.T) {
	h := newHarness(t, "tiresias")
	clock := &testClock{now: 5000.123456789}
	h.s.cfg.Clock = clock
	const nodes, jobs, waves = 250, 4000, 40 // 2,000 GPUs: half the jobs run
	for i := 0; i < nodes; i++ {
		h.node(fmt.Sprintf("n%03d", i), 8)
	}
	for wave := 0; wave < waves; wave++ {
		for i := wave * jobs / waves; i < (wave+1)*jobs/waves; i++ {
			h.pod(fmt.Sprintf("p-%05d", i), 1+i%4)
		}
		h.round()
		clock.now += 2.0137 + 0.1731*float64(wave%7)
	}
	h.round()
	saved, v := h.saveState()
	if len(saved.Jobs) != jobs {
		t.Fatalf("saved the history of %d jobs, want %d", len(saved.Jobs), jobs)
	}
	t.Logf("%d jobs: %d bytes in the annotation, %.1f per job; the default limit of %d holds about %d such jobs",
		jobs, len(v), float64(len(v))/jobs, DefaultPolicyStateLimit, DefaultPolicyStateLimit*jobs/len(v))
	got, err := DecodePolicyState(v)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(saved) {
		t.Errorf("decoded state differs from the saved one")
	}
	// The worst case: every number of every job distinct (random).
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range saved.Jobs {
		h := &saved.Jobs[i]
		h.Attained, h.Executed, h.Waited = rng.Float64()*1e6, rng.Float64()*1e5, rng.Float64()*1e5
		h.FirstStart, h.LastStart, h.LastStop = 1.7e9+rng.Float64()*1e6, 1.7e9+rng.Float64()*1e6, 1.7e9+rng.Float64()*1e6
	}
	v, err = encodePolicyState(saved)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every job's times distinct: %d bytes, %.1f per job; the default limit holds about %d such jobs",
		len(v), float64(len(v))/jobs, DefaultPolicyStateLimit*jobs/len(v))
}
