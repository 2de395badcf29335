// Package solvertest holds test helpers for code that solves LPs with GLPK.
package solvertest

import (
	"os"
	"testing"

	"github.com/tide-sched/tide/solver"
)

// SkipEnv is the environment variable that lets tests needing GLPK skip
// when it is missing. Without it they fail: scripts/test installs GLPK, so a
// missing library in CI is a broken setup, not a reason to test less.
const SkipEnv = "TIDE_NO_GLPK"

// Require fails t when GLPK cannot be loaded, or skips it when TIDE_NO_GLPK
// is set to a non-empty value.
func Require(t testing.TB) {
	t.Helper()
	err := solver.Available()
	if err == nil {
		return
	}
	if os.Getenv(SkipEnv) != "" {
		t.Skipf("%v; skipped because %s is set", err, SkipEnv)
	}
	t.Fatalf("%v\n(scripts/test installs it when run as root; set %s=1 to skip the tests that need it)", err, SkipEnv)
}
