//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// execKube replaces this process with tide-kube, so that a container's
// signals (SIGTERM on a rollout) and exit code are the scheduler's own.
func execKube(path string, args []string, _, _ io.Writer) error {
	argv := append([]string{path}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil // not reached: Exec returns only on failure
}
