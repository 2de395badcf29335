// Package examples holds tide's example jobs; this test checks the ones
// no other test runs.
package examples

import (
	"os/exec"
	"testing"
)

// TestPyTorchScriptParses checks that pytorch/train.py is valid Python
// (PyTorch itself is not needed, nor installed by the tests).
func TestPyTorchScriptParses(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: pytorch/train.py not checked")
	}
	out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", "pytorch/train.py").CombinedOutput()
	if err != nil {
		t.Fatalf("pytorch/train.py: %v\n%s", err, out)
	}
}
