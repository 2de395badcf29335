//go:build !race

package race

// Enabled is false: built without -race.
const Enabled = false
