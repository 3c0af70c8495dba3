//go:build !dltestclock

package testclock

import "github.com/durable-lease/durable-lease/lease"

// Enabled reports whether this binary honours EnvVar: not without the
// build tag dltestclock.
const Enabled = false

// FromEnv returns nil: a binary built without the tag dltestclock ignores
// EnvVar, whatever it holds.
func FromEnv() (lease.Clock, error) { return nil, nil }
