//go:build !linux

package testrun

import "errors"

var errNoSpool = errors.New("testrun: no run directory on this system")

// spool is Linux's (it needs /proc and pidfds): elsewhere each package's
// line goes to the go command's output beside its "ok" line.
func spool(string, map[string][]string) error { return errNoSpool }

// sharedCommands is Linux's too: elsewhere each test binary builds the
// commands for itself.
func sharedCommands(string) (string, error) { return "", errNoSpool }
