package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/procgroup"
)

// child is the command, started in a process group of its own (a session
// of its own on a pseudo-terminal).
type child struct {
	cmd    *exec.Cmd
	pgid   int
	term   *ptyLink    // pty mode
	fg     *foreground // plain mode in a terminal's foreground
	exited chan struct{}
	state  *os.ProcessState
	err    error
}

// lookPath finds the program of argv[0] as a shell would, in the PATH of
// env, and tells a missing program (127) from one that cannot be run (126).
func lookPath(name, dir string, env []string) (string, int, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		status, err := checkExecutable(p, name)
		return p, status, err
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	notExec := ""
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		status, err := checkExecutable(p, name)
		if err == nil {
			return p, 0, nil
		}
		if status == ExitNotExecutable && notExec == "" {
			notExec = p
		}
	}
	if notExec != "" {
		return "", ExitNotExecutable, fmt.Errorf("%w: %s: permission denied", ErrStart, notExec)
	}
	return "", ExitNotFound, fmt.Errorf("%w: %s: command not found in PATH", ErrStart, name)
}

func checkExecutable(p, name string) (int, error) {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ExitNotFound, fmt.Errorf("%w: %s: no such file", ErrStart, name)
	case err != nil:
		return ExitNotExecutable, fmt.Errorf("%w: %s: %v", ErrStart, name, err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return ExitNotExecutable, fmt.Errorf("%w: %s: not an executable file", ErrStart, name)
	}
	return 0, nil
}

// startChild starts path with argv on the session's streams: on a
// pseudo-terminal of its own when usePty, else on the streams as they are.
func startChild(o *Options, path string, argv, env []string, usePty bool) (*child, error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: o.Dir}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	if usePty {
		t, err := startOnPty(cmd, o.Stdin.(*os.File), o.Stdout)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		c.term = t
	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.fg = takeForeground(o.Stdin, cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			c.fg.restore()
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
	}
	c.pgid = cmd.Process.Pid
	go func() {
		c.err = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	return c, nil
}

// signal sends sig to the child's whole process group.
func (c *child) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.pgid, sig)
}

// status is the child's exit status as a shell reports it.
func (c *child) status() int {
	if c.state == nil {
		return ExitNotExecutable
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitSignalBase + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// finish runs once the child has exited: what it left in its group gets
// SIGTERM and, at deadline (the end of a grace already running, or a new
// one), SIGKILL; then the terminal is given back.
func (c *child) finish(deadline time.Time) {
	grace := max(time.Until(deadline), 0)
	if procgroup.Alive(c.pgid) {
		c.signal(syscall.SIGTERM)
		for procgroup.Alive(c.pgid) && time.Now().Before(deadline) {
			time.Sleep(groupPoll)
		}
		if procgroup.Alive(c.pgid) {
			c.signal(syscall.SIGKILL)
		}
	}
	if c.term != nil {
		c.term.close(max(grace, time.Second))
	}
	c.fg.restore()
}

// groupPoll is how often a stopping group is checked for members.
const groupPoll = 10 * time.Millisecond
