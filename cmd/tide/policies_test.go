package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tide-sched/tide/policy"
)

// TestPoliciesFit: tide policies prints one line per policy within 100
// columns, and tide policies NAME shows that policy, knobs included,
// within 100 columns too.
func TestPoliciesFit(t *testing.T) {
	fits := func(what, out string) {
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > policiesWidth {
				t.Errorf("%s: a line of %d columns: %q", what, n, line)
			}
		}
	}
	code, out, errs := tide(t, "policies")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	fits("tide policies", out)
	for _, i := range policy.All() {
		if n := strings.Count(out, "\n"+i.Name+" "); n != 1 && !strings.HasPrefix(out, i.Name+" ") {
			t.Errorf("tide policies: %d lines start with %q, want 1", n, i.Name)
		}
		code, one, errs := tide(t, "policies", i.Name)
		if code != 0 || !strings.HasPrefix(one, i.Name+"\n") {
			t.Errorf("tide policies %s: exit %d: %s%s", i.Name, code, one, errs)
		}
		fits("tide policies "+i.Name, one)
		// Every knob's name=default shows.
		for _, k := range splitKnobs(i.Knobs) {
			if name, _ := cutTop(k); strings.Contains(name, "=") && !strings.Contains(one, strings.Fields(name)[0]) {
				t.Errorf("tide policies %s does not show knob %q", i.Name, name)
			}
		}
	}
	if code, _, errs := tide(t, "policies", "nope"); code != 2 || !strings.Contains(errs, "tiresias") {
		t.Errorf("tide policies nope: exit %d, want 2 and the list of names: %s", code, errs)
	}
}
