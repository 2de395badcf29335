// Package cudatest serves the tests that need a real NVIDIA GPU and
// PyTorch built with CUDA: they skip, saying why, on machines without.
package cudatest

import (
	"os/exec"
	"strings"
	"testing"
)

// Python skips t unless this machine has an NVIDIA GPU (nvidia-smi lists
// GPU 0) and a python3 whose PyTorch sees CUDA, and returns that python.
// what names the test's needs in the skip message. -short skips too: these
// tests train for minutes.
func Python(t testing.TB, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(what + " (skipped with -short)")
	}
	if out, err := exec.Command("nvidia-smi", "-L").CombinedOutput(); err != nil || !strings.Contains(string(out), "GPU 0") {
		t.Skipf("no NVIDIA GPU on this machine (nvidia-smi -L: %v %s): %s", err, strings.TrimSpace(string(out)), what)
	}
	py := "python3"
	if out, err := exec.Command(py, "-c", "import torch; assert torch.cuda.is_available()").CombinedOutput(); err != nil {
		t.Skipf("%s has no PyTorch with CUDA: %v %s", py, err, out)
	}
	return py
}
