package api

import "testing"

func TestWallReason(t *testing.T) {
	for in, want := range map[string]string{
		// 1795758441 s after the epoch, by hand: 20784 days (2026-11-27) and 5 h 47 min 21 s.
		"held: the whole cloud would end it at t=1795758441 s, by its deadline": "held: the whole cloud would end it at 2026-11-27T05:47:21Z, by its deadline",
		"deadline t=1795760240.6 s: no share (predicted end t=+Inf s)":          "deadline 2026-11-27T06:17:21Z: no share (predicted end never)",
		// A replay's clock, and text that only looks like a time.
		"deadline t=3600 s: needs a share of 4 GPUs": "deadline t=3600 s: needs a share of 4 GPUs",
		"suspended since t=0 s":                      "suspended since t=0 s",
		"at=1795758441 s; t=1795758441s; t=x s":      "at=1795758441 s; t=1795758441s; t=x s",
		"":                                           "",
	} {
		if got := WallReason(in); got != want {
			t.Errorf("WallReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDeclined(t *testing.T) {
	for in, want := range map[string]string{
		"declined: misses its deadline at t=1795758441 s": "declined: misses its deadline at 2026-11-27T05:47:21Z",
		"declined; deadline t=3600 s: no share":           "declined: deadline t=3600 s: no share",
		"deadline t=3600 s: no share":                     "declined: deadline t=3600 s: no share",
		"declinedness":                                    "declined: declinedness",
		"declined":                                        "declined: declined",
		"":                                                "declined: the default",
	} {
		if got := Declined(in, "the default"); got != want {
			t.Errorf("Declined(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzWallReason(f *testing.F) {
	f.Add("deadline t=1795760240 s; t=+Inf s")
	f.Fuzz(func(t *testing.T, s string) {
		_ = WallReason(s)
	})
}
