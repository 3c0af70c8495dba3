package dirstore

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// TestMain starts the tests' helper processes (this binary again) without
// the race detector's one-second pause at each exit.
func TestMain(m *testing.M) { testrun.Main(m) }
