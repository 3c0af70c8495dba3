//go:build unix && !linux

package runner

import "syscall"

// groupAlive reports whether any process, zombies included, is in the
// process group pgid.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
