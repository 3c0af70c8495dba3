package testrun

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Commands returns a directory holding the module's commands (./cmd/...)
// built as the README installs them (CGO_ENABLED=0), with the build tags
// tags if any, for the tests that run the installed binaries. They are
// built once for the whole run of the go command (the first package to
// ask builds them, the others wait for it and share them) and removed
// when it exits; where the parent is not the go command, once per test
// binary, removed when [Run] ends.
func Commands(t testing.TB, tags string) string {
	t.Helper()
	dir, err := BuildCommands(tags)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	return dir
}

// BuildCommands is [Commands] for a TestMain, before there is a test.
func BuildCommands(tags string) (string, error) {
	dir, err := sharedCommands(tags)
	var failed *buildError
	switch {
	case err == nil:
		return dir, nil
	case errors.As(err, &failed):
		return "", err // the build itself failed: building again would too
	}
	// No run directory to share (not run by the go command): build for
	// this binary alone.
	own.Lock()
	defer own.Unlock()
	if dir, ok := own.dirs[tags]; ok {
		return dir, nil
	}
	dir, err = os.MkdirTemp("", "durable-lease-commands-")
	if err != nil {
		return "", err
	}
	if err := build(dir, tags); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if own.dirs == nil {
		own.dirs = map[string]string{}
	}
	own.dirs[tags] = dir
	return dir, nil
}

// own are the commands this binary built for itself, by tags.
var own struct {
	sync.Mutex
	dirs map[string]string
}

// removeOwnCommands removes them, as the binary ends.
func removeOwnCommands() {
	own.Lock()
	defer own.Unlock()
	for _, dir := range own.dirs {
		os.RemoveAll(dir)
	}
	own.dirs = nil
}

// buildError is a failed go build of the commands.
type buildError struct{ err error }

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// build builds ./cmd/... into dir; its failures are *buildError.
func build(dir, tags string) error {
	if err := goBuild(dir, tags); err != nil {
		return &buildError{err}
	}
	return nil
}

func goBuild(dir, tags string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building the commands: %w", err)
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "./cmd/...")
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("CGO_ENABLED=0 go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// moduleRoot is the nearest directory up from the working directory (go
// test runs a package's tests in its directory) that holds go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
