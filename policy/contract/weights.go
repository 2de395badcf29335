package contract

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Weights reads a per-tenant weight knob, "tenant@w/tenant@w" (for example
// tickets=team-a@3/team-b@1). Tenants not listed weigh def; the tenant ""
// (jobs with no tenant) is written "-". Weights must be finite and > 0.
func (o Options) Weights(key string, def float64) (func(string) float64, error) {
	v, ok := o.Lookup(key)
	w := map[string]float64{}
	if ok && v != "" {
		for _, part := range strings.Split(v, "/") {
			name, num, found := strings.Cut(part, "@")
			f, err := strconv.ParseFloat(num, 64)
			if !found || name == "" || err != nil || !(f > 0) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("policy %s: %s=%q: want tenant@weight pairs separated by /, weights > 0 (%q is not one)", o.policy, key, v, part)
			}
			if name == "-" {
				name = ""
			}
			if _, dup := w[name]; dup {
				return nil, fmt.Errorf("policy %s: %s=%q: tenant %q given twice", o.policy, key, v, name)
			}
			w[name] = f
		}
	}
	return func(t string) float64 {
		if f, ok := w[t]; ok {
			return f
		}
		return def
	}, nil
}
