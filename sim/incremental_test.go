package sim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// full hides its policy's engine.IncrementalPolicy: the engine then hands
// it no Changed and it plans every round in full.
type full struct{ engine.Policy }

// TestTiresiasKeptMatchesFull replays random traces under Tiresias twice:
// as is, planning from what changed (Snapshot.Changed, Plan.Keep) whenever
// everything fits, and behind a wrapper that makes it plan every round in
// full. Every job's record (the reason it last waited for included, which
// the kept rounds leave to Tiresias to work out when read, Plan.Explain)
// and the timeline must be the same, bit for bit. Rounds in which some job
// does not fit are planned from the kept order (Plan.Stop) too.
// The traces mix quiet stretches (the kept rounds) with bursts that
// overfill the cluster (full rounds, preemptions), jobs arriving at the
// same instant, jobs that cross the queue limits while running, and jobs
// the packing placer cannot place although their GPUs are free.
func TestTiresiasKeptMatchesFull(t *testing.T) {
	model := perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Start: 10, Restart: 30, Resize: 30}}}
	kept, queued, rounds := 0, 0, 0
	for seed := range 24 {
		r := rand.New(rand.NewPCG(uint64(seed), 19))
		nodes := 2 + r.IntN(6)
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", nodes))
		var jobs []*job.Job
		now := 0.0
		for i := range 40 + r.IntN(80) {
			switch r.IntN(10) {
			case 0: // a burst: several at once
			case 1, 2:
				now += float64(r.IntN(20000))
			default:
				now += float64(r.IntN(900))
			}
			g := []int{1, 1, 1, 2, 2, 4, 8}[r.IntN(7)]
			if g > 4*nodes {
				g = 1
			}
			d := float64(30 + r.IntN(4000))
			if r.IntN(5) == 0 {
				d *= 20 // crosses the limits while running
			}
			jobs = append(jobs, &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d})
		}
		for _, spec := range []string{"tiresias", "tiresias:preset=pollux", "tiresias:limits=600/1800"} {
			onEvents := seed%3 != 0
			run := func(wrap bool) (string, *classic.Tiresias) {
				p, err := classic.NewTiresias(contract.Context{Jobs: jobs}, knobsOf(t, spec))
				if err != nil {
					t.Fatal(err)
				}
				var pol engine.Policy = p
				if wrap {
					pol = full{p}
				}
				out, err := sim.Run(sim.Config{Cluster: c, Model: model, Policy: pol, Placer: place.Pack{},
					Round: 60, OnEvents: onEvents, Seed: 1}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				rounds += out.Rounds
				return withReasons(out), p
			}
			want, _ := run(true)
			got, p := run(false)
			sameLines(t, fmt.Sprintf("seed %d, %s", seed, spec), got, want)
			kept += p.KeptRounds()
			queued += p.QueuedRounds()
		}
	}
	// Every kind of round must have been exercised.
	t.Logf("%d of %d rounds kept, %d of them with jobs that do not fit", kept, rounds/2, queued)
	if kept == rounds/2 || queued < rounds/2/100 || kept-queued < rounds/2/2 {
		t.Fatalf("%d of %d rounds were planned from what changed, %d with jobs that do not fit: the traces do not exercise every kind",
			kept, rounds/2, queued)
	}
}

// withReasons is writeRun's text with what the policy said of each job
// (its record's reason, queue position and predicted start:
// engine.Status.WaitReason as it started, or at the end).
func withReasons(out *report.Run) string {
	var b strings.Builder
	writeRun(&b, out)
	for _, j := range out.Jobs {
		fmt.Fprintf(&b, "%s %q %d %v\n", j.ID, j.Reason, j.QueuePosition, j.PredictedStart)
	}
	return b.String()
}

