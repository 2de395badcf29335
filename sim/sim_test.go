package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// runSim replays jobs on a shorthand cluster under a policy spec with the
// duration model, scheduling every 60 s and at every event.
func runSim(t *testing.T, cluster, spec string, costs perf.Costs, jobs ...*job.Job) *report.Run {
	t.Helper()
	p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	run, err := sim.Run(sim.Config{
		Cluster:  enginetest.Cluster(cluster),
		Model:    perf.Duration{Cost: perf.CostTable{Default: costs}},
		Policy:   p,
		Placer:   place.Pack{},
		Round:    60,
		OnEvents: true,
	}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestGolden replays tiny traces whose completion times are worked out by
// hand below. Times are seconds; "a 2x100" is a job on 2 GPUs that runs
// 100 s on them.
func TestGolden(t *testing.T) {
	J := enginetest.Job
	tests := []struct {
		name    string
		cluster string
		policy  string
		costs   perf.Costs
		jobs    []*job.Job
		jct     map[string]float64 // finish - submit
		preempt map[string]int
	}{
		{
			// One node of 4 GPUs. a (2x100 at 0) starts at once. b (4x50
			// at 10) does not fit beside a; FIFO without backfill blocks c
			// (2x30 at 20) behind it although 2 GPUs are free. a ends at
			// 100, b runs 100-150, c 150-180.
			// JCTs: a 100-0 = 100, b 150-10 = 140, c 180-20 = 160.
			name: "fifo blocks at the head", cluster: "1x4:t4", policy: "fifo",
			jobs: []*job.Job{J("a").GPUs(2).Seconds(100).Obj(), J("b").At(10).GPUs(4).Seconds(50).Obj(),
				J("c").At(20).GPUs(2).Seconds(30).Obj()},
			jct: map[string]float64{"a": 100, "b": 140, "c": 160},
		},
		{
			// The same trace with backfill: c takes the 2 free GPUs at 20
			// and ends at 50; b still starts when a ends at 100.
			// JCTs: a 100, b 150-10 = 140, c 50-20 = 30.
			name: "fifo backfills", cluster: "1x4:t4", policy: "fifo:backfill=true",
			jobs: []*job.Job{J("a").GPUs(2).Seconds(100).Obj(), J("b").At(10).GPUs(4).Seconds(50).Obj(),
				J("c").At(20).GPUs(2).Seconds(30).Obj()},
			jct: map[string]float64{"a": 100, "b": 140, "c": 30},
		},
		{
			// SRTF with a 10 s restart cost and free first starts. a (4x100
			// at 0) has 70 s left when b (4x20) arrives at 30, so b
			// preempts it and runs 30-50. a restarts at 50, pays 10 s, and
			// needs its remaining 70 s: it ends at 130.
			// JCTs: a 130, b 20. One preemption for a.
			name: "srtf preempts the longer job", cluster: "1x4:t4", policy: "srtf",
			costs: perf.Costs{Restart: 10, Resize: 10},
			jobs:  []*job.Job{J("a").GPUs(4).Seconds(100).Obj(), J("b").At(30).GPUs(4).Seconds(20).Obj()},
			jct:   map[string]float64{"a": 130, "b": 20}, preempt: map[string]int{"a": 1},
		},
		{
			// EDF on 1 GPU, free restarts. a (1x50, no deadline) runs from 0.
			// At 10, b (1x40, deadline 500) and c (1x30, deadline 100)
			// arrive; a job without a deadline goes last, so c preempts a
			// and runs 10-40, then b 40-80, then a resumes with 40 s left,
			// 80-120.
			// JCTs: a 120, b 80-10 = 70, c 40-10 = 30.
			name: "edf orders by deadline", cluster: "1x1:t4", policy: "edf",
			jobs: []*job.Job{J("a").Seconds(50).Obj(), J("b").At(10).Seconds(40).Deadline(500).Obj(),
				J("c").At(10).Seconds(30).Deadline(100).Obj()},
			jct: map[string]float64{"a": 120, "b": 70, "c": 30}, preempt: map[string]int{"a": 1},
		},
		{
			// Tiresias with one limit of 100 GPU-s on 1 GPU, free restarts.
			// a (1x300 at 0) runs; b (1x50 at 10) is in Q0 too but entered
			// later, so it waits. Demotion is seen at rounds (every 60 s
			// and at events): at 60, a has 60 GPU-s (Q0); at 120 it has
			// 120 >= 100 and drops to Q1, so b (Q0) preempts it and runs
			// 120-170. a resumes at 170 with 300-120 = 180 s left: ends 350.
			// JCTs: a 350, b 170-10 = 160.
			name: "tiresias demotes past the limit", cluster: "1x1:t4", policy: "tiresias:limits=100",
			jobs: []*job.Job{J("a").Seconds(300).Obj(), J("b").At(10).Seconds(50).Obj()},
			jct:  map[string]float64{"a": 350, "b": 160}, preempt: map[string]int{"a": 1},
		},
		{
			// Elastic-free linear scaling on a 2-node cluster: a 4-GPU job
			// spans both 2-GPU nodes and still runs its 100 s (the
			// duration model ignores placement). The start cost of 5 s is
			// paid once: JCT 105.
			name: "start cost across nodes", cluster: "2x2:t4", policy: "fifo",
			costs: perf.Costs{Start: 5},
			jobs:  []*job.Job{J("a").GPUs(4).Seconds(100).Obj()},
			jct:   map[string]float64{"a": 105},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runSim(t, tc.cluster, tc.policy, tc.costs, tc.jobs...)
			for _, r := range run.Jobs {
				want, ok := tc.jct[r.ID]
				if !ok {
					t.Fatalf("job %s not in the expectations", r.ID)
				}
				if got := r.Finish - r.Submit; math.Abs(got-want) > 1e-6 {
					t.Errorf("job %s: JCT %v, want %v (start %v, finish %v)", r.ID, got, want, r.Start, r.Finish)
				}
				if r.State != string(job.Finished) {
					t.Errorf("job %s: state %s, want finished", r.ID, r.State)
				}
				if got := r.Preemptions; got != tc.preempt[r.ID] {
					t.Errorf("job %s: %d preemptions, want %d", r.ID, got, tc.preempt[r.ID])
				}
			}
		})
	}
}

// randomTrace builds n rigid or elastic duration jobs that each fit a
// cluster with at most maxGPUs GPUs of one type.
func randomTrace(rng *rand.Rand, n, maxGPUs int) []*job.Job {
	var jobs []*job.Job
	at := 0.0
	for i := range n {
		at += float64(rng.IntN(120))
		g := 1 << rng.IntN(4)
		g = min(g, maxGPUs)
		b := enginetest.Job(fmt.Sprintf("j%03d", i)).At(at).GPUs(g).Seconds(float64(30 + rng.IntN(3000)))
		if rng.IntN(4) == 0 {
			b = b.Deadline(at + float64(rng.IntN(6000)))
		}
		if rng.IntN(5) == 0 {
			b = b.Tenant("t2")
		}
		jobs = append(jobs, b.Obj())
	}
	return jobs
}

// TestInvariants replays random traces under every baseline policy and
// checks what must hold whatever the policy decides:
//   - every job finishes, after it was submitted and started;
//   - work is conserved: a duration job makes progress 1/GPUs per useful
//     GPU-second, so its useful GPU-seconds equal Duration x GPUs, neither
//     more (work invented) nor less (work lost);
//   - no job beats its no-contention lower bound;
//   - the GPUs held never exceed the cluster, and useful ones never exceed
//     those held;
//   - restart time is at most the start cost plus one restart cost per
//     restart;
//   - the total time waiting (WaitSeconds) is at least the wait before the
//     first start, equal to it for a job never preempted, and leaves the job
//     at least its Duration holding GPUs.
func TestInvariants(t *testing.T) {
	policies := []string{"fifo", "fifo:backfill=true", "srtf", "edf", "tiresias", "tiresias:limits=500/2000:knob=2", "tiresias-gittins"}
	clusters := []struct {
		spec string
		max  int
	}{{"1x4:t4", 4}, {"2x4:t4", 8}, {"3x2:t4", 6}, {"4x8:v100", 16}}
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 24 {
		c := clusters[trial%len(clusters)]
		spec := policies[trial%len(policies)]
		costs := perf.Costs{Start: float64(rng.IntN(20)), Restart: float64(rng.IntN(40)), Resize: 5}
		jobs := randomTrace(rng, 10+rng.IntN(40), c.max)
		t.Run(fmt.Sprintf("%d-%s-%s", trial, spec, c.spec), func(t *testing.T) {
			run := runSim(t, c.spec, spec, costs, jobs...)
			total := enginetest.Cluster(c.spec).TotalGPUs()
			for i, r := range run.Jobs {
				j := jobs[i]
				if r.State != string(job.Finished) || r.Finish < 0 {
					t.Fatalf("job %s: state %s, finish %v", r.ID, r.State, r.Finish)
				}
				if r.Start < r.Submit || r.Finish < r.Start {
					t.Errorf("job %s: submit %v, start %v, finish %v out of order", r.ID, r.Submit, r.Start, r.Finish)
				}
				want := j.Duration * float64(j.GPUs)
				if math.Abs(r.UsefulGPUSeconds-want) > 1e-6*want {
					t.Errorf("job %s: %v useful GPU-s, want Duration x GPUs = %v", r.ID, r.UsefulGPUSeconds, want)
				}
				if r.GPUSeconds < r.UsefulGPUSeconds-1e-6 {
					t.Errorf("job %s: %v GPU-s held < %v useful", r.ID, r.GPUSeconds, r.UsefulGPUSeconds)
				}
				if jct := r.Finish - r.Submit; jct < r.LowerBound-1e-6 {
					t.Errorf("job %s: JCT %v beats its lower bound %v", r.ID, jct, r.LowerBound)
				}
				first, jct := r.Start-r.Submit, r.Finish-r.Submit
				if r.WaitSeconds < first-1e-6 || jct-r.WaitSeconds < j.Duration-1e-6 {
					t.Errorf("job %s: waited %v s in all, %v before its first start; JCT %v, duration %v", r.ID, r.WaitSeconds, first, jct, j.Duration)
				}
				if r.Preemptions == 0 && math.Abs(r.WaitSeconds-first) > 1e-6 {
					t.Errorf("job %s: never preempted, waited %v s in all but %v before its first start", r.ID, r.WaitSeconds, first)
				}
				if maxCost := costs.Start + float64(r.Restarts)*math.Max(costs.Restart, costs.Resize); r.RestartSeconds > maxCost+1e-6 {
					t.Errorf("job %s: %v s restarting, at most %v expected", r.ID, r.RestartSeconds, maxCost)
				}
			}
			for _, s := range run.Timeline {
				if int(s.Allocated) > total || s.Useful > s.Allocated || s.Allocated < 0 || s.Useful < 0 {
					t.Fatalf("t=%v: %d GPUs held, %d useful, of %d", s.T, s.Allocated, s.Useful, total)
				}
			}
		})
	}
}

// TestDeterministic checks that a run is a pure function of its inputs: two
// replays of the same trace give the same report bytes.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	jobs := randomTrace(rng, 60, 8)
	var out [2][]byte
	for i := range out {
		run := runSim(t, "2x4:t4", "tiresias:limits=300/1200", perf.Costs{Start: 3, Restart: 17}, jobs...)
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(run); err != nil {
			t.Fatal(err)
		}
		out[i] = buf.Bytes()
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatal("two replays of the same inputs differ")
	}
}

