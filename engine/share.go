package engine

import (
	"fmt"
	"slices"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/perf"
)

// Space sharing: two jobs on the same GPUs (Assignment.PackWith). The engine
// keeps the pair's bookkeeping here so that placers, which give each GPU to
// one assignment, need not know about pairs: a pair is placed as one
// assignment and both members get its GPUs.

// hold records st as a holder of GPU g (the second, when g is shared).
func (e *Engine) hold(g cluster.GPUID, st *Status) {
	if st.Job.Fractional() {
		e.holdPart(g, st)
		return
	}
	if e.owner[g] == nil {
		e.owner[g] = st
		e.busy[g] = true
		e.heldOfType[e.typeOf[g]]++
		return
	}
	if e.co == nil {
		e.co = make([]*Status, len(e.owner))
	}
	e.co[g] = st
}

// unhold removes st from the holders of GPU g.
func (e *Engine) unhold(g cluster.GPUID, st *Status) {
	if st.Job.Fractional() {
		e.unholdPart(g, st)
		return
	}
	var second *Status
	if e.co != nil {
		second = e.co[g]
		e.co[g] = nil
	}
	switch {
	case e.owner[g] == st:
		e.owner[g] = second
	case second != st && e.co != nil:
		e.co[g] = second
	}
	if e.busy[g] && e.owner[g] == nil {
		e.heldOfType[e.typeOf[g]]--
	}
	e.busy[g] = e.owner[g] != nil
}

// packs reports whether run packs any pair.
func packs(run []Assignment) bool {
	for _, a := range run {
		if a.PackWith != "" {
			return true
		}
	}
	return false
}

// Holders returns the jobs holding GPU g: none, one (second is nil) or the
// two members of a packed pair.
func (e *Engine) Holders(g cluster.GPUID) (first, second *Status) {
	if e.co != nil {
		second = e.co[g]
	}
	return e.owner[g], second
}

// unpack ends st's pair, if any: its partner now runs alone.
func (e *Engine) unpack(st *Status) {
	if st.PackedWith == "" {
		return
	}
	e.touch(st)
	if p := e.jobs[st.PackedWith]; p != nil && p.PackedWith == st.Job.ID {
		p.PackedWith = ""
		e.touch(p)
	}
	st.PackedWith = ""
}

// packedSecond reports whether a (which packs) comes after its partner in
// the plan being checked: check marks each job as it goes, so a partner
// listed earlier is already marked.
func (e *Engine) packedSecond(a Assignment) bool {
	p := e.jobs[a.PackWith]
	return p != nil && p.checked == e.rounds && a.PackWith != a.Job
}

// checkPairs validates the plan's pairs: mutual, alike, and allowed here.
func (e *Engine) checkPairs(p Plan) error {
	var idx map[string]int
	for i, a := range p.Run {
		if a.PackWith == "" {
			continue
		}
		if !e.cfg.Sharing {
			return fmt.Errorf("plan packs job %s with %s, but this executor runs one job per GPU (Snapshot.Sharing is false)", a.Job, a.PackWith)
		}
		if _, ok := e.cfg.Model.(perf.Sharer); !ok {
			return fmt.Errorf("plan packs job %s with %s, but the %s model has no throughputs for shared GPUs", a.Job, a.PackWith, e.cfg.Model.Name())
		}
		if a.PackWith == a.Job {
			return fmt.Errorf("plan packs job %s with itself", a.Job)
		}
		if idx == nil {
			idx = make(map[string]int, len(p.Run))
			for k, b := range p.Run {
				idx[b.Job] = k
			}
		}
		k, ok := idx[a.PackWith]
		if !ok {
			return fmt.Errorf("plan packs job %s with %s, which the plan does not run", a.Job, a.PackWith)
		}
		b := p.Run[k]
		if b.PackWith != a.Job {
			return fmt.Errorf("plan packs job %s with %s, but %s is packed with %q (pairs must be mutual)", a.Job, a.PackWith, b.Job, b.PackWith)
		}
		if i < k && (a.GPUs != b.GPUs || a.GPUType != b.GPUType || a.Site != b.Site || !slices.Equal(a.Nodes, b.Nodes)) {
			return fmt.Errorf("plan packs jobs %s and %s with different GPUs (%d %q %q %v vs %d %q %q %v); a pair shares the same ones",
				a.Job, b.Job, a.GPUs, a.GPUType, a.Site, a.Nodes, b.GPUs, b.GPUType, b.Site, b.Nodes)
		}
	}
	return nil
}

