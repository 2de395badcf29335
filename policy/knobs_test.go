package policy

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/solver"
)

// documentedKeys are the knobs a policy's Knobs text declares: each
// "; "-separated entry that starts with key=.
func documentedKeys(knobs string) []string {
	re := regexp.MustCompile(`^([a-z_]+)=`)
	var out []string
	for _, e := range strings.Split(knobs, "; ") {
		if m := re.FindStringSubmatch(e); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// TestKnobsDocumented: the knobs a policy reads are the knobs its Knobs
// text declares, so `tide policies NAME` and the unknown-knob error (which
// quotes the text) name exactly what the policy takes.
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
		doc := documentedKeys(i.Knobs)
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
