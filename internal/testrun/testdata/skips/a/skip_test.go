// Package a is a fixture of testrun's tests: a package whose tests skip,
// for a run of go test over several packages.
package a

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testrun"
)

func TestMain(m *testing.M) { testrun.Main(m) }

func TestRuns(t *testing.T) {}

func TestSkipsa(t *testing.T) { testrun.Skip(t, "the fixture's reason in a") }

func TestMissinga(t *testing.T) { testrun.Missing(t, "no frobnicator here") }
