//go:build unix

package gitstore

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and makes its
// cancellation (the call's timeout) kill the whole group: git's helpers
// (ssh, git-remote-https, upload-pack over file://) die with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
