package pool

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// TestMain runs up to eight tests at once: most of them wait (on child
// processes, timers, a queue's wake-ups) rather than compute. Their
// helper processes exit without the race detector's one-second pause.
func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }
