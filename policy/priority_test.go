package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/solver"
)

// priorityLoad: three priority-0 jobs fill a 4-GPU cluster in turn (1000 s
// each on all 4 GPUs); a priority-100 job of 100 s arrives at t=10.
func priorityLoad() []*job.Job {
	var jobs []*job.Job
	for i, id := range []string{"a", "b", "c"} {
		jobs = append(jobs, enginetest.Job(id).At(float64(i)).GPUs(4).Seconds(1000).Obj())
	}
	h := enginetest.Job("h").At(10).GPUs(4).Seconds(100).Obj()
	h.Priority = 100
	return append(jobs, h)
}

// TestPriorityClasses: under every policy, priority=strict runs the
// priority-100 job as soon as the running priority-0 job leaves its GPUs,
// before the waiting priority-0 jobs; priority=preempt runs it before the
// running job finishes. Without the knob FIFO runs it last.
func TestPriorityClasses(t *testing.T) {
	jobs := priorityLoad()
	if r := specs.Starts(t, "fifo", jobs); r["h"].Start < r["c"].Start {
		t.Fatalf("plain fifo started h at %v before c at %v: the load does not test classes", r["h"].Start, r["c"].Start)
	}
	for _, info := range All() {
		if info.NeedsSolver && solver.Available() != nil {
			continue
		}
		t.Run(info.Name, func(t *testing.T) {
			r := specs.Starts(t, info.Name+":priority=strict", jobs)
			h := r["h"]
			for _, id := range []string{"a", "b", "c"} {
				if j := r[id]; j.Start > h.Submit && j.Start < h.Start {
					t.Errorf("strict: priority-0 job %s started at %v, before the priority-100 job (submitted %v, started %v)", id, j.Start, h.Submit, h.Start)
				}
			}
			r = specs.Starts(t, info.Name+":priority=preempt", jobs)
			first := r["a"]
			if h := r["h"]; h.Start < 0 || h.Start >= first.Finish {
				t.Errorf("preempt: the priority-100 job started at %v, after the running job's finish at %v", h.Start, first.Finish)
			}
		})
	}
}

// TestPriorityKnob: the knob's name is in the policy's name and bad values
// are refused.
func TestPriorityKnob(t *testing.T) {
	if p := specs.Parse(t, "tiresias:priority=preempt", Context{}); !strings.Contains(p.Name(), "priority=preempt") {
		t.Errorf("name %q", p.Name())
	}
	for spec, want := range map[string]string{"fifo:priority=high": "want strict, preempt or off", "fifo:prio=1": "priority=off|strict|preempt"} {
		if _, err := Parse(spec, Context{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", spec, err, want)
		}
	}
	_ = fmt.Sprint
}
