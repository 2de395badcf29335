//go:build race

package race

// Enabled is true: built with -race.
const Enabled = true
