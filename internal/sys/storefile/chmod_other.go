//go:build !linux

package storefile

import (
	"golang.org/x/sys/unix"
)

// chmodDir sets the mode of the directory just made at path, if it is
// still a directory and not a symbolic link.
func chmodDir(path string, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	return unix.Fchmodat(unix.AT_FDCWD, path, mode, 0)
}
