package storefile

import (
	"fmt"
	"io/fs"
)

// DescribeMode names what a file of mode m is, for a message that
// refuses anything but a regular file ("… is a named pipe (FIFO), not a
// regular file"): the one wording of the CLIs, the gate file loader and
// the store's files.
func DescribeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsRegular():
		return "a regular file"
	}
	return fmt.Sprintf("a file of mode %v", m)
}
