package chronus

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// refAdmit is admission as it was before the admitter (14 CPU-s for one
// decision at 10,000 GPUs: the admitted jobs' lease problems built, sorted
// and packed afresh for every newcomer), kept to compare the admitter with.
func (c *Chronus) refAdmit(admitted []*chronusJob, j *chronusJob, k, capTotal int, ahead float64) (now, ok bool) {
	lj := make([]leaseJob, 0, len(admitted)+1)
	horizon := 1
	for _, a := range append(admitted, j) {
		l := c.leaseJobOf(a, k, math.MaxInt32, ahead)
		if !l.feasible() {
			if a == j {
				return false, false
			}
			l.Options = []leaseOption{{Blocks: l.Need, Value: c.Value}}
		}
		for _, o := range l.Options {
			horizon = max(horizon, o.Blocks)
		}
		lj = append(lj, l)
	}
	capacity := make([]int, horizon)
	for t := range capacity {
		capacity[t] = capTotal
	}
	self := len(lj) - 1
	if p, ok := packLeases(lj, capacity); ok {
		return p.runsNow(self), true
	}
	if c.Tolerate <= 1 {
		return false, false
	}
	last := lastDeadline(j)
	stretched := leaseBlocks(j.st.Job.Submit+(last-j.st.Job.Submit)*c.Tolerate, c.Lease, k)
	lj[self].Options = []leaseOption{{Blocks: stretched, Value: c.Value}}
	for len(capacity) < stretched {
		capacity = append(capacity, capTotal)
	}
	p, ok := packLeases(lj, capacity)
	return ok && p.runsNow(self), ok
}

// TestAdmitterMatchesReference: the admitter admits the same newcomers as
// packing everything afresh for each (refAdmit), with the same answer on
// the current lease, on random rounds: strict and soft deadlines, running
// and waiting jobs, deadlines already too tight, tolerate 1 and 1.5, and
// admitted jobs of earlier rounds before the newcomers.
func TestAdmitterMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 7))
	admittedAll, rejectedAll := 0, 0
	for round := range 300 {
		c := &Chronus{Knobs: DefaultKnobs}
		if round%2 == 1 {
			c.Tolerate = 1.5
		}
		now := float64(rng.IntN(4000))
		k := int(math.Floor(now / c.Lease))
		next := int(math.Ceil(now/c.Lease - 1e-9))
		capTotal := 4 + rng.IntN(28)
		mk := func(i int) *chronusJob {
			submit := now - float64(rng.IntN(3000))
			jb := &job.Job{ID: fmt.Sprint("j", i), GPUs: 1 << rng.IntN(4), Submit: submit,
				Deadline: now + float64(rng.IntN(3000)) - 300}
			if rng.IntN(4) == 0 {
				jb.Utility = &job.Utility{Deadlines: []float64{jb.Deadline, jb.Deadline + 600, jb.Deadline + 1800}, Values: []float64{10, 6, 2}}
			}
			st := &engine.Status{Job: jb}
			if rng.IntN(3) == 0 {
				st.GPUs = make([]cluster.GPUID, jb.GPUs)
			}
			return &chronusJob{st: st, rem: float64(60 + rng.IntN(1500)), startCost: float64(rng.IntN(60))}
		}
		var admitted []*chronusJob
		for i := range rng.IntN(30) {
			admitted = append(admitted, mk(i))
		}
		a := c.newAdmitter(next, capTotal, float64(next)*c.Lease-now)
		for _, x := range admitted {
			a.add(x)
		}
		for i := range 1 + rng.IntN(40) {
			j := mk(100 + i)
			wantNow, wantOK := c.refAdmit(admitted, j, next, capTotal, float64(next)*c.Lease-now)
			gotNow, gotOK := a.try(j)
			if gotNow != wantNow || gotOK != wantOK {
				t.Fatalf("round %d (k %d, %d GPUs, %d admitted), newcomer %d: admitter (now %v, ok %v), reference (now %v, ok %v)",
					round, k, capTotal, len(admitted), i, gotNow, gotOK, wantNow, wantOK)
			}
			if wantOK {
				admitted = append(admitted, j)
				a.add(j)
				admittedAll++
			} else {
				rejectedAll++
			}
		}
	}
	if admittedAll < 100 || rejectedAll < 100 {
		t.Errorf("%d newcomers admitted, %d refused: the rounds do not exercise both", admittedAll, rejectedAll)
	}
}
