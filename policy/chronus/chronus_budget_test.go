package chronus

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/solver/solvertest"
)

// stallLease is a lease problem Chronus met with its default knobs
// (horizon 30, gap 0.01, objective adaptive with unadmitted jobs, so
// now = -1) on a random trace of sim/reasons_harvest_test.go's kind (seed
// 1): four jobs due by the horizon on 16 GPUs. All four fit (the two 8-GPU
// jobs share 3 blocks, the other two take the 27 others), but the blocks
// are interchangeable and GLPK's branch-and-cut, without the node budget,
// ran for minutes on it without ending.
func stallLease() ([]leaseJob, []int) {
	jobs := []leaseJob{
		{Gpus: 1, Need: 28, Options: opts(30, 10)},
		{Gpus: 2, Need: 26, Options: opts(30, 10)},
		{Gpus: 8, Need: 17, Options: opts(30, 10)},
		{Gpus: 8, Need: 16, Options: opts(30, 10)},
	}
	capacity := make([]int, 30)
	for t := range capacity {
		capacity[t] = 16
	}
	return jobs, capacity
}

// checkLeasePlan fails unless p keeps every block within capacity, gives
// every job with an option exactly its needed blocks before that option's
// deadline (and a job without one none), and its Value is the sum of the
// chosen options' values.
func checkLeasePlan(t *testing.T, jobs []leaseJob, capacity []int, p *leasePlan) {
	t.Helper()
	used := make([]int, len(capacity))
	value := 0.0
	for i, j := range jobs {
		got := blocksOf(p, i)
		if p.Option[i] < 0 {
			if len(got) != 0 {
				t.Fatalf("job %d has blocks %v and no option", i, got)
			}
			continue
		}
		if len(got) != j.Need || got[len(got)-1] >= j.Options[p.Option[i]].Blocks {
			t.Fatalf("job %d blocks %v for need %d by %d", i, got, j.Need, j.Options[p.Option[i]].Blocks)
		}
		for _, b := range got {
			used[b] += j.Gpus
		}
		value += j.Options[p.Option[i]].Value
	}
	for b := range used {
		if used[b] > capacity[b] {
			t.Fatalf("block %d uses %d of %d", b, used[b], capacity[b])
		}
	}
	if value != p.Value {
		t.Fatalf("plan value %v, its options sum to %v", p.Value, value)
	}
}

// TestLeaseMILPBudgetStops: the lease problem that stalled GLPK ends within
// Chronus' node budget with a feasible plan at least as good as the greedy
// packing, reported with errLeaseBudget; a smaller budget stops it the same
// way on every run.
func TestLeaseMILPBudgetStops(t *testing.T) {
	solvertest.Require(t)
	jobs, capacity := stallLease()
	p, err := solveLeaseMILP(jobs, capacity, -1, 0.01)
	if !errors.Is(err, errLeaseBudget) || p == nil {
		t.Fatalf("plan %v, error %v; want a plan stopped by the node budget", p, err)
	}
	checkLeasePlan(t, jobs, capacity, p)
	if g, _ := packLeases(jobs, capacity); g.Value > p.Value {
		t.Fatalf("greedy %v beats the budgeted MILP %v", g.Value, p.Value)
	}
	var first *leasePlan
	for run := range 2 {
		p, err := solveLeaseMILPNodes(jobs, capacity, -1, 0.01, 2000)
		if !errors.Is(err, errLeaseBudget) || p == nil {
			t.Fatalf("run %d, 2,000 nodes: plan %v, error %v; want a plan stopped by the node budget", run, p, err)
		}
		checkLeasePlan(t, jobs, capacity, p)
		if first == nil {
			first = p
			continue
		}
		if !slices.Equal(first.Option, p.Option) || fmt.Sprint(first.Blocks) != fmt.Sprint(p.Blocks) {
			t.Fatalf("two runs differ: %v %v and %v %v", first.Option, first.Blocks, p.Option, p.Blocks)
		}
	}
}

// budgetMILP stands for a lease MILP stopped by its budget: the greedy plan,
// returned with errLeaseBudget.
func budgetMILP(jobs []leaseJob, capacity []int, _ leaseNowWeight, _ float64) (*leasePlan, error) {
	p, _ := packLeases(jobs, capacity)
	return p, fmt.Errorf("forced failure: %w", errLeaseBudget)
}

// TestChronusBudgetReported: a lease MILP stopped by its node budget is
// reported as such in the run's report (not as a failed MILP).
func TestChronusBudgetReported(t *testing.T) {
	solvertest.Require(t)
	fam.Fallbacks(t, []policytest.FallbackCase{
		{Spec: "chronus", Force: func(p engine.Policy) { p.(*Chronus).milp = budgetMILP }, Want: "lease MILP stopped at its node budget ("},
	})
}
