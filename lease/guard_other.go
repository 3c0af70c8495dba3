//go:build unix && !linux

package lease

import (
	"io/fs"
	"os"
	"path/filepath"
)

// createGuard makes the guard directory with mkdir, then records its holder.
func createGuard(path string, holder []byte) error {
	if err := os.Mkdir(path, 0o777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(path, holderFile), holder, 0o666); err != nil {
		_ = os.RemoveAll(path)
		return err
	}
	return nil
}

func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fs.ErrExist
	}
	return os.Rename(from, to)
}

// self records only the pid off Linux: guards there are judged by age.
func self() guardHolder { return guardHolder{PID: os.Getpid()} }

func holderAlive(*guardHolder) (bool, string, bool) { return false, "", false }
