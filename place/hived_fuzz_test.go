package place

import (
	"strings"
	"testing"
)

// FuzzParseHiveD checks that any placer spec either parses into VCs with
// non-empty tenants, positive GPU counts and lower-case types, each tenant
// once, or fails with an error naming the placer; never a panic.
func FuzzParseHiveD(f *testing.F) {
	for _, s := range []string{"", "vc=a@8", "vc=a@8/b@4@V100", "vc=a@0", "vc=@1", "vc=a@1:vc=b@2", "vc=a@1/a@2", "cells=2", "vc=a@1@", "vc=a@99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, opts string) {
		h, err := ParseHiveD(opts)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "placer hived: ") {
				t.Fatalf("error %q does not name the placer", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, vc := range h.VCs {
			if vc.Tenant == "" || vc.GPUs < 1 || vc.Type != strings.ToLower(vc.Type) || seen[vc.Tenant] {
				t.Fatalf("ParseHiveD(%q) gave a bad VC %+v", opts, vc)
			}
			seen[vc.Tenant] = true
		}
	})
}
