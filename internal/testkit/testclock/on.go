//go:build dltestclock

package testclock

import (
	"os"

	"github.com/durable-lease/durable-lease/lease"
)

// Enabled reports whether this binary honours EnvVar (built with the tag
// dltestclock).
const Enabled = true

// FromEnv returns the clock EnvVar fixes, or nil when the variable is
// unset or empty. A value that is not a valid instant is an error: a
// conformance run must not silently fall back to the wall clock.
func FromEnv() (lease.Clock, error) {
	s := os.Getenv(EnvVar)
	if s == "" {
		return nil, nil
	}
	c, err := parse(s)
	if err != nil {
		return nil, err
	}
	return c, nil
}
