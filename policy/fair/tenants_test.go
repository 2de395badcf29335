package fair

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/internal/alloc"
)

// TestTenantGroupsMatchByTenant checks tenantGroups against
// alloc.ByTenant over rounds whose tenants come and go (enough of them
// gone for the kept groups to be compacted): the same tenants in the same
// order, each with the same jobs in the same order; Of finds each, and
// none for a tenant without jobs; a round like the last one allocates
// nothing.
func TestTenantGroupsMatchByTenant(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	var g tenantGroups[int]
	for round := 0; round < 60; round++ {
		// Tenants of this round: names drawn from a range that moves, so
		// that old tenants leave for good.
		n := rng.IntN(40)
		jobs := make([]*engine.Status, n)
		for i := range jobs {
			tenant := fmt.Sprintf("t%02d", round/3+rng.IntN(12))
			if rng.IntN(8) == 0 {
				tenant = ""
			}
			jobs[i] = &engine.Status{Job: &job.Job{ID: fmt.Sprintf("j%d-%d", round, i), Tenant: tenant}}
		}
		names, groups := alloc.ByTenant(jobs)
		got := g.Group(jobs)
		if len(got) != len(names) {
			t.Fatalf("round %d: %d tenants, want %d", round, len(got), len(names))
		}
		for i, u := range names {
			if got[i].name != u || !slices.Equal(got[i].jobs, groups[u]) {
				t.Fatalf("round %d: tenant %d is %q with %d jobs, want %q with %d", round, i, got[i].name, len(got[i].jobs), u, len(groups[u]))
			}
			if g.Of(u) != got[i] {
				t.Fatalf("round %d: Of(%q) is not its group", round, u)
			}
		}
		if g.Of("nobody") != nil {
			t.Fatalf("round %d: a group for a tenant without jobs", round)
		}
		if len(g.groups) > 2*len(names)+8 {
			t.Fatalf("round %d: %d groups kept for %d tenants", round, len(g.groups), len(names))
		}
		if allocs := testing.AllocsPerRun(3, func() { g.Group(jobs) }); allocs != 0 {
			t.Fatalf("round %d: grouping the same jobs again allocates %v times", round, allocs)
		}
	}
}
