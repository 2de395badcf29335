//go:build !unix

package localexec

import (
	"errors"
	"os/exec"
	"syscall"
)

var errUnsupported = errors.New("localexec: process groups need a Unix system")

func ownGroup(*exec.Cmd) {}

func signalGroup(int, syscall.Signal) error { return errUnsupported }

func exists(int) bool { return false }
