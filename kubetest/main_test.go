package kubetest

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, when the benchmark started this binary as
// a scheduler process (schedEnv set), that scheduler: the benchmark
// measures each scheduler in a process of its own so its CPU time is its
// own.
func TestMain(m *testing.M) {
	if spec := os.Getenv(schedEnv); spec != "" {
		os.Exit(schedulerMain(spec))
	}
	os.Exit(m.Run())
}
