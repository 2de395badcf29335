package kube

import (
	"testing"

	"github.com/tide-sched/tide/engine"
)

// TestHeldReason: a policy's reason says the job is held only when it
// begins with the word held.
func TestHeldReason(t *testing.T) {
	for text, want := range map[string]bool{
		"held, not declined: the whole cloud would still end it": true,
		"held: waiting for a release":                            true,
		"held":                                                   true,
		"holds 4 GPUs":                                           false,
		"heldover":                                               false,
		"waiting; held back by the quota":                        false,
		"":                                                       false,
	} {
		if got := held(engine.Reason{Text: text}); got != want {
			t.Errorf("held(%q) = %v, want %v", text, got, want)
		}
	}
	for text, want := range map[string]string{
		"declined: misses its deadline": "declined: misses its deadline",
		"deadline t=3600 s: no share":   "declined: deadline t=3600 s: no share",
		"declined; deadline: no share":  "declined: deadline: no share",
		"declinedness":                  "declined: declinedness",
		"":                              "declined: the policy refused it at admission",
	} {
		if got := declinedText(engine.Reason{Text: text}); got != want {
			t.Errorf("declinedText(%q) = %q, want %q", text, got, want)
		}
	}
}
