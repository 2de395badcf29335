package contract

import (
	"slices"
	"testing"
)

// TestKnobList parses declarations as `tide policies` shows them.
func TestKnobList(t *testing.T) {
	i := Info{Knobs: "a=1: first; continued; b=x (note); a=1: again; c="}
	got := i.KnobList()
	want := []Knob{{"a", "1", "first; continued; again"}, {"b", "x", "(note)"}, {"c", "", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("KnobList = %q, want %q", got, want)
	}
}
