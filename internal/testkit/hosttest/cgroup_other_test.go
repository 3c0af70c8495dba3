//go:build !linux

package hosttest

import "syscall"

// intoCgroup does nothing: there are no cgroups off Linux.
func intoCgroup(*syscall.SysProcAttr, int) {}
