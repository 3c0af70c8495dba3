// Package b is a fixture of testrun's tests: a package whose tests run
// the installed commands, beside another in one go test run.
package b

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

func TestMain(m *testing.M) { testrun.Main(m) }

func TestCommands(t *testing.T) {
	dir := testrun.Commands(t, "")
	if _, err := os.Stat(filepath.Join(dir, "lease")); err != nil {
		t.Fatal(err)
	}
	t.Logf("commands in %s", dir)
}
