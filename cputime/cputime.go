// Package cputime reads the CPU time this process has used, for the
// benchmarks that report CPU-seconds beside wall time: on a shared, loaded
// machine wall time mostly measures the wait for a core, CPU time the work.
package cputime

// Process returns the user + system CPU seconds this process (all its
// threads: the garbage collector's included) has used so far, or -1 where
// the operating system does not say.
func Process() float64 { return process() }
