// Package race says whether the binary was built with Go's race detector
// (go test -race, which scripts/test runs on the packages that start
// goroutines).
//
// Under the detector sync.Pool drops items at random and the
// instrumentation allocates, so a test that counts allocations
// (testing.AllocsPerRun) would fail there for no fault of the code: such a
// test calls SkipAllocs first.
package race

import "testing"

// SkipAllocs skips tb when the race detector is on, saying why.
func SkipAllocs(tb testing.TB) {
	tb.Helper()
	if Enabled {
		tb.Skip("counts allocations, which the race detector changes (go test without -race runs it)")
	}
}
