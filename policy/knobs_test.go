package policy

import (
	"slices"
	"sort"
	"testing"

	"github.com/tide-sched/tide/job"
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
		opts := Options{policy: i.Name, kv: map[string]string{}, used: map[string]bool{}}
		if _, err := i.build(ctx, opts); err != nil {
			t.Errorf("%s with its defaults: %v", i.Name, err)
			continue
		}
		var read []string
		for k := range opts.used {
			read = append(read, k)
		}
		sort.Strings(read)
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

// TestKnobList parses declarations as `tide policies` shows them.
func TestKnobList(t *testing.T) {
	i := Info{Knobs: "a=1: first; continued; b=x (note); a=1: again; c="}
	got := i.KnobList()
	want := []Knob{{"a", "1", "first; continued; again"}, {"b", "x", "(note)"}, {"c", "", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("KnobList = %q, want %q", got, want)
	}
}
