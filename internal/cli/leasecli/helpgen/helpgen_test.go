package helpgen

import (
	"bytes"
	"os"
	"testing"
)

// TestHelpIsUpToDate: help_gen.go is what Render writes from the grammar
// now, so the help the lease executable prints is kong's, verb by verb.
func TestHelpIsUpToDate(t *testing.T) {
	want, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../help_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/cli/leasecli/help_gen.go is out of date: run go generate ./internal/cli/leasecli")
	}
}
