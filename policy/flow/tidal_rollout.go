package flow

import (
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
)

// Rollout (Bertsekas' rollout algorithm, with EdgeFlow's rule as the base
// policy): where tidal would decide otherwise than EdgeFlow (admit a held
// job again, or exchange an admitted job for a newcomer), it plays both
// choices forward with EdgeFlow's own rule and takes tidal's only when it
// meets strictly more deadlines; a tie goes to EdgeFlow's. The play uses
// only what is known now: the jobs in the set (their work left, rates and
// deadlines), never later arrivals, and the cloud at the rollout quantile
// of its own forecast, never the realised capacity (forecast=oracle
// excepted, which is the point of that ablation).
//
// The play is a fluid model of EdgeFlow's rounds on the cloud: at each
// step (every RollStep seconds, on the forecast's bins, and at every end)
// the cloud pass gives each job its minimum satisfactory share in the
// set's order, spare GPUs go out by marginal return (Flow.spare), and each
// job runs at its rate on its GPUs until the next step; a change of GPUs
// costs the job its resize time (a start its start or restart time), as
// the pass counts it. A job ends when its work is done; it met its
// deadline if that is by its deadline, and it is dropped, missed, once its
// deadline passes. Jobs on edge servers keep the outcome the admission
// test gave them (they leave the cloud alone); offloading later is not
// played. Rates are those at the progress now.

// rollJob is one job of a play: a copy of its fjob, advanced in time.
type rollJob struct {
	fjob
	cold  float64 // seconds without progress when it starts from no GPUs
	stall float64 // seconds without progress left
	run   int     // cloud GPUs it ran on in the last step
	done  bool
}

// arrival is a job as it arrived (RollArrivals): its submission and its
// fjob then, whole work left, no GPUs, no Status.
type arrival struct {
	at float64
	j  fjob
}

// record keeps, for the play's arrivals, each job of s not seen before.
func (t *Tidal) record(s *engine.Snapshot, c cloud) {
	for _, st := range s.Jobs {
		if t.seen[st.Job.ID] {
			continue
		}
		t.seen[st.Job.ID] = true
		if st.Job.Deadline <= 0 {
			continue
		}
		x := t.flow.fjobOf(s, c, st)
		if x.other {
			continue // declined at arrival: never in the plan
		}
		j := fjob{rem: st.Work, deadline: x.deadline, levels: x.levels, rates: x.rates,
			delay: s.Model.Costs(st.Job).Start, margin: x.margin, class: 2*st.Job.Priority + 1, edge: -1, pin: -1}
		t.arrivals = append(t.arrivals, arrival{at: st.Job.Submit, j: j})
	}
}

// rollBefore orders a play's jobs as Flow.jobs does: priority, then
// deadline.
func rollBefore(a, b *fjob) bool {
	if a.class/2 != b.class/2 {
		return a.class > b.class
	}
	return a.deadline < b.deadline
}

// rollPass runs the cloud pass at now on capacity GPUs over the play's
// jobs not done (dropping, as missed, those whose deadline has passed)
// and returns them in t.rollLive and the GPUs their shares use now.
func (t *Tidal) rollPass(now float64, capacity int) int {
	tl := &t.rollTL
	tl.t = append(tl.t[:0], now)
	tl.free = append(tl.free[:0], capacity)
	live := t.rollLive[:0]
	used := 0
	for i := range t.roll {
		r := &t.roll[i]
		if r.done {
			continue
		}
		if !math.IsInf(r.deadline, 1) && now >= r.deadline {
			r.done = true // missed
			continue
		}
		r.cur, r.delay = r.run, r.stall
		if r.run == 0 {
			r.delay = math.Max(r.stall, r.cold)
		}
		t.flow.passOne(tl, &r.fjob)
		used += r.now
		live = append(live, &r.fjob)
	}
	t.rollLive = live
	return used
}

