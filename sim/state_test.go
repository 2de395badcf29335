package sim_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/trace"
)

// stateSetups are the kinds of run a policy's state is checked on, each
// assembled as tide sim assembles runs (package assemble).
func stateSetups(t *testing.T) map[string]*assemble.Inputs {
	costs := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 5, Restart: 20, Resize: 5}}}
	rng := rand.New(rand.NewPCG(5, 23))
	rigid := randomTrace(rng, 24, 8)
	// Sites: a cloud, edge servers that come and go and an inference site
	// whose demand follows a wave, so that harvesting policies keep timers
	// and forecasts; every job may use the edge.
	multi := randomTrace(rng, 24, 4)
	for _, j := range multi {
		j.GPUType = ""
	}
	// Elastic: the first jobs of workload-6 under the Pollux model, whose
	// job agents report goodput models (Pollux, Optimus, AFS...).
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Read(f, "workload-6", "pollux", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := assemble.PolluxModel("")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*assemble.Inputs{
		"rigid":   {Jobs: rigid, Cluster: enginetest.Cluster("2x4:t4"), Model: costs, Round: 60, OnEvents: true},
		"elastic": {Jobs: tr.Jobs[:20], Cluster: enginetest.Cluster("8x4:t4"), Model: pm, Round: 60, OnEvents: true},
		"sites": {Jobs: multi, Cluster: enginetest.MultiSite(1, 4, 3, 2), Model: costs, Round: 60, OnEvents: true, Sites: &sim.Sites{Diurnal: []capacity.Diurnal{
			{Site: "infer", Measure: "inference", Period: 7200, Trough: 1, Peak: 7, Noise: 1, Step: 300, Seed: 3},
			{Site: "edge", Measure: "available", Period: 5400, Trough: 0, Peak: 3, Noise: 0.5, Step: 300, Seed: 4},
		}}},
	}
}

// TestStateHandover runs every registered policy, with its presets, on
// each setup: once straight through, then with its state saved every few
// rounds and the following rounds run by a fresh instance that loaded the
// bytes (engine.Stateful, memos and round
// count through Engine.PolicyState), as tide serve and tide kube do across
// a restart. The two runs must give the same bytes. A policy that keeps
// state between rounds without declaring it fails here: the registry is
// enumerated, so a new policy cannot skip the check.
func TestStateHandover(t *testing.T) {
	setups := stateSetups(t)
	for _, name := range []string{"rigid", "elastic", "sites"} {
		for _, sp := range policy.Specs() {
			t.Run(name+"/"+sp, func(t *testing.T) {
				if info, _ := policy.Lookup(sp); info.NeedsSolver && solver.Available() != nil {
					t.Skip("needs GLPK")
				}
				checkHandover(t, setups[name], spec(sp))
			})
		}
	}
}

// checkHandover compares a straight run of spec with runs handed over to a
// fresh instance every 3 rounds, every 7 and once halfway.
func checkHandover(t *testing.T, in *assemble.Inputs, spec string) {
	t.Helper()
	build := func() (engine.Policy, error) {
		r, err := in.Build(spec)
		if err != nil {
			return nil, err
		}
		return r.Config.Policy, nil
	}
	fresh := func() (engine.Policy, error) {
		p, err := build()
		return &enginetest.StableState{Policy: p, T: t, Fresh: build}, err
	}
	once := func(handover int) ([]byte, int, error) {
		r, err := in.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		if handover > 0 {
			r.Config.Policy = &enginetest.StableState{Policy: r.Config.Policy, T: t, Fresh: build}
		}
		r.Config.Handover, r.Config.Fresh = handover, fresh
		run, err := r.Simulate()
		if err != nil {
			return nil, 0, err
		}
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(run); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), run.Rounds, nil
	}
	straight, rounds, err := once(0)
	if err != nil {
		// Not this test's subject; TestConformance holds policies to
		// running their own setting.
		t.Skipf("the policy does not run this setup: %v", err)
	}
	for _, every := range []int{3, 7, max(rounds/2, 1)} {
		got, _, err := once(every)
		if err != nil {
			t.Errorf("handed over every %d rounds of %d: %v", every, rounds, err)
		} else if !bytes.Equal(got, straight) {
			t.Errorf("handed over every %d rounds of %d: the run differs from one without (%s)", every, rounds, firstDiff(straight, got))
		}
	}
}

// firstDiff shows where two outputs part.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return "..." + string(a[lo:min(len(a), i+40)]) + " | " + string(b[lo:min(len(b), i+40)])
}
