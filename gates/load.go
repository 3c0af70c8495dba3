package gates

import (
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
)

// Load reads the gate file at path and parses it with [Parse].
//
// Only a regular file (or a symlink to one) is read: a directory, FIFO,
// socket or device is refused without reading from it, so naming
// /dev/zero or a pipe cannot hang or exhaust memory. A file over 1 MiB is
// refused.
func Load(path string) (*Gate, error) {
	data, err := readGateFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// readGateFile returns the contents of the regular file at path, at most
// maxFileSize bytes.
func readGateFile(path string) ([]byte, error) {
	// O_NONBLOCK makes opening a FIFO return at once instead of waiting for
	// a writer; it has no effect on reading a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, ioError(path, "cannot open gate file", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, ioError(path, "cannot stat gate file", err)
	}
	if !info.Mode().IsRegular() {
		return nil, errorAt(path, 0, 0, "gate file is %s, not a regular file", storefile.DescribeMode(info.Mode()))
	}
	if info.Size() > maxFileSize {
		return nil, tooLarge(path)
	}
	// The file may grow after fstat, so the read is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, ioError(path, "cannot read gate file", err)
	}
	if len(data) > maxFileSize {
		return nil, tooLarge(path)
	}
	return data, nil
}

func tooLarge(path string) *Error {
	return errorAt(path, 0, 0, "gate file is larger than %d bytes (1 MiB)", maxFileSize)
}

// ioError reports an operating-system failure; the *Error also matches
// err with errors.Is.
func ioError(path, what string, err error) *Error {
	reason := err
	if pe, ok := err.(*fs.PathError); ok {
		reason = pe.Err // the path is already in the message
	}
	e := errorAt(path, 0, 0, "%s: %v", what, reason)
	e.cause = err
	return e
}
