package lease

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// TestMain runs up to eight tests at once (most of them wait on
// processes and timers rather than compute), and starts their helper
// processes (this binary again) without the race detector's one-second
// pause at each exit.
func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }
