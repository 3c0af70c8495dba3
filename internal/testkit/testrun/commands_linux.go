package testrun

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// The packages of one go test run share one build of the commands: it
// lives in a directory of the run's own in TMPDIR, named after the go
// command's process (its PID and start time, which name it across PID
// reuse), private to this user. A run directory whose go command is gone
// is removed by the next binary that makes one, so no process is left to
// clean up after a run.

// runDirPrefix begins the name of every run directory.
const runDirPrefix = "durable-lease-testrun-"

// runDir is the directory of the go command's run that started this
// binary, made if need be. It fails where the parent is not the go
// command.
func runDir() (string, error) {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil {
		return "", err
	}
	if base := filepath.Base(exe); base != "go" && !strings.HasPrefix(base, "go1") {
		return "", errors.New("not run by the go command")
	}
	st, err := procfs.ReadStat(ppid)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%d", runDirPrefix, ppid, st.Start))
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		sweepRunDirs(dir)
	case !errors.Is(err, fs.ErrExist):
		return "", err
	}
	if err := ours(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// sweepRunDirs removes the run directories of this user's whose go
// command has exited, but keep.
func sweepRunDirs(keep string) {
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, runDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		path := filepath.Join(os.TempDir(), name)
		pidText, startText, _ := strings.Cut(rest, "-")
		pid, err1 := strconv.Atoi(pidText)
		start, err2 := strconv.ParseUint(startText, 10, 64)
		if path == keep || err1 != nil || err2 != nil || ours(path) != nil {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.Start == start {
			continue // that run goes on
		}
		os.RemoveAll(path)
	}
}

// ours checks that dir is a directory (not a link to one) of this user's
// that no one else may enter: another local user could otherwise plant a
// build, or a link, in a run directory they guessed the name of.
func ours(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of this user's", dir)
	}
	return nil
}

// sharedCommands returns the run's build of the commands with tags,
// building it if no package has yet: under the run directory's lock for
// those tags, into a directory renamed into place once complete.
func sharedCommands(tags string) (string, error) {
	dir, err := runDir()
	if err != nil {
		return "", err
	}
	name := "bin"
	if tags != "" {
		name += fmt.Sprintf("-%x", sha256.Sum256([]byte(tags)))[:16]
	}
	bin := filepath.Join(dir, name)
	lock, err := os.OpenFile(bin+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	for {
		err := unix.Flock(int(lock.Fd()), unix.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return "", err
		}
	}
	if fi, err := os.Lstat(bin); err == nil && fi.IsDir() {
		return bin, nil
	}
	// A build that failed fails every package the same way: the first
	// says why, the others repeat it rather than the build.
	if fi, err := os.Lstat(bin + ".failed"); err == nil && fi.Mode().IsRegular() {
		b, _ := os.ReadFile(bin + ".failed")
		return "", &buildError{errors.New(string(b))}
	}
	tmp := bin + ".building"
	os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", err
	}
	if err := build(tmp, tags); err != nil {
		os.RemoveAll(tmp)
		os.WriteFile(bin+".failed", []byte(err.Error()), 0o600)
		return "", err
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
