package dirpool

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// TestMain runs up to eight tests at once: most of them wait (on child
// processes, timers, a queue's wake-ups) rather than compute. Their
// helper processes exit without the race detector's one-second pause.
//
// The state, log and rotation bounds are made small (the protocol's are
// pinned by TestBoundsAreTheProtocols): the tests of what happens over
// them would otherwise write, read and parse files of 4 and 64 MiB
// under the race detector, a third of the package's time.
func TestMain(m *testing.M) {
	protocolBounds = [3]int{maxStateBytes, maxLogBytes, logRotateBytes}
	maxStateBytes, maxLogBytes, logRotateBytes = 64<<10, 1<<20, 64<<10
	testrun.Main(m, testrun.Parallel(8))
}

// TestBoundsAreTheProtocols: the bounds the binaries use are
// docs/PROTOCOL.md's (§1, §6.9).
func TestBoundsAreTheProtocols(t *testing.T) {
	if protocolBounds != [3]int{4 << 20, 64 << 20, 4 << 20} {
		t.Errorf("bounds %v; PROTOCOL.md says 4 MiB, 64 MiB, 4 MiB", protocolBounds)
	}
}

// protocolBounds are the bounds as the binaries have them, before
// TestMain makes them small.
var protocolBounds [3]int
