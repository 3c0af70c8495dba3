package testrun

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// In package list mode (go test ./...) the go command discards what a
// passing package's test binary prints, and prints its "ok" lines in
// package order as the binaries finish, so no binary can print after the
// last of them. Each binary that skipped tests instead leaves a record of
// its skips in the run's spool, a directory of its own in TMPDIR named
// after the go command's process (its PID and start time), and the first
// one starts the run's reporter: this binary again, in reporter mode,
// detached from the go command's pipes (so that the go command does not
// wait for it) but holding the go command's standard output and a pidfd
// of the go command. When the go command exits, the reporter merges the
// records into one line, appends it to that output and removes the spool.
//
// The run's directory also holds the commands [Commands] built for the
// run's packages; the reporter removes it all.
//
// A pipe (go test ./... | tail, or CI's log) gets the line last, since
// its reader waits for the reporter to close it. A terminal has no such
// order: the shell prints its prompt once the go command exits, so the
// reporter writes a little before, once the go command has had no child
// for a moment (see reporter). That comes before the prompt in a run of
// many packages, when the go command takes a while to clean up; after a
// run of a few, it may come just after.

// reportEnv, in the reporter's environment, is the spool it reports.
const reportEnv = "DL_TESTRUN_REPORT"

// The reporter's descriptors, after stdin, stdout and stderr (/dev/null).
const (
	fdOut  = 3 // the go command's standard output
	fdGo   = 4 // a pidfd of the go command
	fdLock = 5 // the spool's lock, held while the reporter lives
)

func init() {
	if dir := os.Getenv(reportEnv); dir != "" {
		os.Exit(reporter(dir))
	}
}

// record is what one test binary leaves in the spool.
type record struct {
	Pkg     string              `json:"pkg"`
	Skipped map[string][]string `json:"skipped"` // reason -> test names
}

// runDir is the directory of the go command's run that started this
// binary, in TMPDIR, made if need be: private to this user, named after
// the go command's PID and start time. It fails where the parent is not
// the go command.
func runDir() (string, error) {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil {
		return "", err
	}
	if base := filepath.Base(exe); base != "go" && !strings.HasPrefix(base, "go1") {
		return "", errors.New("not run by the go command")
	}
	start, err := startTime(ppid)
	if err != nil {
		return "", err
	}
	dir := runDirName(ppid, start)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if err := ours(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// runDirName is the run directory of the go command pid, started at
// start.
func runDirName(pid int, start uint64) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("durable-lease-testrun-%d-%d", pid, start))
}

// spool leaves this binary's skips in the run's directory and makes sure
// the run has a reporter. It fails, and the caller prints the line itself,
// where this binary is not run by the go command in package list mode,
// or the spool cannot be used.
func spool(pkg string, skips map[string][]string) error {
	if err := goParent(os.Getppid()); err != nil {
		return err
	}
	dir, err := runDir()
	if err != nil {
		return err
	}
	b, err := json.Marshal(record{Pkg: pkg, Skipped: skips})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(os.Getpid())+".json"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return werr
	}
	// The record is in place: a reporter that is alive, or one that a
	// binary is starting now, will read it. If none is, start one.
	if err := ensureReporter(dir); err != nil {
		// No reporter (no pidfds here, say): say what the spool holds
		// now, this binary's record among it, and leave the rest to
		// later binaries.
		if line := merge(dir, true); line != "" {
			if out, oerr := goStdout(); oerr == nil {
				fmt.Fprintln(out, line)
				out.Close()
			}
		}
	}
	return nil
}

// ensureReporter starts the reporter of the run whose directory is dir,
// unless one is alive (it holds the directory's lock).
func ensureReporter(dir string) error {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil // the reporter holds it
		}
		return err
	}
	return startReporter(dir, os.Getppid(), lock)
}

// startReporter starts the run's reporter, handing it lock (held).
func startReporter(dir string, ppid int, lock *os.File) error {
	// A terminal or a pipe. Not a regular file: the shell that redirected
	// the go command shares one offset with it, and its next command
	// would write over a line appended after the go command's exit. Not
	// a socket either (it cannot be opened anew). Then the reporter only
	// removes the directory.
	out, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", ppid), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		if fi, serr := out.Stat(); serr != nil || fi.Mode().IsRegular() {
			out.Close()
			err = errors.New("a regular file")
		}
	}
	if err != nil {
		if out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return err
		}
	}
	defer out.Close()
	pidfd, err := unix.PidfdOpen(ppid, 0)
	if err != nil {
		return err
	}
	gofd := os.NewFile(uintptr(pidfd), "pidfd")
	defer gofd.Close()
	if os.Getppid() != ppid {
		return errors.New("the go command is gone")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reportEnv+"="+dir, RaceEnv())
	cmd.ExtraFiles = []*os.File{out, gofd, lock}
	// A session of its own: a signal to the run's process group (^C, an
	// IDE's stop, a CI job cancelled) ends the go command, not the
	// reporter, which then still reports and removes the directory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// reporter waits for the go command to exit, then appends the merged
