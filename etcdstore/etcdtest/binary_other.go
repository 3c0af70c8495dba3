//go:build !linux

package etcdtest

import (
	"errors"
	"testing"
)

func startBinary(testing.TB, string, *Member, string, string, *TLSFiles, Timing) (running, error) {
	return running{}, errors.New("etcdtest: " + EnvBinary + " is supported on Linux only")
}
