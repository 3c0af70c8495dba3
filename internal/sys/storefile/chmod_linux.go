package storefile

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// chmodDir sets the mode of the directory just made at path through an
// O_PATH descriptor of that very directory: never a symbolic link put in
// its place, and whatever mode a umask gave it (a directory made 0000 can
// still be opened so).
func chmodDir(path string, mode uint32) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	err = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
	if err == unix.ENOENT { // no /proc: by name, as long as it is the same directory
		var a, b unix.Stat_t
		if unix.Fstat(fd, &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino {
			err = unix.Fchmodat(unix.AT_FDCWD, path, mode, 0)
		}
	}
	return err
}