// rollout plays set (in admission's order, outcomes and edge servers as
// the admission test left them) forward from now, skipping skip, and
// returns how many of its deadline jobs meet their deadline, with the
// arrivals of the last RollArrivals seconds again as newcomers in the
// next (EdgeFlow's test admits them or not, on the cloud). The cloud
// never has more than limit GPUs in the play, less flt's.
func (t *Tidal) rollout(s *engine.Snapshot, c cloud, set []*fjob, skip *fjob, limit int, flt faults) int {
	met := 0
	jobs := t.roll[:0]
	horizon := s.Now
	for _, x := range set {
		if x == skip || math.IsInf(x.deadline, 1) && x.edge >= 0 {
			continue
		}
		if x.edge >= 0 {
			if x.meets {
				met++
			}
			continue
		}
		r := rollJob{fjob: *x, cold: x.delay, run: x.cur}
		if x.cur > 0 {
			r.cold = x.margin
		}
		r.stall = x.delay
		r.edge, r.pin = -1, -1
		if !math.IsInf(x.deadline, 1) {
			horizon = math.Max(horizon, x.deadline)
		}
		jobs = append(jobs, r)
	}
	// The newcomers to come: the last window's arrivals, a window later.
	next := t.rollNext[:0]
	if w := t.RollArrivals; w > 0 {
		for _, a := range t.arrivals {
			if a.at > s.Now-w && a.at <= s.Now {
				x := a.j
				x.deadline += w
				next = append(next, arrival{at: a.at + w, j: x})
			}
		}
	}
	t.rollNext = next
	horizon = math.Min(horizon, s.Now+float64(tideBins)*600)
	t.roll = jobs
	now := s.Now
	var v *tideView
	if t.Source != "off" {
		v = t.views[c.site]
		if v != nil {
			t.plan(s, v)
		}
	}
	for steps := 0; now < horizon && steps < 10000; steps++ {
		capacity := c.cap
		if v != nil && len(v.roll) > 0 {
			k := min(max(int(math.Floor((now-v.start)/v.bin)), 0), len(v.roll)-1)
			capacity = min(int(math.Floor(v.roll[k]+1e-9)), c.cap)
		}
		capacity = max(min(capacity, limit)-flt.lost(now), 0)
		// Newcomers due by now, by EdgeFlow's test on the cloud.
		for len(next) > 0 && next[0].at <= now {
			a := next[0].j
			next = next[1:]
			t.rollPass(now, capacity)
			missing := countMissing(t.rollLive, a.class)
			at := len(t.roll)
			for i := range t.roll {
				if rollBefore(&a, &t.roll[i].fjob) {
					at = i
					break
				}
			}
			t.roll = slices.Insert(t.roll, at, rollJob{fjob: a, cold: a.delay, stall: a.delay})
			t.rollPass(now, capacity)
			if !t.roll[at].meets || countMissing(t.rollLive, a.class) > missing {
				t.roll = slices.Delete(t.roll, at, at+1)
			} else {
				horizon = math.Min(math.Max(horizon, a.deadline), s.Now+float64(tideBins)*600)
			}
		}
		jobs = t.roll
		// The cloud pass and spare GPUs, as EdgeFlow's round.
		used := t.rollPass(now, capacity)
		if len(t.rollLive) == 0 && len(next) == 0 {
			break
		}
		t.flow.spare(capacity-used, t.rollLive)
		// To the next step: the next bin, the next newcomer, or the
		// first end.
		until := now + t.RollStep
		if v != nil && len(v.roll) > 0 {
			until = math.Min(until, v.start+(math.Floor((now-v.start)/v.bin)+1)*v.bin)
		}
		if len(next) > 0 {
			until = math.Min(until, next[0].at)
		}
		until = math.Min(until, flt.next(now))
		for i := range jobs {
			r := &jobs[i]
			if r.done {
				continue
			}
			g := r.now
			switch {
			case g == 0:
				r.stall = 0
			case r.run == 0:
				r.stall = math.Max(r.stall, r.cold)
			case g != r.run:
				r.stall = r.margin
			}
			r.run = g
			if _, rate := r.level(g); g > 0 && rate > 0 {
				until = math.Min(until, now+r.stall+r.rem/rate)
			}
		}
		dt := until - now
		for i := range jobs {
			r := &jobs[i]
			if r.done || r.run == 0 {
				continue
			}
			_, rate := r.level(r.run)
			if rate <= 0 {
				continue
			}
			ran := dt - r.stall
			r.stall = math.Max(r.stall-dt, 0)
			if ran <= 0 {
				continue
			}
			if r.rem <= ran*rate*(1+1e-12) {
				r.done, r.rem = true, 0
				if until <= r.deadline {
					met++
				}
				continue
			}
			r.rem -= ran * rate
		}
		now = until
	}
	return met
}