// placePairs runs the placer with every pair shown as its first member
// alone, then gives the second member the same GPUs (PlacePairs).
func (e *Engine) placePairs(held map[string][]cluster.GPUID, run []Assignment) map[string][]cluster.GPUID {
	if !packs(run) && e.co == nil {
		return e.place(held, run)
	}
	return PlacePairs(held, run, e.place)
}

// PlacePairs places run with place as the engine places a plan that packs
// pairs or while running jobs share GPUs: every pair is shown to place as
// its first member alone, and the second member gets the same GPUs. A pair
// keeps the GPUs either member holds, when their count matches; GPUs two
// running jobs share are kept by the first of them in the plan only, so
// place never sees a GPU held twice. It edits held. (tide kube tries its
// plans on its placer the same way.)
func PlacePairs(held map[string][]cluster.GPUID, run []Assignment, place func(map[string][]cluster.GPUID, []Assignment) map[string][]cluster.GPUID) map[string][]cluster.GPUID {
	claimed := map[cluster.GPUID]bool{}
	free := func(gs []cluster.GPUID, n int) bool {
		if len(gs) != n {
			return false
		}
		for _, g := range gs {
			if claimed[g] {
				return false
			}
		}
		return true
	}
	seen := make(map[string]bool, len(run))
	second := map[string]string{} // first member -> second
	units := make([]Assignment, 0, len(run))
	for _, a := range run {
		seen[a.Job] = true
		if a.PackWith != "" && seen[a.PackWith] {
			second[a.PackWith] = a.Job
			continue
		}
		units = append(units, a)
	}
	for _, a := range units {
		h := held[a.Job]
		delete(held, a.Job)
		if b := a.PackWith; b != "" {
			if !free(h, a.GPUs) {
				h = held[b]
			}
			delete(held, b)
		}
		if free(h, a.GPUs) {
			held[a.Job] = h
			for _, g := range h {
				claimed[g] = true
			}
		}
	}
	placed := place(held, units)
	for first, sec := range second {
		if gs, ok := placed[first]; ok {
			placed[sec] = slices.Clone(gs)
		}
	}
	return placed
}

// checkPairRates refuses a pair the model cannot rate on the GPUs placed.
func (e *Engine) checkPairRates(p Plan, placed map[string][]cluster.GPUID) error {
	for _, a := range p.Run {
		if a.PackWith == "" {
			continue
		}
		gs, ok := placed[a.Job]
		if !ok {
			continue
		}
		if !slices.Equal(gs, placed[a.PackWith]) {
			return fmt.Errorf("packed jobs %s and %s placed on different GPUs", a.Job, a.PackWith)
		}
		sh := e.cfg.Model.(perf.Sharer) // checkPairs made sure
		alloc := e.shape(gs)
		if _, _, ok := sh.Shared(e.jobs[a.Job].Job, e.jobs[a.PackWith].Job, alloc); !ok {
			return fmt.Errorf("the %s model has no throughput for job %s packed with %s on %d %s GPUs",
				e.cfg.Model.Name(), a.Job, a.PackWith, len(gs), alloc.GPUType)
		}
	}
	return nil
}

// pair records the plan's pairs that were placed (after the round's
// releases, which ended the pairs that changed).
func (e *Engine) pair(p Plan, placed map[string][]cluster.GPUID) {
	for _, a := range p.Run {
		if a.PackWith == "" {
			continue
		}
		if _, ok := placed[a.Job]; ok {
			st := e.jobs[a.Job]
			if st.PackedWith != a.PackWith {
				e.touch(st)
			}
			st.PackedWith = a.PackWith
		}
	}
}
