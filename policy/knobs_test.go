package policy

import (
	"slices"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/solver"
)

// TestKnobsDocumented: the knobs a policy reads with its defaults are the
// knobs it declares (Info.KnobList), so `tide policies NAME` and the
// unknown-knob error name exactly what the policy takes. It found
// undeclared knobs in fifo-perf, gavel-fifo, pollux and tidal.
func TestKnobsDocumented(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{{ID: "a", GPUs: 1, Duration: 100, Work: 100, Unit: job.Seconds}}}
	for _, i := range All() {
		if i.NeedsSolver && solver.Available() != nil {
			continue
		}
		opts := contract.NewOptions(i.Name, map[string]string{})
		if _, err := i.Build(ctx, opts); err != nil {
			t.Errorf("%s with its defaults: %v", i.Name, err)
			continue
		}
		read := opts.Read()
		var doc []string
		for _, k := range i.KnobList() {
			doc = append(doc, k.Key)
		}
		for _, k := range read {
			if !slices.Contains(doc, k) {
				t.Errorf("%s reads knob %s, which its Knobs do not declare (%q)", i.Name, k, i.Knobs)
			}
		}
		for _, k := range doc {
			if !slices.Contains(read, k) {
				t.Errorf("%s declares knob %s, which it does not read with its defaults", i.Name, k)
			}
		}
	}
}