// TestErrors checks that jobs the cluster or model cannot run are reported
// by name rather than skipped or left waiting forever.
func TestErrors(t *testing.T) {
	J := enginetest.Job
	tests := []struct {
		name string
		jobs []*job.Job
		want string
	}{
		{"duplicate id", []*job.Job{J("a").Obj(), J("a").At(5).Obj()}, "job a"},
		{"too big for the cluster", []*job.Job{J("big").GPUs(16).Seconds(10).Obj()}, "big"},
		{"unknown GPU type", []*job.Job{J("x").Type("h100").Obj()}, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse("fifo", policy.Context{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = sim.Run(sim.Config{Cluster: enginetest.Cluster("1x4:t4"), Model: perf.Duration{},
				Policy: p, Placer: place.Pack{}, OnEvents: true}, tc.jobs)
			if err == nil {
				t.Fatalf("no error, want one naming %q", tc.want)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// growAt is a test policy: it runs every job on its requested GPUs, and on
// all of its maximum from time t on.
type growAt float64

func (growAt) Name() string { return "grow" }
func (g growAt) Schedule(s *engine.Snapshot) engine.Plan {
	var p engine.Plan
	for _, st := range s.Jobs {
		n := st.Job.GPUs
		if s.Now >= float64(g) {
			n = st.Job.MaxGPUs
		}
		p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: n})
	}
	return p
}

// TestResizeCost: a resize costs the model's resize time and is counted.
// Job a (elastic 1..4, 200 s of work on its 2 requested GPUs) starts at its
// arrival (scheduling at events) and runs on 2 GPUs
// until the round at 120, when it grows to 4: progress 120 of 200, then 15 s
// of resize cost, then the remaining 80 s of 2-GPU work at twice the speed,
// 40 s: it finishes at 120 + 15 + 40 = 175.
func TestResizeCost(t *testing.T) {
	j := enginetest.Job("a").Elastic(1, 2, 4).Seconds(200).Obj()
	run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x4:t4"),
		Model:  perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 99, Resize: 15}}},
		Policy: growAt(120), Placer: place.Pack{}, Round: 60, OnEvents: true}, []*job.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	r := run.Jobs[0]
	if r.Finish != 175 || r.Resizes != 1 || r.RestartSeconds != 15 || r.Preemptions != 0 {
		t.Errorf("finish %v resizes %d restart seconds %v preemptions %d; want 175, 1, 15, 0",
			r.Finish, r.Resizes, r.RestartSeconds, r.Preemptions)
	}
}

