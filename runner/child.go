package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
