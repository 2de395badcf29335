package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// kubeBinary is the Kubernetes scheduler's own binary (cmd/tide-kube). It
// is apart from this one so that tide sim builds without the Kubernetes
// client; TestNoKubernetesInTide keeps it that way.
const kubeBinary = "tide-kube"

const kubeMissing = `tide kube runs tide as a Kubernetes scheduler. It is a binary of its own,
tide-kube, so that the simulator builds without the Kubernetes client, and
it was found neither beside this tide (%s) nor on $PATH. Either run it
from the repository:

    go run ./cmd/tide-kube [flags]

or install both binaries, after which 'tide kube [flags]' runs it:

    go install ./cmd/tide ./cmd/tide-kube

Its flags: go run ./cmd/tide-kube -h; docs/kubernetes.md tells the rest.
`

// cmdKube runs tide-kube with args in place of this process (its flags,
// output, exit code and signals are tide-kube's), or explains where to get
// it when it is not installed.
func cmdKube(args []string, stdout, stderr io.Writer) error {
	path, err := findKube()
	if err != nil {
		self, _ := os.Executable()
		fmt.Fprintf(stderr, kubeMissing, filepath.Dir(self))
		if len(args) > 0 && isHelp(args[0]) {
			return nil
		}
		return usageError{errors.New("tide-kube is not installed")}
	}
	return execKube(path, args, stdout, stderr)
}

// findKube looks for tide-kube beside the running executable (an install
// or an image holding both), then on $PATH.
func findKube() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), kubeBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(kubeBinary)
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}
