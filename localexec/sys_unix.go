//go:build unix

package localexec

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a new process group, run as u when u
// is not nil.
func ownGroup(cmd *exec.Cmd, u *User) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	return nil
}

// signalGroup sends sig to process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

// exists reports whether a process pid exists (zombies included).
func exists(pid int) bool { return syscall.Kill(pid, 0) == nil }
