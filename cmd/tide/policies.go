package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-sched/tide/policy"
)

// policiesWidth is the width tide policies fits its output into.
const policiesWidth = 100

const policiesHelp = `Usage: tide policies [NAME]

Without NAME, lists every scheduling policy on one line each. With NAME,
shows the policy in full: what it does, what it needs and its knobs. A
policy spec for --policy is NAME or NAME:KNOB=VALUE:KNOB=VALUE..., for
example tiresias:limits=3600/7200.
`

// cmdPolicies lists the policies, or shows one.
func cmdPolicies(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 1 && isHelp(args[0]):
		fmt.Fprint(stderr, policiesHelp)
		return nil
	case len(args) > 1:
		return usageError{fmt.Errorf("want at most one policy name, got %q", args)}
	case len(args) == 1:
		info, ok := policy.Lookup(args[0])
		if !ok {
			var names []string
			for _, i := range policy.All() {
				names = append(names, i.Name)
			}
			return usageError{fmt.Errorf("no policy %q; the policies are %s", args[0], strings.Join(names, ", "))}
		}
		return showPolicy(stdout, info)
	}
	infos := policy.All()
	width := 0
	for _, i := range infos {
		width = max(width, len(i.Name))
	}
	for _, i := range infos {
		fmt.Fprintf(stdout, "%-*s  %s\n", width, i.Name, shorten(i.Summary, policiesWidth-width-2))
	}
	fmt.Fprintln(stdout, "\n'tide policies NAME' shows a policy in full, with its knobs (--policy NAME:KNOB=VALUE).")
	return nil
}

// showPolicy prints one policy: summary, needs and knobs, wrapped.
func showPolicy(w io.Writer, i policy.Info) error {
	fmt.Fprintln(w, i.Name)
	for _, line := range wrap(i.Summary, policiesWidth-2) {
		fmt.Fprintln(w, "  "+line)
	}
	var needs []string
	if i.Elastic {
		needs = append(needs, "elastic: chooses each job's GPU count")
	}
	if i.AdaptBatch {
		needs = append(needs, "adapts batch sizes")
	}
	if i.NeedsDeadlines {
		needs = append(needs, "needs jobs with deadlines (--policy all leaves it out otherwise)")
	}
	if i.NeedsSolver {
		needs = append(needs, "needs GLPK (apt-get install libglpk40; docs/solver.md)")
	}
	for _, n := range needs {
		fmt.Fprintln(w, "  - "+n)
	}
	knobs := strings.TrimSpace(i.Knobs)
	if knobs == "" {
		fmt.Fprintln(w, "\nno knobs")
		return nil
	}
	fmt.Fprintf(w, "\nknobs (--policy %s:KNOB=VALUE:...):\n", i.Name)
	type knob struct{ name, meaning string }
	var ks []knob
	for _, k := range splitKnobs(knobs) {
		name, meaning := cutTop(k)
		if len(ks) > 0 && !strings.Contains(name, "=") && meaning != "" {
			// "restart_cost=gpus: ...; job: ...": a value of the knob before.
			ks[len(ks)-1].meaning += "; " + k
			continue
		}
		ks = append(ks, knob{name, meaning})
	}
	for _, k := range ks {
		for i, line := range wrap(k.name, policiesWidth-4) {
			indent := "  "
			if i > 0 {
				indent = "    "
			}
			fmt.Fprintln(w, indent+line)
		}
		for _, line := range wrap(k.meaning, policiesWidth-6) {
			fmt.Fprintln(w, "      "+line)
		}
	}
	return nil
}

// splitKnobs splits a policy's knob text at the "; " between knobs,
// leaving those inside parentheses (a knob's own explanation) alone.
func splitKnobs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ';':
			if depth == 0 && i+1 < len(s) && s[i+1] == ' ' {
				out = append(out, s[start:i])
				start = i + 2
			}
		}
	}
	return append(out, s[start:])
}

// cutTop splits a knob at its first ": " outside parentheses, into the
// knob and its meaning ("" when there is none).
func cutTop(k string) (name, meaning string) {
	depth := 0
	for i := 0; i+1 < len(k); i++ {
		switch k[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ':':
			if depth == 0 && k[i+1] == ' ' {
				return k[:i], k[i+2:]
			}
		}
	}
	return k, ""
}

// shorten cuts s to at most n runes at a word boundary, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) <= n {
		return s
	} else {
		s = string(r[:n-3])
	}
	if k := strings.LastIndexByte(s, ' '); k > 0 {
		s = s[:k]
	}
	return strings.TrimRight(s, " ,;:(") + "..."
}

// wrap breaks s into lines of at most n runes at spaces (a longer word
// gets a line of its own).
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > n {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
