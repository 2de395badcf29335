package policy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tide-sched/tide/solver"
)

// TestNeedsSolverFlag checks the NeedsSolver flags instead of trusting
// them: this test binary runs again with GLPK made unloadable, and there
// every policy flagged NeedsSolver must refuse to build, saying why, and
// every other one must build.
func TestNeedsSolverFlag(t *testing.T) {
	if os.Getenv("TIDE_POLICY_NOGLPK_CHILD") == "1" {
		if solver.Available() == nil {
			t.Fatal("GLPK still loads")
		}
		for _, i := range All() {
			_, err := Parse(i.Name, Context{})
			if err != nil && strings.Contains(err.Error(), "pass dist=FILE") {
				continue // needs a knob, not a solver
			}
			switch {
			case i.NeedsSolver && err == nil:
				t.Errorf("%s is flagged NeedsSolver but builds without GLPK", i.Name)
			case i.NeedsSolver && !strings.Contains(err.Error(), "GLPK"):
				t.Errorf("%s without GLPK: %v (want a message naming GLPK)", i.Name, err)
			case !i.NeedsSolver && err != nil:
				t.Errorf("%s is not flagged NeedsSolver but fails without GLPK: %v", i.Name, err)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNeedsSolverFlag$", "-test.v")
	cmd.Env = append(os.Environ(), "TIDE_POLICY_NOGLPK_CHILD=1", "TIDE_GLPK_LIB=/nonexistent/libglpk.so.40")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child without GLPK: %v\n%s", err, out)
	}
}
