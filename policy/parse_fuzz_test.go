package policy

import (
	"maps"
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

// FuzzParseQuotas checks that any --quota value either fails with an
// error naming the item, or parses into quotas that FormatQuotas writes
// back as ParseQuotas reads them, the same.
func FuzzParseQuotas(f *testing.F) {
	for _, s := range []string{"", "a=4,b=8", " a=4, b = 8 ,", "a=-1", "a=1,a=2", "=3", "a", "a=b=1", "a=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuotas(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "quota ") {
				t.Fatalf("ParseQuotas(%q): error %q does not begin with the item", s, err)
			}
			return
		}
		back, err := ParseQuotas(FormatQuotas(q))
		if err != nil || !maps.Equal(back, q) {
			t.Fatalf("ParseQuotas(%q) = %v; written as %q it reads %v, %v", s, q, FormatQuotas(q), back, err)
		}
	})
}
