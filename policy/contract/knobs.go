package contract

import (
	"regexp"
	"slices"
	"strings"
)

// Knob is one knob a policy takes: the key of its spec's key=value, its
// default as a spec would write it ("" when it has none), and what it does.
type Knob struct {
	Key, Default, Doc string
}

var knobStart = regexp.MustCompile(`^([a-z_]+)=([^ :;(]*)(?::\s*|\s+|$)`)

// KnobList is the policy's knobs as data, read from its Knobs text: each
// "; "-separated entry that starts with key=default declares a knob, and an
// entry that does not continues the previous knob's doc. TestKnobsDocumented
// holds every policy's builder to exactly these keys; `tide policies NAME`
// and the unknown-knob error are written from them.
func (i Info) KnobList() []Knob {
	var out []Knob
	for _, e := range strings.Split(i.Knobs, "; ") {
		if e == "" {
			continue
		}
		m := knobStart.FindStringSubmatchIndex(e)
		if m == nil {
			if len(out) > 0 {
				out[len(out)-1].Doc += "; " + e
			}
			continue
		}
		k := Knob{Key: e[m[2]:m[3]], Default: e[m[4]:m[5]], Doc: e[m[1]:]}
		if j := slices.IndexFunc(out, func(o Knob) bool { return o.Key == k.Key }); j >= 0 {
			out[j].Doc += "; " + k.Doc // declared twice: one knob, both docs
			continue
		}
		out = append(out, k)
	}
	return out
}

// knobDefaults lists the policy's knobs as key=default.
func (i Info) knobDefaults() []string {
	var out []string
	for _, k := range i.KnobList() {
		out = append(out, k.Key+"="+k.Default)
	}
	return out
}
