package policy

import (
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/solver"
)

// TestPresetsParse: every preset belongs to a registered policy and
// builds.
func TestPresetsParse(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{{ID: "a", GPUs: 1, Duration: 100, Work: 100, Unit: job.Seconds}}}
	for _, info := range All() {
		name := info.Name
		for _, spec := range info.Presets {
			if !strings.HasPrefix(spec, name+":") {
				t.Errorf("preset %q is not a spec of %s", spec, name)
			}
			if info.NeedsSolver && solver.Available() != nil {
				continue
			}
			if _, err := Parse(spec, ctx); err != nil {
				t.Errorf("preset %q: %v", spec, err)
			}
		}
	}
}
