package contract

import (
	"math"
	"strings"
	"testing"
)

// FuzzWeights checks that a tenant-weight knob either parses into weights
// that are finite and > 0 for every tenant (1 for the unlisted), or fails
// with an error naming the policy and knob; never a panic.
func FuzzWeights(f *testing.F) {
	for _, s := range []string{"", "a@2", "a@2/b@0.5/-@3", "a@0", "a@-1", "a@NaN", "a@Inf", "a", "@2", "a@1/a@1", "a@1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var k struct {
			W Weights `knob:"weights"`
		}
		err := NewOptions("drf", map[string]string{"weights": v}).Decode(&k)
		w := k.W.Of
		if err != nil {
			if !strings.HasPrefix(err.Error(), "policy drf: weights=") {
				t.Fatalf("error %q does not name the policy and knob", err)
			}
			return
		}
		for _, part := range append(strings.Split(v, "/"), "unlisted-tenant") {
			name, _, _ := strings.Cut(part, "@")
			if name == "-" {
				name = ""
			}
			if x := w(name); !(x > 0) || math.IsInf(x, 0) {
				t.Fatalf("weights %q: tenant %q weighs %v", v, name, x)
			}
		}
	})
}
