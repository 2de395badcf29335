package enginetest

import (
	"os"
	"path/filepath"
	"testing"
)

// SharedData is the shared folder of real traces and tables,
// ../shared/data relative to the repository root (the folder holding
// go.mod); tb is skipped when it is absent.
func SharedData(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("repository root (go.mod) not found")
		}
		dir = parent
	}
	data := filepath.Join(dir, "..", "shared", "data")
	if _, err := os.Stat(data); err != nil {
		tb.Skipf("shared data not found at %s (../shared/data relative to the repository root); skipping", data)
	}
	return data
}
