// Package testclock lets a conformance run drive the CLIs from a clock of
// its own: in a binary built with the build tag dltestclock, the variable
// DL_TEST_NOW_MS (milliseconds since the Unix epoch) fixes the time every
// lease and pool operation of that process reads. A binary built without
// the tag, as every release is, ignores the variable: [FromEnv] returns no
// clock and the CLIs use the wall clock.
package testclock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// EnvVar names the variable a test build reads.
const EnvVar = "DL_TEST_NOW_MS"

// Fixed is a clock that always reads the same instant. It has no boot
// clock, so a store judges records by the wall-clock rule alone, as the
// Node tool does.
type Fixed time.Time

// Now returns the fixed instant.
func (f Fixed) Now() time.Time { return time.Time(f) }

// maxMs bounds the variable to the years JavaScript's Date can represent
// (±8.64e15 ms), the range the Node suite's clock lives in.
const maxMs = 8_640_000_000_000_000

// parse reads a value of EnvVar: a whole number of milliseconds since the
// epoch, within JavaScript's Date range.
func parse(s string) (Fixed, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < -maxMs || ms > maxMs {
		return Fixed{}, fmt.Errorf("%s=%q must be a whole number of milliseconds since the epoch, within ±%d", EnvVar, s, int64(maxMs))
	}
	return Fixed(time.UnixMilli(ms).UTC()), nil
}

// StoreOptions returns the lease options that install the clock of
// [FromEnv]: none in a release build, or when EnvVar is unset.
func StoreOptions() ([]lease.Option, error) {
	c, err := FromEnv()
	if err != nil || c == nil {
		return nil, err
	}
	return []lease.Option{lease.WithClock(c)}, nil
}
