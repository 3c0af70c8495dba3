//go:build unix && !linux

package procgroup

import "syscall"

// Alive reports whether any process, zombies included, is in the
// process group pgid.
func Alive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
