package contract_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// LIFO runs the newest jobs first: the worked example of
// docs/policy-contract.md ("Adding a policy"). Its tagged fields are its
// knobs.
type LIFO struct {
	// Backfill lets older jobs start past a newer one that does not fit.
	Backfill bool `knob:"backfill"`
}

// Name implements engine.Policy.
func (l *LIFO) Name() string { return "lifo" }

// Schedule implements engine.Policy: the order is newest first, the plan
// the shared greedy pass over it, and every job left out gets a reason in
// the policy's terms with its place in the order.
func (l *LIFO) Schedule(s *engine.Snapshot) engine.Plan {
	order := alloc.SortJobs(s.Jobs, func(a, b *engine.Status) int {
		return -cmp.Compare(a.Job.Submit, b.Job.Submit)
	})
	plan := alloc.Greedy(s, order, !l.Backfill)
	explain.Plan(s, &plan, order, func(st *engine.Status) string {
		return fmt.Sprintf("submitted at %g s", st.Job.Submit)
	})
	return plan
}

// Policies registers the family's policies; a family package exports this
// and policy/registry.go lists it in families.
func Policies(register func(contract.Info)) {
	register(contract.Info{
		Name:     "lifo",
		Summary:  "last come, first served",
		Knobs:    "backfill=false: let older jobs start past a newer one that does not fit",
		Defaults: LIFO{},
		Build:    contract.Typed(LIFO{}, func(_ contract.Context, k LIFO) (*LIFO, error) { return &k, nil }),
	})
}

// Example builds the LIFO policy from a spec, as the registry does
// (policy.Parse), refuses a misspelt knob, and plans three waiting jobs on
// 4 GPUs: j0 (1 GPU, submitted at 0 s), j1 (4 GPUs, 10 s), j2 (2 GPUs,
// 20 s). Newest first, j2 takes 2 GPUs; j1 does not fit in the 2 left and
// waits, first in line, behind the running j2; with backfill, j0 takes 1.
func Example() {
	var info contract.Info
	Policies(func(i contract.Info) { info = i })
	name, knobs, err := contract.Split("lifo:backfill=true")
	if err != nil || name != info.Name {
		panic(fmt.Sprint(name, err))
	}
	p, err := info.New(contract.Context{}, knobs)
	if err != nil {
		panic(err)
	}
	if _, err := info.New(contract.Context{}, map[string]string{"backfil": "true"}); err != nil {
		fmt.Println(err)
	}
	s := &engine.Snapshot{Now: 100, Cluster: enginetest.Cluster("1x4:t4"), Model: perf.Duration{}, GPUsPerNode: map[string]int{"t4": 4}}
	for i, gpus := range []int{1, 4, 2} {
		j := enginetest.Job(fmt.Sprint("j", i)).At(float64(10 * i)).GPUs(gpus).Seconds(60).Obj()
		s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: j.Work, FirstStart: -1, LastStart: -1, Finish: -1})
	}
	plan := p.Schedule(s)
	for _, a := range plan.Run {
		fmt.Printf("run %s on %d GPUs\n", a.Job, a.GPUs)
	}
	for _, id := range slices.Sorted(maps.Keys(plan.Reasons)) {
		fmt.Printf("%s: %s (position %d)\n", id, plan.Reasons[id].Text, plan.Reasons[id].Position)
	}
	// Output:
	// policy lifo: unknown option(s) backfil: it takes backfill=false, and priority=off|strict|preempt as every policy does ('tide policies lifo' explains them)
	// run j2 on 2 GPUs
	// run j0 on 1 GPUs
	// j1: waits; submitted at 10 s; 1 running and 0 waiting job(s) ahead; needs 4 GPUs, 1 free (position 1)
}
