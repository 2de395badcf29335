package kubetest

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// tracePolicy writes, for every round of the policy it wraps, the time,
// the GPUs down, each job's GPUs and site as the engine holds them, the
// plan and each job's progress, attained service, wait, last start and
// starts/preemptions/resizes in the snapshot's order, one line, with jobs named by the trace (name maps the
// engine's job ID). A live run and the simulator's written so
// ($TIDE_LIVE_TRACE) diff to the first round where they part.
type tracePolicy struct {
	inner engine.Policy
	w     io.Writer
	name  func(id string) string
}

func (p *tracePolicy) Name() string          { return p.inner.Name() }
func (p *tracePolicy) Unwrap() engine.Policy { return p.inner }

func (p *tracePolicy) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.inner.Schedule(s)
	down := 0
	perNode := map[int]int{}
	for g, d := range s.Down {
		if d {
			down++
			perNode[s.Cluster.NodeOf(cluster.GPUID(g)).ID]++
		}
	}
	var held []string
	for _, st := range s.Jobs {
		if len(st.GPUs) == 0 {
			continue
		}
		n := s.Cluster.NodeOf(st.GPUs[0])
		var on []string
		for _, g := range st.GPUs {
			on = append(on, strconv.Itoa(s.Cluster.NodeOf(g).ID))
		}
		held = append(held, fmt.Sprintf("%s:%d@%s[%s]", p.name(st.Job.ID), len(st.GPUs), n.Site, strings.Join(on, ",")))
	}
	sort.Strings(held)
	var run []string
	for _, a := range plan.Run {
		run = append(run, fmt.Sprintf("%s:%d@%s", p.name(a.Job), a.GPUs, a.Site))
	}
	var state []string
	for _, st := range s.Jobs {
		state = append(state, fmt.Sprintf("%s:p=%.4g,a=%.6g,w=%.6g,ls=%.6g,n=%d/%d/%d", p.name(st.Job.ID), st.Progress, st.Attained, st.Waited, st.LastStart, st.Starts, st.Preemptions, st.Resizes))
	}
	var decline []string
	for _, id := range plan.Decline {
		decline = append(decline, p.name(id))
	}
	fmt.Fprintf(p.w, "t=%.0f down=%d%v jobs=%d held %s | plan %s | decline %v | state %s\n", s.Now, down, perNode, len(s.Jobs), strings.Join(held, " "), strings.Join(run, " "), decline, strings.Join(state, " "))
	return plan
}
