package flow

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestTideRoundJoinsAsStrings: the texts tideRound builds in its buffer
// are those the same steps give on strings (a reason joined to what it
// had with "; ", an empty text skipped, EdgeFlow's leading "declined"
// dropped where asked), over random steps and rounds, the buffer growing
// while a step copies from it; and a text the same as the job's last
// reason is that reason's own string.
func TestTideRoundJoinsAsStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	var tr tideRound
	words := []string{"", "declined", "declined; deadline t=5 s", "waits; needs 2 GPUs", "held", "a; b"}
	for round := range 60 {
		var jobs []*engine.Status
		for i := range 1 + r.IntN(8) {
			jobs = append(jobs, &engine.Status{Job: &job.Job{ID: fmt.Sprintf("j%d-%d", round%3, i)}})
		}
		s := &engine.Snapshot{Jobs: jobs}
		tr.begin(s)
		want := map[string]engine.Reason{}
		for range 20 {
			k := r.IntN(len(jobs))
			id := jobs[k].Job.ID
			i, ok := tr.index(id)
			if !ok || tr.jobs[i] != jobs[k] {
				t.Fatalf("round %d: index of %s: %d, %v", round, id, i, ok)
			}
			w := words[r.IntN(len(words))]
			old, had := want[id]
			lo := tr.mark()
			switch r.IntN(4) {
			case 0: // a new text and figures
				tr.buf = append(tr.buf, w...)
				tr.set(i, lo, engine.Reason{Position: k + 1})
				want[id] = engine.Reason{Text: w, Position: k + 1}
			case 1, 2: // a head joined to what it had
				drop := r.IntN(2) == 0
				tr.buf = append(tr.buf, w...)
				tr.prepend(i, lo, drop)
				rest := old.Text
				if drop {
					if rest == "declined" {
						rest = ""
					}
					rest = strings.TrimPrefix(rest, "declined; ")
				}
				old.Text = joinStrings(w, rest)
				want[id] = old
			case 3: // a tail joined after what it had
				tr.buf = append(tr.buf, tr.text(i)...)
				join(&tr, lo, w)
				tr.set(i, lo, tr.reason(i))
				if !had {
					old = engine.Reason{}
				}
				old.Text = joinStrings(old.Text, w)
				want[id] = old
			}
		}
		got := tr.reasons()
		if len(got) != len(want) {
			t.Fatalf("round %d: %d reasons, want %d", round, len(got), len(want))
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("round %d: %s: %+v, want %+v", round, id, got[id], w)
			}
		}
	}
	st := &engine.Status{Job: &job.Job{ID: "x"}}
	last := strings.Repeat("ab", 3)
	st.SetReason(engine.Reason{Text: last})
	text := []byte("ababab")
	if got := keptText(text, st); got != last {
		t.Fatalf("keptText: %q, want %q", got, last)
	}
	if n := testing.AllocsPerRun(10, func() { keptSink = keptText(text, st) }); n != 0 {
		t.Errorf("keptText of the last reason's text allocates %v times, want 0 (its own string)", n)
	}
}

// keptSink keeps keptText's string alive, so that a copy would be counted.
var keptSink string

// joinStrings joins two reason texts with "; ", skipping an empty one.
func joinStrings(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// TestPrependHeld: a held job's reason keeps the shared explanation but
// not its "declined" nor its "(predicted end t=+Inf s)", which live
// reasons would write as "never".
func TestPrependHeld(t *testing.T) {
	for _, tc := range []struct{ had, want string }{
		{"declined; deadline t=5 s: no share of the GPUs free before it meets it (predicted end t=+Inf s); waits",
			"held; deadline t=5 s: no share of the GPUs free before it meets it; waits"},
		{"preempted; deadline t=5 s: no share of the GPUs free before it meets it (predicted end t=+Inf s)",
			"held; preempted; deadline t=5 s: no share of the GPUs free before it meets it"},
		{"deadline t=5 s: needs a share of 4 GPUs, 0 left free before it by the admitted jobs",
			"held; deadline t=5 s: needs a share of 4 GPUs, 0 left free before it by the admitted jobs"},
		{"declined", "held"},
		{"", "held"},
	} {
		var tr tideRound
		st := &engine.Status{Job: &job.Job{ID: "x"}}
		tr.begin(&engine.Snapshot{Jobs: []*engine.Status{st}})
		i, _ := tr.index("x")
		lo := tr.mark()
		tr.buf = append(tr.buf, tc.had...)
		tr.set(i, lo, engine.Reason{})
		lo = tr.mark()
		tr.buf = append(tr.buf, "held"...)
		tr.prependHeld(i, lo)
		if got := tr.reasons()["x"].Text; got != tc.want {
			t.Errorf("%q: %q, want %q", tc.had, got, tc.want)
		}
	}
}