// sameLines fails t at the first line where got (the kept run's text)
// and want (the full run's) differ.
func sameLines(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("%s: line %d differs:\n kept %s\n full %s", what, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s: %d lines, full %d", what, len(gl), len(wl))
}

// knobsOf parses a Tiresias spec's knobs the simple way this test needs.
func knobsOf(t *testing.T, spec string) classic.TiresiasKnobs {
	k := classic.DefaultTiresias
	for _, kv := range strings.Split(spec, ":")[1:] {
		key, v, _ := strings.Cut(kv, "=")
		switch key {
		case "preset":
			k.Preset = v
		case "limits":
			for _, f := range strings.Split(v, "/") {
				var x float64
				if _, err := fmt.Sscan(f, &x); err != nil {
					t.Fatal(err)
				}
				k.Limits = append(k.Limits, x)
			}
		}
	}
	return k
}

// TestLazyAdvanceMatches replays random busy traces (queues, preemptions,
// resumptions, start delays of none to minutes) under Tiresias, which never
// reads progress, twice: advancing running jobs only when needed (lazy.go)
// and advancing every running job at every round. Every job's record and
// the timeline must be the same, bit for bit. Half the runs fill the log of
// round instants every few rounds.
func TestLazyAdvanceMatches(t *testing.T) {
	defer sim.SetMaxInstants(1 << 16)()
	for seed := range 16 {
		if seed%2 == 1 { // the log full every few rounds
			sim.SetMaxInstants(1 + seed%4)
		} else {
			sim.SetMaxInstants(1 << 16)
		}
		r := rand.New(rand.NewPCG(uint64(seed), 23))
		c := buildCluster(t, fmt.Sprintf("%dx4:v100", 1+r.IntN(4)))
		costs := perf.Costs{Start: float64(r.IntN(3) * 20), Restart: float64(r.IntN(2) * 45), Resize: 30}
		model := perf.Duration{Cost: perf.CostTable{Default: costs}}
		var jobs []*job.Job
		now := 0.0
		for i := range 30 + r.IntN(60) {
			now += float64(r.IntN(600))
			g := []int{1, 1, 2, 4}[r.IntN(4)]
			d := float64(10+r.IntN(3000)) + r.Float64()
			if seed%4 >= 2 {
				// Whole seconds, now and then milliseconds: the lazy
				// sums through whole instants only are added at once.
				g = []int{1, 3, 3, 4}[r.IntN(4)]
				if d = math.Floor(d); r.IntN(4) == 0 {
					d += float64(1+r.IntN(999)) / 1000
				}
			}
			jobs = append(jobs, &job.Job{ID: fmt.Sprintf("j%03d", i), Submit: now, GPUs: g, MinGPUs: g, MaxGPUs: g,
				Work: d, Unit: job.Seconds, Duration: d})
		}
		for _, spec := range []string{"tiresias:limits=300/900", "tiresias:preset=pollux"} {
			k := knobsOf(t, spec)
			cfg := func() sim.Config {
				p, err := classic.NewTiresias(contract.Context{Jobs: jobs}, k)
				if err != nil {
					t.Fatal(err)
				}
				return sim.Config{Cluster: c, Model: model, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: seed%2 == 0, Seed: 1}
			}
			lazy, err := sim.Run(cfg(), jobs)
			if err != nil {
				t.Fatal(err)
			}
			eager, err := sim.RunEager(cfg(), jobs)
			if err != nil {
				t.Fatal(err)
			}
			sameRuns(t, fmt.Sprintf("seed %d, %s", seed, spec), lazy, eager)
		}
	}
}

// sameRuns fails t when the lazy and eager runs' records, counters and
// timelines (writeRun) differ, naming the first line that does.
func sameRuns(t *testing.T, what string, lazy, eager *report.Run) {
	t.Helper()
	var a, b strings.Builder
	writeRun(&a, lazy)
	writeRun(&b, eager)
	if a.String() == b.String() {
		return
	}
	al, bl := strings.Split(a.String(), "\n"), strings.Split(b.String(), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			t.Fatalf("%s: line %d differs:\n lazy  %s\n eager %s", what, i+1, al[i], bl[i])
		}
	}
	t.Fatalf("%s: %d lines, eager %d", what, len(al), len(bl))
}

// TestLazyAdvanceThroughFractions: job a (15 of 16 GPUs, first in
// Tiresias' one queue below 57,600 GPU-s) runs from 1,583 s to its end at
// 2,083 s, never touched; jobs of one GPU arrive at 1,831.019, 1,831.524
// and 1,831.53 s, each a round, and end at fractional times too. a's
// GPU-seconds counted round by round through those fractions are not the
// 7,500 whole seconds would give at once: the lazy run must match the
// eager one, record for record (syncWhole may add a run of round times at
// once only when they are all whole seconds).
func TestLazyAdvanceThroughFractions(t *testing.T) {
	c := buildCluster(t, "2x8:v100")
	mk := func(id string, at float64, g int, d float64) *job.Job {
		return &job.Job{ID: id, Submit: at, GPUs: g, MinGPUs: g, MaxGPUs: g, Work: d, Unit: job.Seconds, Duration: d}
	}
	jobs := []*job.Job{mk("a", 1583, 15, 500), mk("b", 1831.019, 1, 30), mk("c", 1831.524, 1, 30), mk("d", 1831.53, 1, 30)}
	run := func(eager bool) string {
		p, err := classic.NewTiresias(contract.Context{Jobs: jobs}, knobsOf(t, "tiresias:preset=pollux"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := sim.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true, Seed: 1}
		out, err := sim.Run(cfg, jobs)
		if eager {
			out, err = sim.RunEager(cfg, jobs)
		}
		if err != nil {
			t.Fatal(err)
		}
		if eager && out.Jobs[0].GPUSeconds == 15*500 {
			t.Fatal("the fractions added up exactly: the test does not tell the two sums apart")
		}
		var b strings.Builder
		writeRun(&b, out)
		return b.String()
	}
	if lazy, eager := run(false), run(true); lazy != eager {
		t.Fatalf("lazily:\n%s\nround by round:\n%s", lazy, eager)
	}
}
