//go:build !linux

package etcdtest

import (
	"errors"
	"testing"
)

func startBinary(testing.TB, string, *Member, string, string, *TLSFiles) (func(), <-chan struct{}, error) {
	return nil, nil, errors.New("etcdtest: " + EnvBinary + " is supported on Linux only")
}
