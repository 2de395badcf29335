//go:build !unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

// execKube runs tide-kube as a child with this process's input and output
// (there is no exec(2) here) and returns its failure.
func execKube(path string, args []string, stdout, stderr io.Writer) error {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
