package policy

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
)

// FuzzParse checks that any policy spec (what --policy and the scenario
// files' policies take) either builds a policy or fails with an error
// that names the policy or says it is unknown; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range Specs() {
		f.Add(s)
	}
	for _, s := range []string{"tidal:swap_batch=2:hold_busy=0.15", "tidal:forecast=oracle:wrong=shift:shift_h=6",
		"fifo:priority=strict", "tiresias:knob=1e308", "gavel:priority=preempt", "edgeflow:slot=-1", "tidal:quantile=2"} {
		f.Add(s)
	}
	ctx := Context{Jobs: []*job.Job{enginetest.Job("a").Seconds(100).Obj()}}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.Contains(spec, "/") || strings.Contains(spec, `\`) {
			return // knobs that name files (dist=FILE) would read the machine's
		}
		p, err := Parse(spec, ctx)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "policy ") && !strings.HasPrefix(msg, "unknown policy ") {
				t.Fatalf("Parse(%q): error %q names neither the policy nor an unknown one", spec, msg)
			}
			return
		}
		if p == nil || p.Name() == "" {
			t.Fatalf("Parse(%q) gave no policy, or one with no name", spec)
		}
	})
}
