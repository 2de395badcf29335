package alloc

import (
	"sort"

	"github.com/tide-sched/tide/engine"
)

// ByTenant groups jobs by tenant, keeping the snapshot's (submission) order
// inside each group, and returns the tenants sorted by name.
func ByTenant(jobs []*engine.Status) (tenants []string, groups map[string][]*engine.Status) {
	groups = map[string][]*engine.Status{}
	for _, st := range jobs {
		t := st.Job.Tenant
		if _, ok := groups[t]; !ok {
			tenants = append(tenants, t)
		}
		groups[t] = append(groups[t], st)
	}
	sort.Strings(tenants)
	return tenants, groups
}
