package classic

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// TestFIFOManyStartAtOnce: a 32-GPU job holds the whole cluster while 60
// one-GPU jobs queue behind it, so FIFO leaves the reasons of all but the
// first explain.PredictAhead of them to be worked out when read
// (fifo_reasons.go). When it ends, 32 start in one round, half of them
// from among those: the engine asks FIFO, in that round, for the reason
// each had the round before (Status.WaitReason, what the simulator
// records), after the order of the waiting jobs has changed under it
// (waiting jobs ahead fail, others arrive, one ahead of them all). Every
// job's reasons must be those of FIFO planning every round in full, round
// by round.
func TestFIFOManyStartAtOnce(t *testing.T) {
	c := enginetest.Cluster("8x4:v100")
	clk := &policytest.Clock{}
	mk := func(p engine.Policy) *engine.Engine {
		e, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	fifo := fam.Parse(t, "fifo", contract.Context{}).(*FIFO)
	a, b := mk(fifo), mk(policytest.FullOnly{Policy: fam.Parse(t, "fifo", contract.Context{})})
	both := func(f func(e *engine.Engine) error) {
		t.Helper()
		for _, e := range []*engine.Engine{a, b} {
			if err := f(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit := func(id string, gpus int, at float64) {
		j := enginetest.Job(id).At(at).GPUs(gpus).Seconds(1000).Obj()
		both(func(e *engine.Engine) error { _, err := e.Submit(j); return err })
	}
	round := func(step string) {
		t.Helper()
		both(func(e *engine.Engine) error { _, err := e.Schedule(); return err })
		for _, id := range ids {
			st, o := a.Job(id), b.Job(id)
			if st == nil || o == nil {
				continue
			}
			if d := policytest.ReasonsDiffer(st, o); d != "" {
				t.Fatalf("%s: job %s (GPUs %v): %s", step, id, st.GPUs, d)
			}
		}
		clk.T += 10
	}
	submit("big", 32, clk.T)
	for i := range 60 {
		clk.T++
		submit(fmt.Sprintf("s%03d", i), 1, clk.T)
	}
	round("the big job starts")
	round("nothing changes")
	// The big job ends; waiting jobs ahead fail and others arrive, one
	// of them submitted (by its own clock) before all the others.
	both(func(e *engine.Engine) error { return e.Finish("big") })
	both(func(e *engine.Engine) error { return e.Finish("s003") })
	both(func(e *engine.Engine) error { return e.Finish("s020") })
	submit("late", 1, clk.T)
	submit("early", 2, 0.5)
	round("32 start at once")
	if fifo.KeptRounds() < 2 {
		t.Fatalf("%d rounds planned from what changed", fifo.KeptRounds())
	}
	started := 0
	for _, id := range ids {
		if st := a.Job(id); st != nil && len(st.GPUs) > 0 && st.WaitReason().Text != "" {
			started++
		}
	}
	if started < 16 {
		t.Fatalf("%d jobs started with a wait reason", started)
	}
	// A second wave, through the same rounds.
	for i := range 20 {
		if i != 3 { // failed already
			both(func(e *engine.Engine) error { return e.Finish(fmt.Sprintf("s%03d", i)) })
		}
	}
	round("a second wave")
}

// ids are the jobs TestFIFOManyStartAtOnce submits.
var ids = func() []string {
	out := []string{"big", "late", "early"}
	for i := range 60 {
		out = append(out, fmt.Sprintf("s%03d", i))
	}
	return out
}()
