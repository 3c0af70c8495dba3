//go:build unix && !linux

package provision

import "syscall"

// intoCgroup does nothing: there are no cgroups off Linux.
func intoCgroup(*syscall.SysProcAttr, int) {}
