package provision

import "syscall"

// intoCgroup makes a program started with attr begin inside the cgroup
// fd (clone3 with CLONE_INTO_CGROUP).
func intoCgroup(attr *syscall.SysProcAttr, fd int) {
	if fd >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
}
