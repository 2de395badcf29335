//go:build !unix

package localexec

import (
	"errors"
	"os/exec"
	"syscall"
)

var errUnsupported = errors.New("localexec: process groups need a Unix system")

func ownGroup(_ *exec.Cmd, u *User) error {
	if u != nil {
		return errUnsupported
	}
	return nil
}

func signalGroup(int, syscall.Signal) error { return errUnsupported }

func exists(int) bool { return false }
