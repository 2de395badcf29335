package solvertest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tide-sched/tide/solver/solvertest"
)

// TestRequire runs this test binary again without GLPK (TIDE_GLPK_LIB
// pointing nowhere): Require must fail the test, or skip it when
// TIDE_NO_GLPK is set, never pass it silently.
func TestRequire(t *testing.T) {
	if os.Getenv("TIDE_SOLVERTEST_CHILD") == "1" {
		solvertest.Require(t)
		return
	}
	for _, c := range []struct {
		skipEnv string
		want    string
		fails   bool
	}{
		{"", "--- FAIL", true},
		{"1", "--- SKIP", false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequire$", "-test.v")
		cmd.Env = append(os.Environ(), "TIDE_SOLVERTEST_CHILD=1", "TIDE_GLPK_LIB=/nonexistent/libglpk.so.40", solvertest.SkipEnv+"="+c.skipEnv)
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fails || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "GLPK not found") {
			t.Errorf("%s=%q: exit %v, want %s with the reason:\n%s", solvertest.SkipEnv, c.skipEnv, err, c.want, out)
		}
	}
}
