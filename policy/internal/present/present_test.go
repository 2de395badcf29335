package present

import (
	"testing"

	"github.com/tide-sched/tide/engine"
)

func TestSet(t *testing.T) {
	a, b, c := &engine.Status{Slot: 0}, &engine.Status{Slot: 3}, &engine.Status{Slot: 1}
	var p Set
	if !p.Mark([]*engine.Status{a, b}) {
		t.Fatal("distinct slots refused")
	}
	if i, ok := p.Index(b); !ok || i != 1 {
		t.Errorf("b at %d, %v; want 1, true", i, ok)
	}
	if p.Has(c) || p.Has(nil) {
		t.Error("c or nil found before it was marked")
	}
	// The next round: a left, c came; b moved to the front.
	if !p.Mark([]*engine.Status{b, c}) {
		t.Fatal("distinct slots refused")
	}
	if p.Has(a) {
		t.Error("a found after it left")
	}
	if i, ok := p.Index(b); !ok || i != 0 {
		t.Errorf("b at %d, %v; want 0, true", i, ok)
	}
	// A status of the same slot as a, not a itself.
	if p.Has(&engine.Status{Slot: 0}) {
		t.Error("a stranger found by slot alone")
	}
	// Two statuses sharing a slot: refused, and nothing is found.
	if p.Mark([]*engine.Status{a, {Slot: 0}}) {
		t.Error("a shared slot accepted")
	}
	if p.Has(a) || p.Has(b) {
		t.Error("found a job after a refused mark")
	}
}
