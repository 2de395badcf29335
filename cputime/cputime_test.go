package cputime

import "testing"

// TestProcessGrows: a fixed amount of busy work (about 0.1 CPU-s) raises the
// CPU time read.
func TestProcessGrows(t *testing.T) {
	before := Process()
	if before < 0 {
		t.Skip("no CPU time on this system")
	}
	x := 0
	for i := range 100_000_000 {
		x += i ^ (x >> 3)
	}
	after := Process()
	if !(after > before) {
		t.Fatalf("CPU time went from %v to %v after busy work (%d)", before, after, x)
	}
}
