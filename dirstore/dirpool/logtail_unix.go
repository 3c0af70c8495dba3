//go:build unix

package dirpool

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// readTail returns the last limit bytes of the regular file path, from its
// first whole line on: for a log grown past what is read whole (by a
// writer that never rotates it). Like every store read it never follows
// a symlink and never blocks on a FIFO.
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	off := max(fi.Size()-limit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, limit))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		for i, c := range data {
			if c == '\n' {
				return data[i+1:], nil
			}
		}
		return nil, nil
	}
	return data, nil
}
