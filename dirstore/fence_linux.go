package dirstore

import (
	"errors"

	"golang.org/x/sys/unix"
)

// getFenceAttr reads a user attribute of the store directory itself: the
// l- calls never follow a symlink at dir (a symlinked store has no
// attribute of its own, so the file is used).
func getFenceAttr(dir, name string) ([]byte, error) {
	buf := make([]byte, maxFenceBytes)
	n, err := unix.Lgetxattr(dir, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func setFenceAttr(dir, name string, value []byte) error {
	return unix.Lsetxattr(dir, name, value, 0)
}

// attrAbsent reports an attribute that is simply not there, or that the
// filesystem or the directory cannot have: the file is used then.
func attrAbsent(err error) bool {
	return errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM)
}