// faults are a play's cloud faults: from first on, every period seconds a
// node of gpus GPUs is lost for dur seconds (none when period is 0).
type faults struct {
	first, period, dur float64
	gpus               int
}

// lost is the GPUs the faults take at time x.
func (f faults) lost(x float64) int {
	if f.period <= 0 || x < f.first {
		return 0
	}
	hi := math.Floor((x - f.first) / f.period)
	lo := math.Max(math.Floor((x-f.dur-f.first)/f.period)+1, 0)
	if hi < lo {
		return 0
	}
	return int(hi-lo+1) * f.gpus
}

// next is the first time after x that a fault begins or ends (+Inf:
// none).
func (f faults) next(x float64) float64 {
	if f.period <= 0 {
		return math.Inf(1)
	}
	if x < f.first {
		return f.first
	}
	m := math.Floor((x - f.first) / f.period) // the last fault begun by x
	begin := f.first + (m+1)*f.period
	// The first fault that ends after x: fault m ends last of those begun.
	end := math.Inf(1)
	for k := math.Max(math.Floor((x-f.dur-f.first)/f.period), 0); k <= m; k++ {
		if e := f.first + k*f.period + f.dur; e > x {
			end = e
			break
		}
	}
	return math.Min(begin, end)
}

// play is the deadlines met by set without skip, summed over the plays:
// one on the forecast, or RollFaults with the cloud's faults as seen so far.
func (t *Tidal) play(s *engine.Snapshot, c cloud, set []*fjob, skip *fjob, limit int) int {
	v := t.views[c.site]
	if t.RollFaults == 0 || v == nil || v.lost <= 0 || c.perNode <= 0 {
		return t.rollout(s, c, set, skip, limit, faults{})
	}
	nodes := v.lost / float64(c.perNode)
	period := v.obs / nodes
	dur := v.down / v.lost
	met := 0
	for k := range t.RollFaults {
		f := faults{first: s.Now + (float64(k)+0.5)/float64(t.RollFaults)*period, period: period, dur: dur, gpus: c.perNode}
		met += t.rollout(s, c, set, skip, limit, f)
	}
	return met
}

// rollHeld is the held job's re-trial under rollout (Flow.heldTest): j
// (which EdgeFlow's test admits into trial) is admitted only if the
// pessimistic plan lets it in (RolloutMode gate) and the play meets
// strictly more deadlines with it than without it (it otherwise stays
// held: EdgeFlow would have it declined).
func (t *Tidal) rollHeld(s *engine.Snapshot, c cloud, e *edges, base, trial []*fjob, j *fjob) bool {
	if t.RolloutMode == "gate" && !t.flow.holdSafe(s, c, e, base, trial, j) {
		return false
	}
	if t.play(s, c, trial, nil, c.cap) <= t.play(s, c, trial, j, c.cap) {
		return false
	}
	if t.RolloutMode == "robust" {
		// And no worse on the pessimistic cloud (holdCap: the forecast's
		// low quantile until j's deadline, less one node) all along.
		limit := t.holdCap(s, c, j)
		return t.rollout(s, c, trial, nil, limit, faults{}) >= t.rollout(s, c, trial, j, limit, faults{})
	}
	return true
}
