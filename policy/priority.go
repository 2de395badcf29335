package policy

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Priority wraps a policy with strict priority classes (Job.Priority,
// higher first): each class is scheduled by its own instance of the inner
// policy (so stateful policies keep one consistent view of their jobs), on
// the GPUs the classes above it leave. A job of a lower class never takes
// GPUs a higher class's policy planned for.
//
// Running jobs of a lower class keep their GPUs against higher classes
// unless Preempt is set: then a higher class may take them (the lower job
// is preempted or shrunk by its own policy's plan on what is left).
//
// The wrapper forwards each class's declines, pairs, memos, warnings and
// reasons; a job a class's policy planned that no longer fits what the
// classes above took waits with a reason naming them.
type Priority struct {
	// New builds one instance of the inner policy (one per class).
	New     func() (engine.Policy, error)
	Preempt bool
	name    string
	first   engine.Policy
	byClass map[int]engine.Policy
}

// NewPriority wraps the policy built by build.
func NewPriority(build func() (engine.Policy, error), preempt bool) (*Priority, error) {
	first, err := build()
	if err != nil {
		return nil, err
	}
	mode := "strict"
	if preempt {
		mode = "preempt"
	}
	return &Priority{New: build, Preempt: preempt, first: first, name: first.Name() + ":priority=" + mode}, nil
}

// Name implements engine.Policy.
func (p *Priority) Name() string { return p.name }

// Unwrap implements engine.Wrapper: the instance built first (optional
// interfaces are found on it).
func (p *Priority) Unwrap() engine.Policy { return p.first }

// class returns the inner instance of a class.
func (p *Priority) class(c int) engine.Policy {
	if p.byClass == nil {
		p.byClass = map[int]engine.Policy{}
	}
	if pol, ok := p.byClass[c]; ok {
		return pol
	}
	pol := p.first
	if len(p.byClass) > 0 {
		// The first instance already built cannot fail with the same knobs.
		if q, err := p.New(); err == nil {
			pol = q
		}
	}
	p.byClass[c] = pol
	return pol
}

// Schedule implements engine.Policy.
//
// Without Preempt, the GPUs lower running jobs hold are kept from the
// classes above; when a lower class's own policy stops such a job (time
// slicing, preemption inside the class) its GPUs are given up, and the
// round is planned again with them open to the classes above, so a lower
// class cannot pass GPUs among its own jobs while a higher one waits.
func (p *Priority) Schedule(s *engine.Snapshot) engine.Plan {
	var classes []int
	members := map[int][]*engine.Status{}
	for _, st := range s.Jobs {
		c := st.Job.Priority
		if _, ok := members[c]; !ok {
			classes = append(classes, c)
		}
		members[c] = append(members[c], st)
	}
	slices.SortFunc(classes, func(a, b int) int { return cmp.Compare(b, a) })
	held := make([]bool, s.Cluster.TotalGPUs())
	protected := map[cluster.GPUID]int{} // GPU -> class of the lower running job keeping it
	for _, st := range s.Jobs {
		for _, g := range st.GPUs {
			held[g] = true
			if !p.Preempt {
				protected[g] = st.Job.Priority
			}
		}
	}
	for pass := 0; ; pass++ {
		plan := p.pass(s, classes, members, held, protected)
		if len(protected) == 0 || pass > len(classes) {
			return plan
		}
		// GPUs of lower running jobs their own class's plan stops.
		given := map[string]int{}
		for _, a := range plan.Run {
			given[a.Job] = a.GPUs
		}
		released := false
		for _, st := range s.Jobs {
			if len(st.GPUs) > 0 && given[st.Job.ID] < len(st.GPUs) {
				for _, g := range st.GPUs {
					if _, ok := protected[g]; ok {
						delete(protected, g)
						released = true
					}
				}
			}
		}
		if !released {
			return plan
		}
	}
}

// pass plans every class once, highest first.
func (p *Priority) pass(s *engine.Snapshot, classes []int, members map[int][]*engine.Status, held []bool, protected map[cluster.GPUID]int) engine.Plan {
	down := make([]bool, s.Cluster.TotalGPUs())
	copy(down, s.Down)
	var plan engine.Plan
	ahead := 0
	for _, c := range classes {
		sub := *s
		sub.Jobs = members[c]
		d := slices.Clone(down)
		for g, pc := range protected {
			if pc < c {
				d[g] = true
			}
		}
		sub.Down = d
		inner := p.class(c).Schedule(&sub)
		kept := fitClass(&sub, inner.Run, down, held)
		plan.Run = append(plan.Run, kept...)
		plan.Decline = append(plan.Decline, inner.Decline...)
		plan.Warnings = append(plan.Warnings, inner.Warnings...)
		for id, m := range inner.Memo {
			if plan.Memo == nil {
				plan.Memo = map[string]engine.Memo{}
			}
			plan.Memo[id] = m
		}
		if plan.Reasons == nil {
			plan.Reasons = map[string]engine.Reason{}
		}
		waiting := 0
		for id, r := range inner.Reasons {
			if r.Position > 0 {
				r.Position += ahead
				waiting++
			}
			r.Text = fmt.Sprintf("priority %d; %s", c, r.Text)
			plan.Reasons[id] = r
		}
		ran := map[string]bool{}
		for _, a := range kept {
			ran[a.Job] = true
		}
		for _, a := range inner.Run {
			if !ran[a.Job] {
				waiting++
				plan.Reasons[a.Job] = engine.Reason{Position: ahead + waiting,
					Text: fmt.Sprintf("priority %d; its policy planned %d GPUs but higher classes hold them", c, a.GPUs)}
			}
		}
		ahead += waiting
	}
	return plan
}

// fitClass keeps the assignments that fit the GPUs not yet taken (by type,
// in plan order, a packed pair once) and marks the GPUs taken in down for
// the classes below: first those the job holds now, then idle ones, then
// (only when preemption let them through) those lower jobs hold.
func fitClass(s *engine.Snapshot, run []engine.Assignment, down, held []bool) []engine.Assignment {
	byID := make(map[string]*engine.Status, len(s.Jobs))
	for _, st := range s.Jobs {
		byID[st.Job.ID] = st
	}
	typeOf := func(g cluster.GPUID) string { return s.Cluster.NodeOf(g).GPUType }
	take := func(a engine.Assignment) bool {
		st := byID[a.Job]
		if st == nil {
			return false
		}
		var got []cluster.GPUID
		for _, g := range st.GPUs {
			if len(got) < a.GPUs && !down[g] && (a.GPUType == "" || typeOf(g) == a.GPUType) {
				got = append(got, g)
			}
		}
		types := s.Cluster.GPUTypes()
		if a.GPUType != "" {
			types = []string{a.GPUType}
		} else if len(got) > 0 {
			types = []string{typeOf(got[0])}
		}
		for _, t := range types {
			extra := freeGPUs(down, held, got, a.GPUs-len(got), func(g cluster.GPUID) bool { return typeOf(g) == t })
			if len(got)+len(extra) == a.GPUs {
				got = append(got, extra...)
				break
			}
		}
		if len(got) < a.GPUs {
			return false
		}
		for _, g := range got {
			down[g] = true
		}
		return true
	}
	var out, later []engine.Assignment
	kept := map[string]bool{}
	for _, a := range run {
		if a.PackWith != "" && a.Job > a.PackWith {
			later = append(later, a) // the partner takes the GPUs
			continue
		}
		if take(a) {
			kept[a.Job] = true
			out = append(out, a)
		}
	}
	for _, a := range later {
		if kept[a.PackWith] {
			out = append(out, a)
			continue
		}
		a.PackWith = ""
		if take(a) {
			out = append(out, a)
		}
	}
	return out
}

// freeGPUs returns up to n GPUs that are not down, not in have and pass ok:
// idle ones first, then ones a running job holds.
func freeGPUs(down, held []bool, have []cluster.GPUID, n int, ok func(cluster.GPUID) bool) []cluster.GPUID {
	var out []cluster.GPUID
	for pass := 0; pass < 2; pass++ {
		for g := cluster.GPUID(0); int(g) < len(down) && len(out) < n; g++ {
			if !down[g] && held[g] == (pass == 1) && ok(g) && !slices.Contains(have, g) && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
