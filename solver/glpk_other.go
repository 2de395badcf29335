//go:build !(linux || darwin || freebsd)

package solver

import "fmt"

// On this system tide does not load shared libraries at run time.
type glpk struct{}

func load() (*glpk, error) {
	return nil, fmt.Errorf("%w (loading GLPK is supported on Linux, macOS and FreeBSD)", ErrNoGLPK)
}

func (g *glpk) solve(*Model, Options) (*Solution, error) { panic("unreachable") }

// Version is the version of the GLPK library loaded, or an error when it
// cannot be loaded.
func Version() (string, error) {
	_, err := load()
	return "", err
}
