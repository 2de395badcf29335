package fair

import (
	"slices"

	"github.com/tide-sched/tide/engine"
)

// tenantGroups groups a round's jobs by tenant as alloc.ByTenant does
// (the tenants sorted by name, each group in the snapshot's order), in
// memory kept from round to round: once it has seen a round's tenants,
// grouping the next round allocates nothing (issue 19: steady rounds
// allocate nothing). Each group carries V, a policy's per-tenant scratch,
// which Group hands back as the policy left it (the policy resets what it
// must). The zero value is ready.
type tenantGroups[V any] struct {
	index  map[string]int // tenant -> its group in groups
	groups []tenantGroup[V]
	sorted []*tenantGroup[V] // this round's tenants (those with jobs), by name
}

// tenantGroup is one tenant's jobs of the round and the policy's scratch.
type tenantGroup[V any] struct {
	name string
	jobs []*engine.Status
	v    V
}

// Group groups jobs by tenant and returns the round's tenants that have
// jobs, sorted by name: valid until the next Group.
func (g *tenantGroups[V]) Group(jobs []*engine.Status) []*tenantGroup[V] {
	for i := range g.groups {
		clear(g.groups[i].jobs) // let ended jobs go
		g.groups[i].jobs = g.groups[i].jobs[:0]
	}
	if g.index == nil {
		g.index = map[string]int{}
	}
	for _, st := range jobs {
		t := st.Job.Tenant
		i, ok := g.index[t]
		if !ok {
			i = len(g.groups)
			g.index[t] = i
			g.groups = append(g.groups, tenantGroup[V]{name: t})
		}
		g.groups[i].jobs = append(g.groups[i].jobs, st)
	}
	// Tenants gone for good would otherwise be kept (and walked) forever:
	// drop those without jobs once they outnumber the others.
	active := 0
	for i := range g.groups {
		if len(g.groups[i].jobs) > 0 {
			active++
		}
	}
	if len(g.groups) > 2*active+8 {
		kept := g.groups[:0]
		for _, gr := range g.groups {
			if len(gr.jobs) > 0 {
				kept = append(kept, gr)
			} else {
				delete(g.index, gr.name)
			}
		}
		clear(g.groups[len(kept):])
		g.groups = kept
		for i := range g.groups {
			g.index[g.groups[i].name] = i
		}
	}
	clear(g.sorted)
	g.sorted = g.sorted[:0]
	for i := range g.groups {
		if len(g.groups[i].jobs) > 0 {
			g.sorted = append(g.sorted, &g.groups[i])
		}
	}
	slices.SortFunc(g.sorted, func(a, b *tenantGroup[V]) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return g.sorted
}

// empty deletes m's keys one by one. clear(m) empties it too but draws a
// new hash seed, under which a large map refilled with the same keys may
// split its tables again, allocating (as explain's maps found): a map
// emptied and refilled every round is emptied so instead.
func empty[K comparable, V any](m map[K]V) {
	for k := range m {
		delete(m, k)
	}
}

// Of is tenant t's group of the round, nil when t has no jobs in it.
func (g *tenantGroups[V]) Of(t string) *tenantGroup[V] {
	i, ok := g.index[t]
	if !ok || len(g.groups[i].jobs) == 0 {
		return nil
	}
	return &g.groups[i]
}
