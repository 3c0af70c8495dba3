//go:build !race

package testrun

// Race is true in a test binary built with -race.
const Race = false