// line to its output and removes the spool.
func reporter(dir string) int {
	// An interrupt of the run (^C reaches the whole process group) ends
	// the go command; the reporter still reports what ran, and cleans up.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE)
	// Only a run directory of this user's: a DL_TESTRUN_REPORT set by
	// mistake removes nothing. (The go command may be gone already, and
	// its /proc entry with it: the name is checked, not the process.)
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(filepath.Base(dir), "durable-lease-testrun-%d-%d", &pid, &start); err != nil ||
		dir != runDirName(pid, start) || ours(dir) != nil {
		return 2
	}
	out := os.NewFile(fdOut, "go stdout")
	defer out.Close()
	// At a terminal the shell prints its prompt as soon as the go command
	// exits, so the line goes out a little before: once the go command
	// has had no child process (no test binary, compiler or linker) for
	// idleBeforeExit, its last "ok" line is out and it is on its way out.
	// Should the go command start another child after all, the line is
	// written again at its exit if it changed, so nothing is lost.
	early := ""
	if _, err := unix.IoctlGetTermios(fdOut, unix.TCGETS); err == nil && pidIs(fdGo, pid) {
		if !waitGo(idleBeforeExit, func() bool { return hasChildren(pid) }) {
			early = merge(dir, false)
			if early != "" {
				fmt.Fprintln(out, early)
			}
		}
	}
	if !waitGo(0, nil) {
		return 2
	}
	// The line first, then the cleaning up: at a terminal every
	// microsecond counts against the prompt.
	if line := merge(dir, false); line != "" && line != early {
		fmt.Fprintln(out, line)
	}
	os.RemoveAll(dir)
	return 0
}

// idleBeforeExit is how long the go command must have had no child
// before a reporter at a terminal takes it for finished.
const idleBeforeExit = 30 * time.Millisecond

// waitGo waits for the go command (the pidfd fdGo) to exit and reports
// whether it did; with busy, it returns false instead once busy has said
// false for idle, checking every idle/3.
func waitGo(idle time.Duration, busy func() bool) bool {
	fds := []unix.PollFd{{Fd: fdGo, Events: unix.POLLIN}}
	timeout := -1
	if busy != nil {
		timeout = int((idle / 3).Milliseconds())
	}
	quiet := time.Duration(0)
	for {
		n, err := unix.Poll(fds, timeout)
		switch {
		case err != nil && !errors.Is(err, unix.EINTR):
			return false
		case n > 0:
			// POLLIN: the go command exited; POLLNVAL or POLLERR: fdGo
			// is no pidfd, and nothing is known.
			return fds[0].Revents&unix.POLLIN != 0
		case busy == nil || err != nil:
			continue
		}
		if busy() {
			quiet = 0
			continue
		}
		if quiet += idle / 3; quiet >= idle {
			return false
		}
	}
}

// pidIs reports whether pidfd refers to the live process pid, by its
// fdinfo (which says -1 once the process is gone).
func pidIs(pidfd, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && n == pid
		}
	}
	return false
}

// hasChildren reports whether process pid has a child, in any of its
// threads; unreadable counts as yes.
func hasChildren(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil || len(strings.TrimSpace(string(b))) > 0 {
			return true
		}
	}
	return false
}

// merge reads the spool's records, and when remove, removes them; it
// returns their skips as one line, or "" for none.
func merge(dir string, remove bool) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	all := map[string]map[string][]string{} // package -> reason -> tests
	for _, name := range names {
		b, err := readRecord(name)
		if remove {
			os.Remove(name)
		}
		var r record
		if err != nil || json.Unmarshal(b, &r) != nil {
			continue
		}
		if all[r.Pkg] == nil {
			all[r.Pkg] = map[string][]string{}
		}
		for why, tests := range r.Skipped {
			all[r.Pkg][why] = append(all[r.Pkg][why], tests...)
		}
	}
	return mergedLine(all)
}

// readRecord reads the regular file name, not following a link and not
// waiting on a FIFO planted in its place.
func readRecord(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil, errors.New("not a record")
	}
	return io.ReadAll(f)
}

// mergedLine is the run's closing line: how many tests skipped, then for
// each package its skipped tests grouped by reason.
func mergedLine(all map[string]map[string][]string) string {
	pkgs := make([]string, 0, len(all))
	n := 0
	for pkg, skips := range all {
		pkgs = append(pkgs, pkg)
		for _, tests := range skips {
			n += len(tests)
		}
	}
	if n == 0 {
		return ""
	}
	sort.Strings(pkgs)
	parts := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		parts[i] = pkg + ": " + byReason(all[pkg])
	}
	return fmt.Sprintf("testrun: skipped %s in %s: %s", plural(n, "test"), plural(len(pkgs), "package"), strings.Join(parts, "; "))
}

// startTime is the start time of process pid, in clock ticks after boot:
// with the PID, it names the process across PID reuse.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis. starttime is field 22; the state,
	// field 3, comes first after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("unreadable /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ours checks that dir is a directory (not a link to one) of this user's
// that no one else may enter: another local user could otherwise plant
// records, or a link, in a spool they guessed the name of.
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
	// The reporter removes the run's directory once the go command exits.
	if err := ensureReporter(dir); err != nil {
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
	if b, err := readRecord(bin + ".failed"); err == nil {
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
