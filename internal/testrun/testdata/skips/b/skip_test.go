// Package b is a fixture of testrun's tests: a package whose tests skip,
// for a run of go test over several packages.
package b

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testrun"
)

func TestMain(m *testing.M) { testrun.Main(m) }

func TestRuns(t *testing.T) {}

func TestSkipsb(t *testing.T) { testrun.Skip(t, "the fixture's reason in b") }

func TestMissingb(t *testing.T) { testrun.Missing(t, "no frobnicator here") }