// startAfter is a test policy that runs a job only once it has waited w
// seconds (as Pollux's restart factor is 0 for a job of age 0); w < 0
// never runs anything.
type startAfter float64

func (startAfter) Name() string { return "start-after" }
func (w startAfter) Schedule(s *engine.Snapshot) engine.Plan {
	var p engine.Plan
	for _, st := range s.Jobs {
		if w >= 0 && s.Now-st.Job.Submit >= float64(w) {
			p.Run = append(p.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs})
		}
	}
	return p
}

// TestWaitingOnIdleCluster: a policy may leave a lone job waiting on an idle
// cluster for a few rounds (it starts at the round at 60 s and ends at
// 160), but one that never starts it fails the run, naming the job, within
// a few rounds rather than running forever.
func TestWaitingOnIdleCluster(t *testing.T) {
	run := func(p engine.Policy) (*report.Run, error) {
		return sim.Run(sim.Config{Cluster: enginetest.Cluster("1x4:t4"), Model: perf.Duration{},
			Policy: p, Placer: place.Pack{}, OnEvents: true, Round: 60},
			[]*job.Job{enginetest.Job("lone").GPUs(1).Seconds(100).Obj()})
	}
	r, err := run(startAfter(30))
	if err != nil {
		t.Fatalf("a policy that starts the job at its second round: %v", err)
	}
	if got := r.Jobs[0].Finish; got != 160 {
		t.Errorf("lone finished at %v, want 160 (started by the round at 60)", got)
	}
	_, err = run(startAfter(-1))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("lone")) || !bytes.Contains([]byte(err.Error()), []byte("idle cluster")) {
		t.Errorf("a policy that never starts the job: error %v, want one naming lone on an idle cluster", err)
	}
}

