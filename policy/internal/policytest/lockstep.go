package policytest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
)

// FullOnly hides a policy's engine.IncrementalPolicy: the engine hands it
// no Changed, so it plans every round in full.
type FullOnly struct{ engine.Policy }

// Load shapes the random load Lockstep drives.
type Load struct {
	Seeds   int  // runs, each on its own cluster and load
	Steps   int  // rounds per run
	Burst   int  // most jobs arriving at one instant in a burst
	Elastic bool // some jobs accept a range of GPU counts
	Faults  bool // nodes go down and come back; waiting jobs are adopted
}

// Lockstep drives two engines in lockstep through random loads: quiet
// stretches in which every job fits, bursts that overfill the cluster
// (several jobs arriving at one instant among them), jobs that run their
// time and end, waiting jobs that fail, jobs with deadlines. One engine
// runs a policy as build makes it (planning from what changed where it
// can, engine.IncrementalPolicy), the other the same policy behind
// FullOnly, planning every round in full. Every job's progress is
// reported before each round, as an executor would. Every round's
// changes (kind, job and GPUs), and every active job's GPUs, memo and
// reason (predicted start and queue position included) must be the same,
// read through the engine (Status.Reason, worked out when read where a
// policy leaves reasons to an engine.Explainer), and so must every job's
// wait reason (Status.WaitReason: what the simulator records), while it
// is active and as it ends.
// kept says how many rounds a policy planned from what changed; both
// kinds of round must have been run.
func Lockstep(t *testing.T, build func(seed int) engine.Policy, kept func(engine.Policy) int, load Load) {
	t.Helper()
	lockstep(t, build, kept, load, func(p engine.Policy) engine.Policy { return FullOnly{p} })
}

// OnDemandMatches is Lockstep with the other engine running the same
// policy with its engine.JobsOnDemand hidden (enginetest.NotOnDemand): one
// engine hands the policy the active jobs only when it asks for them, and
// jobs that end leave its list lazily; the other hands it Snapshot.Jobs
// every round. Both plan the same rounds from what changed, and every
// round's changes, GPUs, memos and reasons must be the same. The policy
// must read the jobs on demand, and both kinds of round must be run.
func OnDemandMatches(t *testing.T, build func(seed int) engine.Policy, kept func(engine.Policy) int, load Load) {
	t.Helper()
	if p := build(0); !enginetest.OnDemand(p) {
		t.Fatalf("policy %s does not read the active jobs on demand (engine.JobsOnDemand)", p.Name())
	}
	lockstep(t, build, kept, load, func(p engine.Policy) engine.Policy { return enginetest.NotOnDemand{Policy: p} })
}

