package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoKubernetesInTide: the simulator's binary links no Kubernetes code,
// so `go run ./cmd/tide sim` on a fresh machine compiles none of it (the
// cold start the README reports). tide kube lives in cmd/tide-kube.
func TestNoKubernetesInTide(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on $PATH to list dependencies with")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var k8s []string
	deps := strings.Fields(string(out))
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") ||
			p == "github.com/tide-sched/tide/kube" {
			k8s = append(k8s, p)
		}
	}
	if len(k8s) > 0 {
		t.Errorf("cmd/tide depends on %d Kubernetes packages (first: %s); keep them in cmd/tide-kube", len(k8s), k8s[0])
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages; the check above saw nothing:\n%s", len(deps), out)
	}
}

// TestKubeNotInstalled: without tide-kube beside tide or on $PATH, tide
// kube says how to run it and fails as a usage error; tide help kube says
// the same and succeeds.
func TestKubeNotInstalled(t *testing.T) {
	if _, err := findKube(); err == nil {
		// A tide-kube beside the test binary would be exec'd in place of it.
		self, _ := os.Executable()
		if _, err := os.Stat(filepath.Join(filepath.Dir(self), kubeBinary)); err == nil {
			t.Skip("a tide-kube lies beside the test binary")
		}
	}
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := tide(t, "kube", "--policy", "fifo")
	if code != 2 || !strings.Contains(stderr, "go run ./cmd/tide-kube") {
		t.Errorf("tide kube without tide-kube: exit %d, want 2 and how to run it:\n%s", code, stderr)
	}
	code, _, stderr = tide(t, "help", "kube")
	if code != 0 || !strings.Contains(stderr, "go install ./cmd/tide ./cmd/tide-kube") {
		t.Errorf("tide help kube without tide-kube: exit %d, want 0 and how to install it:\n%s", code, stderr)
	}
}

// TestKubeExec: tide kube runs tide-kube from $PATH in place of itself,
// with the same arguments and exit code. The stand-in tide-kube is a shell
// script; the test binary re-runs itself so that exec replaces a child.
func TestKubeExec(t *testing.T) {
	if os.Getenv("TIDE_TEST_KUBE_EXEC") == "1" {
		os.Exit(run([]string{"kube", "--policy", "tiresias", "--quota", "a=1"}, os.Stdout, os.Stderr))
	}
	sh, err := exec.LookPath("sh")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("no sh for a stand-in tide-kube")
	}
	dir := t.TempDir()
	script := "#!" + sh + "\necho \"tide-kube got: $*\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, kubeBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKubeExec$")
	cmd.Env = append(os.Environ(), "TIDE_TEST_KUBE_EXEC=1", "PATH="+dir)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 7 {
		t.Fatalf("tide kube with a tide-kube on $PATH: %v, want exit 7 from it\n%s", err, out)
	}
	if want := "tide-kube got: --policy tiresias --quota a=1"; !strings.Contains(string(out), want) {
		t.Errorf("output %q lacks %q", out, want)
	}
}