// roundCounter passes rounds to a policy and fails the test when the
// simulator calls it again and again at one instant: time must advance.
type roundCounter struct {
	engine.Policy
	t      *testing.T
	last   float64
	repeat int
}

func (c *roundCounter) Schedule(s *engine.Snapshot) engine.Plan {
	if s.Now == c.last {
		if c.repeat++; c.repeat > 100 {
			c.t.Fatalf("%d rounds in a row at t=%v: the simulator does not advance", c.repeat, s.Now)
		}
	} else {
		c.last, c.repeat = s.Now, 0
	}
	return c.Policy.Schedule(s)
}

// TestFractionalRound: rounds of a length that is not a whole number of
// seconds fall on multiples of it, and the run ends. With 0.7 s rounds the
// round at 3 x 0.7 = 2.1 s computed 2.1/0.7 = 2.999... rounds done, and
// scheduled the next one at the same instant, forever.
func TestFractionalRound(t *testing.T) {
	for _, round := range []float64{0.7, 0.1, 7.3, 59.9} {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			p, err := policy.Parse("fifo", policy.Context{})
			if err != nil {
				t.Fatal(err)
			}
			jobs := []*job.Job{enginetest.Job("a").GPUs(1).Seconds(100).Obj(), enginetest.Job("b").GPUs(1).Seconds(50).At(1).Obj()}
			run, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x1:t4"), Model: perf.Duration{},
				Policy: &roundCounter{Policy: p, t: t, last: -1}, Placer: place.Pack{}, Round: round}, jobs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range run.Jobs {
				if r.Finish < 0 {
					t.Errorf("job %s did not finish", r.ID)
				}
			}
		})
	}
}