// lockstep is Lockstep against the policy as other wraps it: behind
// FullOnly it plans no round from what changed; otherwise as many as the
// policy itself.
func lockstep(t *testing.T, build func(seed int) engine.Policy, kept func(engine.Policy) int, load Load, other func(engine.Policy) engine.Policy) {
	t.Helper()
	if load.Seeds == 0 {
		load.Seeds = 6
	}
	if load.Steps == 0 {
		load.Steps = 600
	}
	if load.Burst == 0 {
		load.Burst = 5
	}
	nKept, rounds := 0, 0
	for seed := range load.Seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x19))
		nodes := 3 + rng.IntN(4)
		c := enginetest.Cluster(fmt.Sprintf("%dx4:v100", nodes))
		fast, slow := build(seed), build(seed)
		clk := &Clock{}
		mk := func(p engine.Policy) *engine.Engine {
			e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		wrapped := other(slow)
		_, full := wrapped.(FullOnly)
		a, b := mk(fast), mk(wrapped)
		n := 0
		var down []cluster.GPUID
		for step := range load.Steps {
			dt := float64(rng.IntN(90))
			clk.T += dt
			// Quiet stretches (everything fits) and bursts (it does not).
			burst := step%150 > 110
			arrive := 0
			if rng.IntN(3) == 0 {
				arrive = 1
			}
			if burst {
				arrive = rng.IntN(load.Burst)
			}
			for range arrive {
				g := 1 << rng.IntN(3)
				if rng.IntN(8) == 0 {
					g = 8
				}
				g = min(g, 4*nodes)
				dur := float64(20 + rng.IntN(200))
				if rng.IntN(6) == 0 {
					dur *= 10
				}
				jb := enginetest.Job(fmt.Sprintf("j%04d", n)).At(clk.T).GPUs(g).Seconds(dur)
				if load.Elastic && rng.IntN(4) == 0 {
					jb = jb.Elastic(max(1, g/2), g, min(2*g, 4*nodes))
				}
				j := jb.Obj()
				if rng.IntN(3) == 0 {
					j.Deadline = clk.T + float64(rng.IntN(4000))
				}
				n++
				for _, e := range []*engine.Engine{a, b} {
					if _, err := e.Submit(j); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Running jobs report their progress (seconds of work, at
			// one a second on the GPUs asked for, fewer on fewer);
			// those done finish, and now and then a waiting one fails.
			var end []string
			for i, st := range a.Active() {
				o := b.Active()[i]
				if len(st.GPUs) > 0 {
					p := st.Progress + dt*float64(len(st.GPUs))/float64(st.Job.GPUs)
					a.ReportStatus(st, p)
					b.ReportStatus(o, p)
				}
				if st.Progress >= st.Work || (len(st.GPUs) == 0 && rng.IntN(200) == 0) {
					end = append(end, st.Job.ID)
				}
			}
			for _, id := range end {
				for _, e := range []*engine.Engine{a, b} {
					if err := e.Finish(id); err != nil {
						t.Fatal(err)
					}
				}
				if d := ReasonsDiffer(a.Job(id), b.Job(id)); d != "" {
					t.Fatalf("seed %d round %d: ended job %s: %s", seed, step, id, d)
				}
			}
			// Now and then a node goes down for a while (its jobs are
			// preempted and the rounds meanwhile are full), or a waiting
			// job is adopted onto free GPUs outside a round (as a live
			// executor does after a restart).
			if load.Faults {
				faults(t, rng, c, a, b, &down)
			}
			ca, err := a.Schedule()
			if err != nil {
				t.Fatal(err)
			}
			cb, err := b.Schedule()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := Changes(ca), Changes(cb); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d round %d at %v: changes\n kept %v\n full %v", seed, step, clk.T, got, want)
			}
			aa, ba := a.Active(), b.Active()
			if len(aa) != len(ba) {
				t.Fatalf("seed %d round %d: %d active, full %d", seed, step, len(aa), len(ba))
			}
			for i, st := range aa {
				o := ba[i]
				if st.Job.ID != o.Job.ID || st.Memo != o.Memo || st.Reason() != o.Reason() || !slices.Equal(st.GPUs, o.GPUs) {
					t.Fatalf("seed %d round %d: job %s memo %v reason %+v GPUs %v; full: %s %v %+v %v",
						seed, step, st.Job.ID, st.Memo, st.Reason(), st.GPUs, o.Job.ID, o.Memo, o.Reason(), o.GPUs)
				}
				if d := ReasonsDiffer(st, o); d != "" {
					t.Fatalf("seed %d round %d: job %s: %s", seed, step, st.Job.ID, d)
				}
			}
			rounds++
		}
		nKept += kept(fast)
		if k := kept(slow); full && k != 0 {
			t.Fatalf("the wrapped policy planned %d rounds from what changed", k)
		} else if !full && k != kept(fast) {
			t.Fatalf("the wrapped policy planned %d rounds from what changed, the policy %d", k, kept(fast))
		}
	}
	t.Logf("%d of %d rounds planned from what changed", nKept, rounds)
	if nKept == 0 || nKept == rounds {
		t.Fatalf("%d of %d rounds planned from what changed: the loads do not exercise both kinds of round", nKept, rounds)
	}
}

// ReasonsDiffer says how the reasons of the same job in two engines
// differ (Status.Reason, Status.WaitReason), "" when they do not.
func ReasonsDiffer(st, o *engine.Status) string {
	if r, w := st.Reason(), o.Reason(); r != w {
		return fmt.Sprintf("reason %+v, full %+v", r, w)
	}
	if r, w := st.WaitReason(), o.WaitReason(); r != w {
		return fmt.Sprintf("wait reason %+v, full %+v", r, w)
	}
	return ""
}

// Change is what Lockstep (and the tests that drive engines in lockstep
// themselves) compare of an engine.Change: its kind, job and GPUs.
type Change struct {
	Kind engine.ChangeKind
	Job  string
	To   []cluster.GPUID
}

// Changes is cs as Change values, for reflect.DeepEqual.
func Changes(cs []engine.Change) []Change {
	out := []Change{}
	for _, c := range cs {
		out = append(out, Change{c.Kind, c.Status.Job.ID, c.To})
	}
	return out
}

// faults brings the GPUs down back up, or takes a random node down, or
// adopts a waiting job onto free GPUs, in both engines, now and then.
func faults(t *testing.T, rng *rand.Rand, c *cluster.Cluster, a, b *engine.Engine, down *[]cluster.GPUID) {
	t.Helper()
	both := func(f func(e *engine.Engine) error) {
		for _, e := range []*engine.Engine{a, b} {
			if err := f(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	switch r := rng.IntN(40); {
	case r == 0 && *down == nil:
		node := rng.IntN(len(c.Nodes))
		for g := range cluster.GPUID(c.TotalGPUs()) {
			if c.NodeOf(g).ID == node {
				*down = append(*down, g)
			}
		}
		both(func(e *engine.Engine) error { _, err := e.SetDown(*down, true); return err })
	case r < 4 && *down != nil:
		both(func(e *engine.Engine) error { _, err := e.SetDown(*down, false); return err })
		*down = nil
	case r == 5:
		// The first waiting job, onto the first free GPUs it asks for.
		for _, st := range a.Active() {
			if len(st.GPUs) > 0 || st.Job.Fractional() {
				continue
			}
			var free []cluster.GPUID
			for g := range cluster.GPUID(c.TotalGPUs()) {
				if a.Holder(g) == nil && !a.IsDown(g) && len(free) < st.Job.GPUs {
					free = append(free, g)
				}
			}
			if len(free) == st.Job.GPUs {
				both(func(e *engine.Engine) error { return e.Adopt(st.Job.ID, free) })
			}
			break
		}
	}
}

// KeptMatchesFull runs Lockstep for each spec, as a subtest: the policy
// as f parses it against the same made to plan every round in full. The
// policy reports its rounds planned from what changed with KeptRounds.
func (f Builder) KeptMatchesFull(t *testing.T, load Load, specs ...string) {
	t.Helper()
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			Lockstep(t, func(int) engine.Policy { return f.Parse(t, spec, contract.Context{}) }, keptRounds, load)
		})
	}
}

// OnDemandMatchesPlain runs OnDemandMatches for each spec, as a subtest:
// the policy as f parses it, reading the active jobs on demand, against
// the same reading Snapshot.Jobs. The policy reports its rounds planned
// from what changed with KeptRounds.
func (f Builder) OnDemandMatchesPlain(t *testing.T, load Load, specs ...string) {
	t.Helper()
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			OnDemandMatches(t, func(int) engine.Policy { return f.Parse(t, spec, contract.Context{}) }, keptRounds, load)
		})
	}
}

// keptRounds is a policy's KeptRounds.
func keptRounds(p engine.Policy) int { return p.(interface{ KeptRounds() int }).KeptRounds() }
