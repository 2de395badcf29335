package contract

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Weights are per-tenant weights, a knob written "tenant@w/tenant@w" (for
// example tickets=team-a@3/team-b@1); the tenant "" (jobs with no tenant)
// is written "-". Weights are finite and > 0; a tenant not listed weighs 1.
type Weights map[string]float64

// Of is tenant's weight.
func (w Weights) Of(tenant string) float64 {
	if f, ok := w[tenant]; ok {
		return f
	}
	return 1
}

// weights reads the Weights knob key (Decode).
func (o Options) weights(key string, def Weights) (Weights, error) {
	v, ok := o.Lookup(key)
	if !ok || v == "" {
		return def, nil
	}
	w := Weights{}
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
	return w, nil
}
