//go:build unix

package gitstore

import (
	"os/exec"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// ownGroup runs cmd in a process group of its own and makes its
// cancellation (the call's timeout) kill the whole group: git's helpers
// (ssh, git-remote-https, upload-pack over file://) die with it. The
// group is signalled by package procgroup, the one place the project's
// commands are ended as a whole; a group already gone reads as
// os.ErrProcessDone, which os/exec takes for "nothing left to cancel".
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return procgroup.New(cmd.Process.Pid).Signal(syscall.SIGKILL) }
}
