package policy

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
)

// TestQuotaReasonFreeCount: when the quota holds back a job the policy
// ran, the waiting jobs' reasons say how many GPUs are free after quotas
// and mark the policy's own count (made with that job running) as the
// policy's plan; when the quota changes nothing, the policy's reason is
// kept as it was.
func TestQuotaReasonFreeCount(t *testing.T) {
	c := enginetest.Cluster("1x4:t4")
	mk := tenantJob
	snap := &engine.Snapshot{Cluster: c, Jobs: []*engine.Status{mk("x", "b", 3, 0), mk("y", "a", 4, 1)}}
	for _, spec := range []string{"fifo", "tiresias"} {
		in, err := Parse(spec, Context{})
		if err != nil {
			t.Fatal(err)
		}
		alone := in.Schedule(snap).Reasons["y"].Text
		if !strings.Contains(alone, "1 free") {
			t.Fatalf("%s alone: y's reason %q, want the policy's count of 1 free GPU", spec, alone)
		}
		// b may use no GPU: x is held back and all 4 GPUs stay free.
		q := &Quota{Inner: in, Limits: map[string]int{"a": 2, "b": 0}}
		p := q.Schedule(snap)
		if len(p.Run) != 0 {
			t.Fatalf("%s: plan runs %s, want nothing", spec, ids(p))
		}
		got := p.Reasons["y"].Text
		before, after, ok := strings.Cut(got, "after quotas:")
		if !ok || !strings.Contains(after, "4 GPUs free") || !strings.Contains(before, "policy's plan") || !strings.Contains(before, alone) {
			t.Errorf("%s: y's reason %q, want the policy's reason %q marked as its plan, then 4 GPUs free after quotas", spec, got, alone)
		}
		// A quota that changes nothing keeps the policy's reason first,
		// unmarked.
		q = &Quota{Inner: in, Limits: map[string]int{"a": 2, "b": 4}}
		p = q.Schedule(snap)
		if got := p.Reasons["y"].Text; !strings.HasPrefix(got, alone) || strings.Contains(got, "policy's plan") {
			t.Errorf("%s, quota changing nothing: y's reason %q, want it to begin with %q", spec, got, alone)
		}
	}
}
