//go:build !linux

package testrun

import "errors"

// sharedCommands is Linux's (it needs /proc to name the go command's
// run): elsewhere each test binary builds the commands for itself.
func sharedCommands(string) (string, error) {
	return "", errors.New("testrun: no run directory on this system")
}
