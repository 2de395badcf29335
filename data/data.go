// Package data holds the files tide ships inside its binary: the Pollux
// artifact's measured model profiles and its eight Philly-sampled workloads
// (petuum/adaptdl, branch osdi21-artifact, simulator/, Apache-2.0; see NOTICE).
package data

import "embed"

// FS holds pollux/profiles/<model>/... and pollux/workloads/workload-<N>.csv.
//
//go:embed pollux
var FS embed.FS

// DefaultTrace is the trace `tide sim` replays when given none.
const DefaultTrace = "pollux/workloads/workload-6.csv"

// ProfilesDir is the directory of the Pollux profiles inside FS.
const ProfilesDir = "pollux/profiles"
